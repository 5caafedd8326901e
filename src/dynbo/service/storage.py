"""The service's SQLite file: studies, their event log and their checkpoints.

One file in WAL mode with ``synchronous=FULL``, separate from the harness result store:

* ``studies``: one row per study (its policy, bounds, options, seed, clock, creation time);
* ``events``: the log of every accepted ``suggest`` (the time it was asked at, the query
  it returned) and ``observe`` (``x``, ``t``, ``y``, the answers to additional queries,
  the client's idempotency key and the response sent), numbered ``seq = 1, 2, ...`` per
  study. Each event is one transaction, committed before its response is sent;
* ``checkpoints``: the newest ``Policy.state_dict`` of a study (``torch.save`` bytes) and
  the ``seq`` of the last event it includes.

A study is rebuilt as its checkpoint plus the events after it, replayed in order. Floats
are stored exactly (``REAL`` is IEEE double; JSON arrays are written with ``repr``).
"""

from __future__ import annotations

import io
import json
import math
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dynbo.sqlite_files import check_store_file, store_path

__all__ = ["DamagedLog", "Event", "ServiceStore", "StudyRecord", "plain"]

#: 2 added ``studies.max_dataset_size``; 3 the ``forget`` events (``events.forgets`` and
#: ``events.reason``); 4 several queries out per study (``studies.max_pending`` and
#: ``studies.pending_expiry``) and an observation's constraint values
#: (``events.constraints``). An older store is migrated when opened.
SCHEMA_VERSION = 4

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS studies (
    name TEXT PRIMARY KEY,
    policy TEXT NOT NULL,
    bounds TEXT NOT NULL,
    options TEXT NOT NULL,
    seed INTEGER NOT NULL,
    clock TEXT NOT NULL CHECK (clock IN ('wall', 'client')),
    created_at REAL NOT NULL,
    max_dataset_size INTEGER,
    max_pending INTEGER,
    pending_expiry REAL
);
CREATE TABLE IF NOT EXISTS events (
    study TEXT NOT NULL REFERENCES studies(name) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('suggest', 'observe', 'forget')),
    query_id INTEGER,
    asked_t REAL,
    x TEXT NOT NULL,
    t REAL NOT NULL,
    y REAL,
    additional TEXT NOT NULL,
    idempotency_key TEXT,
    response TEXT,
    dataset_size INTEGER NOT NULL,
    seconds REAL NOT NULL,
    diagnostics TEXT,
    wall REAL NOT NULL,
    forgets INTEGER,
    reason TEXT,
    constraints TEXT,
    PRIMARY KEY (study, seq)
);
CREATE UNIQUE INDEX IF NOT EXISTS events_key
    ON events (study, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE TABLE IF NOT EXISTS checkpoints (
    study TEXT PRIMARY KEY REFERENCES studies(name) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    state BLOB NOT NULL,
    wall REAL NOT NULL
);
"""


#: the older schemas a store migrates from, and the statements that bring each one up
#: to the next version (run in the transaction that records the new version)
def _without(schema: str, *parts: str) -> str:
    for part in parts:
        assert part in schema, part
        schema = schema.replace(part, "")
    return schema


_PENDING_PARTS = (",\n    max_pending INTEGER,\n    pending_expiry REAL", "\n    constraints TEXT,")
_FORGET_PARTS = (", 'forget'", "\n    forgets INTEGER,\n    reason TEXT,")
_OLDER_SCHEMAS = {
    3: _without(_SCHEMA, *_PENDING_PARTS),
    2: _without(_SCHEMA, *_PENDING_PARTS, *_FORGET_PARTS),
    1: _without(_SCHEMA, *_PENDING_PARTS, *_FORGET_PARTS, ",\n    max_dataset_size INTEGER"),
}
#: the events table's columns of version 2, in order (what its rebuild copies)
_EVENT_COLUMNS_V2 = (
    "study, seq, kind, query_id, asked_t, x, t, y, additional, idempotency_key, response, "
    "dataset_size, seconds, diagnostics, wall"
)
_MIGRATIONS = {
    1: ("ALTER TABLE studies ADD COLUMN max_dataset_size INTEGER",),
    # SQLite cannot change a CHECK constraint: the events table is rebuilt (its index is
    # dropped with the old table and made again by the schema)
    2: (
        "ALTER TABLE events RENAME TO events_v2",
        _OLDER_SCHEMAS[3][
            _OLDER_SCHEMAS[3].index("CREATE TABLE IF NOT EXISTS events") : _OLDER_SCHEMAS[3].index(
                "CREATE UNIQUE INDEX"
            )
        ]
        .strip()
        .rstrip(";"),
        f"INSERT INTO events ({_EVENT_COLUMNS_V2}) SELECT {_EVENT_COLUMNS_V2} FROM events_v2",
        "DROP TABLE events_v2",
    ),
    3: (
        "ALTER TABLE studies ADD COLUMN max_pending INTEGER",
        "ALTER TABLE studies ADD COLUMN pending_expiry REAL",
        "ALTER TABLE events ADD COLUMN constraints TEXT",
    ),
}


def plain(value: Any) -> Any:
    """``value`` as JSON-ready Python: arrays and tensors as lists, NaN and inf as ``None``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, np.generic):
        return plain(value.item())
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "tolist"):  # a torch tensor, without importing torch here
        return plain(value.tolist())
    return str(value)


