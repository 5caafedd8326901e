"""The embedded result store: one SQLite file (WAL mode) with campaigns, runs and iterations.

Writes are transactional and whole-run: a run's iteration records, timings and its
``done``/``failed`` status are committed together, so a campaign killed at any moment
(even by SIGKILL) leaves only complete runs behind and resumes without duplicates. A
run's primary key is the hash of what determines it (:attr:`RunSpec.run_id`), so the
same run is never stored twice, whichever campaign asks for it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dynbo.sqlite_files import check_store_file, store_path

if TYPE_CHECKING:  # pandas is an optional dependency (the harness extra)
    import pandas as pd

    from dynbo.harness.loop import RunResult, RunSpec


def _plain_json(value: Any) -> str:
    """:func:`to_json` of a value that holds only JSON types (sorted keys, compact)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def to_json(value: Any) -> str:
    """:func:`dynbo.harness.loop.to_json`, imported when a record is written: a store
    that is only read needs neither the run loop nor torch."""
    from dynbo.harness.loop import to_json as canonical_json

    return canonical_json(value)


__all__ = ["Store", "ITERATION_COLUMNS", "policy_variants"]

#: 2 added the iterations' ``violation`` flag and ``constraints`` values (constrained
#: benchmarks: :mod:`dynbo.harness.constraints`); a store of version 1 is migrated when
#: opened for writing and read as it is (both columns ``NULL``) when opened read-only.
SCHEMA_VERSION = 2