def _dumps(value: Any) -> str:
    return json.dumps(plain(value), allow_nan=False, separators=(",", ":"))


@dataclass(frozen=True)
class StudyRecord:
    """A study as created: ``bounds`` is ``(2, d)``, ``created_at`` Unix seconds."""

    name: str
    policy: str
    bounds: list[list[float]]
    options: dict[str, Any]
    seed: int
    clock: str
    created_at: float
    #: the most observations the study's policy may keep (``None``: no cap)
    max_dataset_size: int | None = None
    #: the most queries out (returned, not answered) at once
    max_pending: int = 1
    #: study-clock seconds after which a query out stops counting as out (``None``: never)
    pending_expiry: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "policy": self.policy,
            "bounds": self.bounds,
            "options": self.options,
            "seed": self.seed,
            "clock": self.clock,
            "created_at": self.created_at,
            "max_dataset_size": self.max_dataset_size,
            "max_pending": self.max_pending,
            "pending_expiry": self.pending_expiry,
        }


@dataclass(frozen=True)
class Event:
    """One logged ``suggest``, ``observe`` or ``forget`` of a study.

    Attributes:
        seq: 1, 2, ... within the study.
        kind: ``"suggest"``, ``"observe"`` or ``"forget"`` (a retracted observation:
            ``x``, ``t``, ``y`` are the forgotten observation's).
        query_id: the query returned (suggest) or answered (observe; ``None`` for an
            observation that answers no query).
        asked_t: the time ``suggest`` was called with (``None`` for an observe).
        x: ``(d,)`` the query's or the observation's point.
        t: the query's time, or the observation's.
        y: the observed value (``None`` for a suggest).
        additional: a suggest's ``(m, d)`` additional points; an observe's answers
            ``[{"x": (d,), "t": .., "y": ..}, ...]``.
        idempotency_key: the client's key of an observe (``None`` if it gave none).
        response: the JSON response sent for an observe.
        dataset_size: the policy's dataset size after the event.
        seconds: wall-clock seconds of the policy call.
        diagnostics: a suggest's ``Diagnostics.as_dict()``.
        wall: Unix time the event was committed.
        forgets: a forget's target: the ``seq`` of the observe event it retracts.
        reason: a forget's reason, as the client gave it.
        constraints: an observe's constraint values ``{name: value}`` (``None``: none).
    """

    seq: int
    kind: str
    query_id: int | None
    asked_t: float | None
    x: list[float]
    t: float
    y: float | None
    additional: list[Any]
    idempotency_key: str | None
    response: dict[str, Any] | None
    dataset_size: int
    seconds: float
    diagnostics: dict[str, Any] | None
    wall: float
    forgets: int | None = None
    reason: str | None = None
    constraints: dict[str, float] | None = None

    def as_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "response"}
        return plain(out)


_EVENT_COLUMNS = (
    "seq, kind, query_id, asked_t, x, t, y, additional, idempotency_key, response, "
    "dataset_size, seconds, diagnostics, wall, forgets, reason, constraints"
)


class DamagedLog(ValueError):
    """An event or checkpoint row of the store cannot be read (changed outside the service)."""


def _event(row: Sequence[Any], study: str) -> Event:
    try:
        return _decode_event(row)
    except (ValueError, TypeError, KeyError) as err:  # json.JSONDecodeError is a ValueError
        raise DamagedLog(
            f"event {row[0]!r} of study {study!r} in the service store cannot be read "
            f"({type(err).__name__}: {err})"
        ) from None


def _decode_event(row: Sequence[Any]) -> Event:
    x = json.loads(row[4])
    if not isinstance(x, list) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in x
    ):
        raise ValueError(f"x is not a list of numbers: {row[4]!r:.80}")
    additional = json.loads(row[7])
    if not isinstance(additional, list):
        raise ValueError(f"additional is not a list: {row[7]!r:.80}")
    return Event(
        seq=int(row[0]),
        kind=row[1],
        query_id=None if row[2] is None else int(row[2]),
        asked_t=row[3],
        x=x,
        t=float(row[5]),
        y=row[6],
        additional=additional,
        idempotency_key=row[8],
        response=None if row[9] is None else json.loads(row[9]),
        dataset_size=int(row[10]),
        seconds=float(row[11]),
        diagnostics=None if row[12] is None else json.loads(row[12]),
        wall=float(row[13]),
        forgets=None if row[14] is None else int(row[14]),
        reason=row[15],
        constraints=None if row[16] is None else json.loads(row[16]),
    )


class ServiceStore:
    """The service's SQLite file (see the module docstring); safe to share between threads.

    Args:
        path: the file (created with its directory if missing).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = store_path(path, "service store")
        # before any write (the journal mode is one): a wrong file stays as it was
        check_store_file(
            self.path,
            kind="service store",
            schema=_SCHEMA,
            version_key="schema_version",
            version=SCHEMA_VERSION,
            older=_OLDER_SCHEMAS,
        )
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                str(self.path), check_same_thread=False, isolation_level=None, timeout=30.0
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._create_schema()
        except (sqlite3.Error, OSError) as err:
            raise ValueError(f"cannot open service store {self.path}: {err}") from None

    def _create_schema(self) -> None:
        with self._transaction() as db:
            has_meta = db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
            ).fetchone()
            row = None
            if has_meta:
                row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version = SCHEMA_VERSION if row is None else int(row[0])
            if version != SCHEMA_VERSION and version not in _MIGRATIONS:
                raise ValueError(
                    f"{self.path}: service store schema {row[0]}, this dynbo reads {SCHEMA_VERSION}"
                )
            # an older store is brought up to date in this one transaction: all or nothing
            while version != SCHEMA_VERSION:
                for statement in _MIGRATIONS[version]:
                    db.execute(statement)
                version += 1
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute(
                "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
            )

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: committed, or rolled back whole, even if ``COMMIT`` fails.

        A failed ``COMMIT`` may leave the transaction open (SQLite rolls back after some
        errors, not all): it is rolled back here, so that the connection never shows a
        write that is not on disk and the next transaction can begin.
        """
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # ------------------------------------------------------------------ studies
    def create_study(self, record: StudyRecord) -> None:
        """Insert a study; ``ValueError`` if the name is taken."""
        try:
            with self._transaction() as db:
                db.execute(
                    "INSERT INTO studies VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        record.name,
                        record.policy,
                        _dumps(record.bounds),
                        _dumps(record.options),
                        record.seed,
                        record.clock,
                        record.created_at,
                        record.max_dataset_size,
                        record.max_pending,
                        record.pending_expiry,
                    ),
                )
        except sqlite3.IntegrityError:
            raise ValueError(f"a study named {record.name!r} exists already") from None

    def delete_study(self, name: str) -> bool:
        """Delete a study with its events and checkpoint; whether it existed."""
        with self._transaction() as db:
            db.execute("DELETE FROM checkpoints WHERE study = ?", (name,))
            db.execute("DELETE FROM events WHERE study = ?", (name,))
            return db.execute("DELETE FROM studies WHERE name = ?", (name,)).rowcount > 0

    def study(self, name: str) -> StudyRecord | None:
        rows = self._query("SELECT * FROM studies WHERE name = ?", (name,))
        return _study(rows[0]) if rows else None

    def studies(self) -> list[StudyRecord]:
        return [_study(r) for r in self._query("SELECT * FROM studies ORDER BY created_at, name")]

    def summaries(self) -> dict[str, dict[str, Any]]:
        """Per study: counts of suggestions, observations, forgotten observations and
        observations that violated a constraint (a measured value below 0), the last
        dataset size."""
        rows = self._query(
            "SELECT e.study, SUM(e.kind = 'suggest'), SUM(e.kind = 'observe'), MAX(e.seq), "
            "SUM(e.kind = 'forget'), "
            "SUM(e.constraints IS NOT NULL AND "
            "EXISTS (SELECT 1 FROM json_each(e.constraints) WHERE value < 0)), "
            "(SELECT dataset_size FROM events WHERE study = e.study ORDER BY seq DESC LIMIT 1) "
            "FROM events AS e GROUP BY e.study"
        )
        return {
            study: {
                "suggestions": int(suggestions),
                "observations": int(observations),
                "events": int(last),
                "forgotten": int(forgotten),
                "violations": int(violations),
                "dataset_size": int(size),
            }
            for study, suggestions, observations, last, forgotten, violations, size in rows
        }

    # ------------------------------------------------------------------ events
    def append(
        self,
        study: str,
        *,
        seq: int,
        kind: str,
        x: Sequence[float],
        t: float,
        dataset_size: int,
        seconds: float,
        query_id: int | None = None,
        asked_t: float | None = None,
        y: float | None = None,
        additional: Any = (),
        idempotency_key: str | None = None,
        response: Mapping[str, Any] | None = None,
        diagnostics: Mapping[str, Any] | None = None,
        forgets: int | None = None,
        reason: str | None = None,
        constraints: Mapping[str, float] | None = None,
    ) -> float:
        """Commit one event (one transaction); returns its wall time.

        Raises:
            sqlite3.Error: the event was not stored (e.g. the disk is full).
        """
        wall = time.time()
        with self._transaction() as db:
            db.execute(
                f"INSERT INTO events (study, {_EVENT_COLUMNS}) VALUES ({', '.join('?' * 18)})",
                (
                    study,
                    seq,
                    kind,
                    query_id,
                    asked_t,
                    _dumps(list(x)),
                    t,
                    y,
                    _dumps(additional),
                    idempotency_key,
                    None if response is None else _dumps(response),
                    dataset_size,
                    seconds,
                    None if diagnostics is None else _dumps(diagnostics),
                    wall,
                    forgets,
                    reason,
                    None if constraints is None else _dumps(dict(constraints)),
                ),
            )
        return wall

    def events(self, study: str, after: int = 0, limit: int | None = None) -> list[Event]:
        """The study's events with ``seq > after`` in order (the newest ``limit`` if given)."""
        if limit is None:
            rows = self._query(
                f"SELECT {_EVENT_COLUMNS} FROM events WHERE study = ? AND seq > ? ORDER BY seq",
                (study, after),
            )
        else:
            rows = self._query(
                f"SELECT {_EVENT_COLUMNS} FROM events WHERE study = ? AND seq > ? "
                "ORDER BY seq DESC LIMIT ?",
                (study, after, limit),
            )[::-1]
        return [_event(r, study) for r in rows]

    def event(self, study: str, seq: int) -> Event | None:
        """The study's event ``seq`` (``None`` if there is none)."""
        rows = self._query(
            f"SELECT {_EVENT_COLUMNS} FROM events WHERE study = ? AND seq = ?", (study, seq)
        )
        return _event(rows[0], study) if rows else None

    def forget_of(self, study: str, seq: int) -> Event | None:
        """The ``forget`` event that retracted observation event ``seq``, if any."""
        rows = self._query(
            f"SELECT {_EVENT_COLUMNS} FROM events WHERE study = ? AND forgets = ?", (study, seq)
        )
        return _event(rows[0], study) if rows else None

    def event_by_key(self, study: str, key: str) -> Event | None:
        rows = self._query(
            f"SELECT {_EVENT_COLUMNS} FROM events WHERE study = ? AND idempotency_key = ?",
            (study, key),
        )
        return _event(rows[0], study) if rows else None

    # ------------------------------------------------------------------ checkpoints
    def save_checkpoint(self, study: str, seq: int, state: Mapping[str, Any]) -> None:
        """Replace the study's checkpoint with ``state`` (a ``Policy.state_dict``) at ``seq``."""
        import torch

        buffer = io.BytesIO()
        torch.save(dict(state), buffer)
        with self._transaction() as db:
            db.execute(
                "INSERT INTO checkpoints VALUES (?, ?, ?, ?) ON CONFLICT(study) DO UPDATE "
                "SET seq = excluded.seq, state = excluded.state, wall = excluded.wall",
                (study, seq, buffer.getvalue(), time.time()),
            )

    def checkpoint(self, study: str) -> tuple[int, dict[str, Any]] | None:
        """The newest checkpoint ``(seq, state)`` of a study, or ``None``."""
        import torch

        rows = self._query("SELECT seq, state FROM checkpoints WHERE study = ?", (study,))
        if not rows:
            return None
        try:
            state = torch.load(io.BytesIO(rows[0][1]), weights_only=True)
        except Exception as err:  # an unpickling error of any kind: the bytes were changed
            raise DamagedLog(
                f"the checkpoint of study {study!r} cannot be read ({type(err).__name__})"
            ) from None
        return int(rows[0][0]), state

    def checkpoint_seq(self, study: str) -> int:
        rows = self._query("SELECT seq FROM checkpoints WHERE study = ?", (study,))
        return int(rows[0][0]) if rows else 0


def _study(row: Sequence[Any]) -> StudyRecord:
    return StudyRecord(
        name=row[0],
        policy=row[1],
        bounds=json.loads(row[2]),
        options=json.loads(row[3]),
        seed=int(row[4]),
        clock=row[5],
        created_at=float(row[6]),
        max_dataset_size=None if row[7] is None else int(row[7]),
        # a study made before schema 4 had one query out, never expiring
        max_pending=1 if row[8] is None else int(row[8]),
        pending_expiry=None if row[9] is None else float(row[9]),
    )