ITERATION_COLUMNS = (
    "run_id",
    "k",
    "warmup",
    "s",
    "t",
    "x",
    "y",
    "f",
    "f_max",
    "regret",
    "dataset_size",
    "response_time",
    "fit_seconds",
    "acquisition_seconds",
    "cleaning_seconds",
    "removed",
    "reset",
    "additional_queries",
    "hyperparameters",
    "extra",
    "violation",
    "constraints",
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS campaigns (
    campaign_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    config TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    benchmark TEXT NOT NULL,
    label TEXT NOT NULL,
    benchmark_options TEXT NOT NULL,
    policy TEXT NOT NULL,
    policy_options TEXT NOT NULL,
    seed INTEGER NOT NULL,
    protocol TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('done', 'failed')),
    error TEXT,
    summary TEXT NOT NULL,
    wall_seconds REAL NOT NULL,
    finished_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS campaign_runs (
    campaign_id TEXT NOT NULL REFERENCES campaigns(campaign_id),
    run_id TEXT NOT NULL,
    PRIMARY KEY (campaign_id, run_id)
);
CREATE TABLE IF NOT EXISTS campaign_labels (
    campaign_id TEXT NOT NULL REFERENCES campaigns(campaign_id),
    run_id TEXT NOT NULL,
    label TEXT NOT NULL,
    PRIMARY KEY (campaign_id, run_id)
);
CREATE TABLE IF NOT EXISTS iterations (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    k INTEGER NOT NULL,
    warmup INTEGER NOT NULL,
    s REAL NOT NULL,
    t REAL NOT NULL,
    x TEXT NOT NULL,
    y REAL NOT NULL,
    f REAL NOT NULL,
    f_max REAL NOT NULL,
    regret REAL NOT NULL,
    dataset_size INTEGER,
    response_time REAL,
    fit_seconds REAL,
    acquisition_seconds REAL,
    cleaning_seconds REAL,
    removed INTEGER,
    reset INTEGER,
    additional_queries INTEGER,
    hyperparameters TEXT,
    extra TEXT,
    violation INTEGER,
    constraints TEXT,
    PRIMARY KEY (run_id, k)
);
CREATE TABLE IF NOT EXISTS timings (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    k INTEGER NOT NULL,
    measured_seconds REAL NOT NULL,
    fit_seconds REAL,
    acquisition_seconds REAL,
    cleaning_seconds REAL,
    PRIMARY KEY (run_id, k)
);
"""


#: the columns version 2 added, and the schema of version 1 (what a migration starts from)
_ADDED_IN_2 = "\n    violation INTEGER,\n    constraints TEXT,"
_OLDER_SCHEMAS = {1: _SCHEMA.replace(_ADDED_IN_2, "")}
#: the statements that bring a store of each older version to the next one
_MIGRATIONS = {
    1: (
        "ALTER TABLE iterations ADD COLUMN violation INTEGER",
        "ALTER TABLE iterations ADD COLUMN constraints TEXT",
    ),
}


def _policy_entries(config: Mapping[str, Any] | None) -> list[tuple[str, dict, str | None]]:
    entries = []
    for item in (config or {}).get("policies", []) or []:
        if isinstance(item, str):
            entries.append((item, {}, None))
        elif isinstance(item, Mapping) and "name" in item:
            entries.append((str(item["name"]), dict(item.get("options") or {}), item.get("label")))
    return entries


def policy_variants(
    runs: Sequence[Mapping[str, Any]], config: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """``run_id -> variant name``: how reports tell configurations of one policy apart.

    The label of the campaign's policy entry whose options the run carries (the most
    specific one); otherwise, when the runs of one policy on one benchmark (label) have
    several option sets, the policy name followed by the options that differ there
    (``wdbo [acquisition_time=response]``); otherwise the policy name. Options that only
    change from benchmark to benchmark (a suite's per-entry settings, such as R-GP-UCB's
    block length per ``eps``) do not make variants.

    Args:
        runs: run rows of :meth:`Store.runs` (``run_id``, ``label``, ``policy``,
            ``policy_options``).
        config: the campaign's configuration (its ``policies`` entries' labels win).
    """
    entries = _policy_entries(config)
    option_sets: dict[tuple[str, str], set[str]] = defaultdict(set)
    for run in runs:
        key = (run["policy"], run["label"])
        option_sets[key].add(json.dumps(run["policy_options"], sort_keys=True))
    differing: dict[str, set[str]] = defaultdict(set)
    for (policy, _), texts in option_sets.items():
        sets = [json.loads(t) for t in texts]
        for k in {k for v in sets for k in v}:
            if len({json.dumps(v.get(k)) for v in sets}) > 1:
                differing[policy].add(k)
    out = {}
    for run in runs:
        policy, options = run["policy"], run["policy_options"]
        # a labelled entry of this policy whose options the run carries (the most specific)
        matches = [
            (len(own), label)
            for name, own, label in entries
            if name == policy
            and label
            and all(k in options and options[k] == v for k, v in own.items())
        ]
        if matches:
            out[run["run_id"]] = max(matches)[1]
        elif differing[policy]:
            keys = sorted(differing[policy])
            shown = ", ".join(f"{k}={options[k]}" for k in keys if k in options)
            out[run["run_id"]] = f"{policy} [{shown or 'defaults'}]"
        else:
            out[run["run_id"]] = policy
    return out


_REQUIRED_NUMBERS = ("k", "warmup", "s", "t", "y", "f", "f_max", "regret")


def _storable(result: RunResult) -> RunResult:
    """``result``, or a failed copy cut before its first record that cannot be stored."""
    for index, row in enumerate(result.iterations):
        for column in _REQUIRED_NUMBERS:
            value = row.get(column)
            if value is None or not math.isfinite(float(value)):
                message = (
                    f"ValueError: record k = {row.get('k')} has {column} = {value!r}; "
                    "a run with a non-finite value cannot be scored"
                )
                kept = result.iterations[:index]
                kept_ks = {r["k"] for r in kept}
                return dataclasses.replace(
                    result,
                    status="failed",
                    iterations=kept,
                    timings=[r for r in result.timings if r["k"] in kept_ks],
                    error=message if result.error is None else f"{message}\n{result.error}",
                )
    return result


class Store:
    """A dynbo result database.

    Args:
        path: the SQLite file (created if missing, unless ``read_only``).
        read_only: open an existing store for reading only: nothing is created or
            changed, on a read-only file system too (commands that only read use this).
    """

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = store_path(path, "result store")
        self.read_only = read_only
        self._label_table: bool | None = None
        if read_only:
            self._conn = self._open_read_only()
            return
        # before any write (the journal mode is one): a wrong file stays as it was
        check_store_file(
            self.path,
            kind="result store",
            schema=_SCHEMA,
            version_key="schema",
            version=SCHEMA_VERSION,
            older=_OLDER_SCHEMAS,
        )
        if self.path.parent and not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = sqlite3.connect(str(self.path), timeout=60.0, isolation_level=None)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute("PRAGMA foreign_keys=ON")
            with self._transaction():
                # executescript would commit on its own; run the statements one by one
                for statement in _OLDER_SCHEMAS[1].split(";"):
                    if statement.strip():
                        self._conn.execute(statement)
                row = self._conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
                # a new file gets version 1's tables and is migrated like an old store
                version = 1 if row is None else int(row[0])
                if version != SCHEMA_VERSION and version not in _MIGRATIONS:
                    raise ValueError(
                        f"{self.path} has store schema {row[0]}, this dynbo reads {SCHEMA_VERSION}"
                    )
                # an older store is brought up to date in this one transaction: all or nothing
                while version != SCHEMA_VERSION:
                    for statement in _MIGRATIONS[version]:
                        self._conn.execute(statement)
                    version += 1
                self._conn.execute(
                    "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema', ?)",
                    (str(SCHEMA_VERSION),),
                )
        except sqlite3.DatabaseError as err:
            raise ValueError(f"cannot open result store {self.path}: {err}") from None

    def _open_read_only(self) -> sqlite3.Connection:
        if not self.path.is_file():
            raise ValueError(f"no result store at {self.path}")
        # With no write-ahead log beside it no writer is active, and 'immutable' reads
        # without creating the -wal/-shm files a read-only WAL connection otherwise
        # leaves (and cannot create on a read-only file system). With a log, a
        # campaign may be writing: read through the log.
        wal = Path(f"{self.path}-wal")
        mode = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
        uri = f"{self.path.resolve().as_uri()}?{mode}"
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=60.0, isolation_level=None)
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            if not {"meta", "runs", "iterations", "campaigns"} <= tables:
                conn.close()
                raise ValueError(f"{self.path} is not a dynbo result store")
            row = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        except sqlite3.DatabaseError as err:
            raise ValueError(f"cannot read result store {self.path}: {err}") from None
        readable = {str(SCHEMA_VERSION), *(str(v) for v in _OLDER_SCHEMAS)}
        if row is None or row[0] not in readable:
            conn.close()
            raise ValueError(
                f"{self.path} has store schema {row and row[0]}, this dynbo reads {SCHEMA_VERSION}"
            )
        return conn

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    # ------------------------------------------------------------------ writes
    def add_campaign(self, campaign_id: str, name: str, config: dict[str, Any]) -> None:
        """Register a campaign (idempotent)."""
        with self._transaction():
            self._conn.execute(
                "INSERT OR IGNORE INTO campaigns(campaign_id, name, config, created_at) "
                "VALUES (?, ?, ?, ?)",
                (campaign_id, name, to_json(config), time.time()),
            )

    def link(
        self,
        campaign_id: str,
        run_ids: Iterable[str],
        labels: Mapping[str, str] | None = None,
    ) -> None:
        """Declare that a campaign consists of these runs (idempotent).

        Args:
            campaign_id: a campaign registered by :meth:`add_campaign`.
            run_ids: the ids of its runs.
            labels: ``run_id -> label``, the row the campaign shows each run in
                (:meth:`campaign_labels`); runs it leaves out show the label they were
                stored with.
        """
        run_ids = list(run_ids)
        with self._transaction():
            self._conn.executemany(
                "INSERT OR IGNORE INTO campaign_runs(campaign_id, run_id) VALUES (?, ?)",
                [(campaign_id, r) for r in run_ids],
            )
            if labels:
                self._write_labels(campaign_id, labels)

    def record_labels(self, campaign_id: str, labels: Mapping[str, str]) -> None:
        """Record the label the campaign shows each of its linked runs in (``run_id ->
        label``; ids the campaign does not link are ignored). For stores written before
        labels were records: whoever knows the campaign fills them in."""
        with self._transaction():
            self._write_labels(campaign_id, labels)

    def _write_labels(self, campaign_id: str, labels: Mapping[str, str]) -> None:
        self._conn.executemany(
            "INSERT OR REPLACE INTO campaign_labels(campaign_id, run_id, label) "
            "SELECT ?, ?, ? WHERE EXISTS (SELECT 1 FROM campaign_runs "
            "WHERE campaign_id = ? AND run_id = ?)",
            [(campaign_id, r, str(label), campaign_id, r) for r, label in labels.items()],
        )

    def save_run(self, result: RunResult) -> bool:
        """Store a run atomically; returns False if it was already stored as finished.

        A stored failure is replaced by the new outcome (a retry's success or new error).
        A record with a missing or non-finite value where the schema needs a number
        (a NaN from an objective) cannot be stored: the run is then stored as failed,
        with the records before it, so that a campaign goes on and a resume does not
        retry it.
        """
        result = _storable(result)
        spec = result.spec
        run_id = spec.run_id
        with self._transaction():
            exists = self._conn.execute(
                "SELECT status FROM runs WHERE run_id=?", (run_id,)
            ).fetchone()
            if exists is not None:
                if exists[0] == "done":
                    return False
                # a stored failure is replaced by the retry's outcome (success or the
                # new error)
                self._conn.execute("DELETE FROM iterations WHERE run_id=?", (run_id,))
                self._conn.execute("DELETE FROM timings WHERE run_id=?", (run_id,))
                self._conn.execute("DELETE FROM runs WHERE run_id=?", (run_id,))
            self._conn.execute(
                "INSERT INTO runs(run_id, benchmark, label, benchmark_options, policy, "
                "policy_options, seed, protocol, status, error, summary, wall_seconds, "
                "finished_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    run_id,
                    spec.benchmark,
                    spec.display_benchmark,
                    to_json(spec.benchmark_options),
                    spec.policy,
                    to_json(spec.policy_options),
                    int(spec.seed),
                    to_json(spec.protocol.as_dict()),
                    result.status,
                    result.error,
                    to_json(result.summary),
                    float(result.wall_seconds),
                    time.time(),
                ),
            )
            columns = ITERATION_COLUMNS
            self._conn.executemany(
                f"INSERT INTO iterations({', '.join(columns)}) "
                f"VALUES ({', '.join('?' for _ in columns)})",
                [
                    tuple(run_id if c == "run_id" else row.get(c) for c in columns)
                    for row in result.iterations
                ],
            )
            self._conn.executemany(
                "INSERT INTO timings(run_id, k, measured_seconds, fit_seconds, "
                "acquisition_seconds, cleaning_seconds) VALUES (?,?,?,?,?,?)",
                [
                    (
                        run_id,
                        r["k"],
                        r["measured_seconds"],
                        r["fit_seconds"],
                        r["acquisition_seconds"],
                        r["cleaning_seconds"],
                    )
                    for r in result.timings
                ],
            )
        return True

    # ------------------------------------------------------------------ reads
    def completed_run_ids(self, include_failed: bool = False) -> set[str]:
        """Ids of the stored runs (finished ones; failed ones too if asked)."""
        query = "SELECT run_id FROM runs" + ("" if include_failed else " WHERE status='done'")
        return {r[0] for r in self._conn.execute(query)}

    def campaign_ids(self) -> list[str]:
        return [r[0] for r in self._conn.execute("SELECT campaign_id FROM campaigns")]

    def campaigns(self) -> list[dict[str, Any]]:
        """Every campaign, oldest first: id, name, configuration, creation time, run counts.

        ``runs`` counts the runs linked to the campaign that are stored (``done`` and
        ``failed`` separately); ``linked`` counts every linked run.
        """
        rows = self._conn.execute(
            "SELECT c.campaign_id, c.name, c.config, c.created_at, "
            "COUNT(cr.run_id), "
            "SUM(CASE WHEN r.status = 'done' THEN 1 ELSE 0 END), "
            "SUM(CASE WHEN r.status = 'failed' THEN 1 ELSE 0 END) "
            "FROM campaigns c LEFT JOIN campaign_runs cr ON cr.campaign_id = c.campaign_id "
            "LEFT JOIN runs r ON r.run_id = cr.run_id "
            "GROUP BY c.campaign_id ORDER BY c.created_at, c.campaign_id"
        )
        return [
            {
                "campaign_id": cid,
                "name": name,
                "config": json.loads(config),
                "created_at": created,
                "linked": int(linked or 0),
                "done": int(done or 0),
                "failed": int(failed or 0),
            }
            for cid, name, config, created, linked, done, failed in rows
        ]

    def campaign_run_ids(self, campaign_id: str) -> list[str]:
        rows = self._conn.execute(
            "SELECT run_id FROM campaign_runs WHERE campaign_id=? ORDER BY run_id", (campaign_id,)
        )
        return [r[0] for r in rows]

    def runs(self, campaign_id: str | None = None) -> list[dict[str, Any]]:
        """Run rows (summary and options decoded), optionally of one campaign.

        With a campaign, ``label`` is the row that campaign shows the run in
        (:meth:`campaign_labels`).
        """
        query = "SELECT * FROM runs"
        params: tuple[Any, ...] = ()
        if campaign_id is not None:
            query += " WHERE run_id IN (SELECT run_id FROM campaign_runs WHERE campaign_id=?)"
            params = (campaign_id,)
        cursor = self._conn.execute(query + " ORDER BY label, policy, seed, run_id", params)
        names = [c[0] for c in cursor.description]
        labels = self.campaign_labels(campaign_id) if campaign_id is not None else {}
        out = []
        for row in cursor:
            record = dict(zip(names, row, strict=True))
            for key in ("benchmark_options", "policy_options", "protocol", "summary"):
                record[key] = json.loads(record[key])
            record["label"] = labels.get(record["run_id"], record["label"])
            out.append(record)
        if labels:
            out.sort(key=lambda r: (r["label"], r["policy"], r["seed"], r["run_id"]))
        return out

    def campaign_labels(self, campaign_id: str) -> dict[str, str]:
        """``run_id -> label``: the table row each run of the campaign belongs to.

        A run is stored once and may belong to several campaigns, which may show it
        under different labels (a benchmark entry labelled differently, the
        ``suite/label`` rows of a campaign of several suites); the runs table keeps the
        label of the campaign that stored it first, and the campaign's own labels are
        records beside its links (:meth:`link`). A run without such a record (a store
        written before labels were records, until its campaign runs again) keeps the
        stored label.
        """
        if not self._has_label_records():
            return {}
        rows = self._conn.execute(
            "SELECT run_id, label FROM campaign_labels WHERE campaign_id=?", (campaign_id,)
        )
        return dict(rows.fetchall())

    def unlabelled_campaigns(self) -> list[dict[str, Any]]:
        """The campaigns (as :meth:`campaigns` gives them) that link runs but hold no label
        records: those of a store written before labels were records."""
        if not self._has_label_records():
            return [c for c in self.campaigns() if c["linked"]]
        labelled = {r[0] for r in self._conn.execute("SELECT campaign_id FROM campaign_labels")}
        return [c for c in self.campaigns() if c["linked"] and c["campaign_id"] not in labelled]

    def _has_label_records(self) -> bool:
        # a writable store creates the table on opening; a store of the previous layout
        # opened read-only has none
        if self._label_table is None:
            found = self._conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='campaign_labels'"
            ).fetchone()
            self._label_table = found is not None
        return self._label_table

    def iteration_rows(self, run_ids: Iterable[str] | None = None) -> list[tuple[Any, ...]]:
        """Raw iteration rows ordered by ``(run_id, k)`` (the canonical table)."""
        # a store of version 1 opened read-only has no violation columns: NULL there
        present = {r[1] for r in self._conn.execute("PRAGMA table_info(iterations)")}
        selected = [c if c in present else f"NULL AS {c}" for c in ITERATION_COLUMNS]
        query = f"SELECT {', '.join(selected)} FROM iterations"
        if run_ids is not None:
            ids = list(run_ids)
            query += f" WHERE run_id IN ({', '.join('?' for _ in ids)})"
            return list(self._conn.execute(query + " ORDER BY run_id, k", ids))
        return list(self._conn.execute(query + " ORDER BY run_id, k"))

    # ------------------------------------------------------------------ exports
    def iterations_frame(self, campaign_id: str | None = None) -> pd.DataFrame:
        """Iterations joined with their run's benchmark, policy and seed (pandas)."""
        import pandas as pd

        query = (
            "SELECT r.label AS benchmark, r.policy, r.seed, i.* FROM iterations i "
            "JOIN runs r ON r.run_id = i.run_id"
        )
        params: tuple[Any, ...] = ()
        if campaign_id is not None:
            query += " WHERE i.run_id IN (SELECT run_id FROM campaign_runs WHERE campaign_id=?)"
            params = (campaign_id,)
        frame = pd.read_sql_query(query + " ORDER BY i.run_id, i.k", self._conn, params=params)
        if campaign_id is not None:
            labels = self.campaign_labels(campaign_id)
            mapped = frame["run_id"].map(labels)
            frame["benchmark"] = mapped.where(mapped.notna(), frame["benchmark"])
        return frame

    def runs_frame(self, campaign_id: str | None = None) -> pd.DataFrame:
        """One row per run of a campaign: its identity columns, then its summary metrics.

        The identity columns tell configurations apart: ``campaign_id``, ``benchmark``
        (the label), ``benchmark_name``, ``policy``, ``variant`` (:func:`policy_variants`),
        ``seed``, and the JSON of ``benchmark_options``, ``policy_options`` and
        ``protocol``. Without ``campaign_id``: the rows of every campaign (oldest first),
        each as that campaign's own frame gives them, so that a run that several
        campaigns share has one row per campaign (with that campaign's label and
        variant); a run that no campaign links (stored by :meth:`save_run` alone) has
        one row, with no ``campaign_id``.
        """
        import pandas as pd

        if campaign_id is not None:
            return pd.DataFrame(self._run_rows(campaign_id, self.runs(campaign_id)))
        rows = []
        for campaign in self.campaigns():
            cid = campaign["campaign_id"]
            rows += self._run_rows(cid, self.runs(cid), campaign["config"])
        linked = {row["run_id"] for row in rows}
        rows += self._run_rows(None, [r for r in self.runs() if r["run_id"] not in linked])
        return pd.DataFrame(rows)

    def _run_rows(
        self,
        campaign_id: str | None,
        runs: list[dict[str, Any]],
        config: Mapping[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        if campaign_id is not None and config is None:
            config = next(
                (c["config"] for c in self.campaigns() if c["campaign_id"] == campaign_id), None
            )
        variants = policy_variants(runs, config)
        rows = []
        for run in runs:
            row = {
                "campaign_id": campaign_id,
                "run_id": run["run_id"],
                "benchmark": run["label"],
                "benchmark_name": run["benchmark"],
                "policy": run["policy"],
                "variant": variants[run["run_id"]],
                "seed": run["seed"],
                "status": run["status"],
                "error": run["error"],
                "wall_seconds": run["wall_seconds"],
                # what tells configurations apart (JSON text, as stored)
                # read back from the store: plain JSON values, written as to_json does
                "benchmark_options": _plain_json(run["benchmark_options"]),
                "policy_options": _plain_json(run["policy_options"]),
                "protocol": _plain_json(run["protocol"]),
            }
            row.update(run["summary"])
            rows.append(row)
        return rows

    def export(
        self, directory: str | Path, fmt: str = "csv", campaign_id: str | None = None
    ) -> list[Path]:
        """Write ``runs`` and ``iterations`` tables as CSV or Parquet files into ``directory``."""
        if fmt not in ("csv", "parquet"):
            raise ValueError(f"export format must be 'csv' or 'parquet', got {fmt!r}")
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        paths = []
        for name, frame in (
            ("runs", self.runs_frame(campaign_id)),
            ("iterations", self.iterations_frame(campaign_id)),
        ):
            path = out / f"{name}.{fmt}"
            if fmt == "csv":
                frame.to_csv(path, index=False)
            else:
                frame.to_parquet(path, index=False)
            paths.append(path)
        return paths

    def run_spec_ids(self, specs: Iterable[RunSpec]) -> list[str]:
        return [s.run_id for s in specs]
