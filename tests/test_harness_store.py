import sqlite3

import pandas as pd
import pytest

from dynbo.harness import Protocol, RunSpec, Store, execute
from tests.toy import MovingPeak

FAST = {"raw_samples": 32, "restarts": 2, "fit_iterations": 20}


def toy_result(seed=0, fail_after=None):
    spec = RunSpec(
        benchmark="moving-peak",
        policy="gp-ucb",
        seed=seed,
        protocol=Protocol(
            clock="modeled", response_time=(0.5, 0, 0, 0), warmup=3, warmup_fraction=0.05
        ),
        policy_options=FAST,
    )
    return execute(spec, benchmark=MovingPeak(horizon=10.0, fail_after=fail_after))


def test_save_and_read_back(tmp_path):
    result = toy_result()
    with Store(tmp_path / "r.sqlite") as store:
        assert store.save_run(result)
        assert not store.save_run(result)  # never twice
        assert store.completed_run_ids() == {result.spec.run_id}
        rows = store.iteration_rows()
        assert len(rows) == len(result.iterations)
        runs = store.runs()
        assert runs[0]["summary"]["average_regret"] == pytest.approx(
            result.summary["average_regret"]
        )
        frame = store.iterations_frame()
        assert list(frame["k"]) == [r["k"] for r in result.iterations]
        assert set(frame["benchmark"]) == {"moving-peak"}
    # WAL mode on disk
    conn = sqlite3.connect(tmp_path / "r.sqlite")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_failed_run_is_stored_and_replaced_by_a_later_success(tmp_path):
    failed = toy_result(fail_after=3.0)
    assert failed.status == "failed"
    with Store(tmp_path / "r.sqlite") as store:
        store.save_run(failed)
        assert store.completed_run_ids() == set()
        assert store.completed_run_ids(include_failed=True) == {failed.spec.run_id}
        assert "offline" in store.runs()[0]["error"]
        ok = toy_result()
        assert ok.spec.run_id == failed.spec.run_id
        assert store.save_run(ok)
        assert store.completed_run_ids() == {ok.spec.run_id}
        assert len(store.iteration_rows()) == len(ok.iterations)


def test_interrupted_write_leaves_nothing(tmp_path):
    result = toy_result()
    result.iterations.append(dict(result.iterations[-1]))  # a repeated (run_id, k): write fails
    with Store(tmp_path / "r.sqlite") as store:
        with pytest.raises(sqlite3.IntegrityError):
            store.save_run(result)
        assert store.completed_run_ids(include_failed=True) == set()
        assert store.iteration_rows() == []


def test_a_record_with_nan_is_stored_as_a_failed_run_cut_before_it(tmp_path):
    result = toy_result()
    bad_k = result.iterations[5]["k"]
    result.iterations[5]["y"] = float("nan")
    with Store(tmp_path / "r.sqlite") as store:
        assert store.save_run(result)
        (run,) = store.runs()
        assert run["status"] == "failed" and "non-finite" in run["error"]
        assert [r[1] for r in store.iteration_rows()] == [r["k"] for r in result.iterations[:5]]
        assert bad_k not in [r[1] for r in store.iteration_rows()]


def test_export_csv_and_parquet(tmp_path):
    with Store(tmp_path / "r.sqlite") as store:
        store.save_run(toy_result(0))
        store.save_run(toy_result(1))
        csv_paths = store.export(tmp_path / "csv", "csv")
        pq_paths = store.export(tmp_path / "pq", "parquet")
        with pytest.raises(ValueError, match="format"):
            store.export(tmp_path / "x", "xlsx")
    runs = pd.read_csv(csv_paths[0])
    assert len(runs) == 2 and "average_regret" in runs
    iterations = pd.read_parquet(pq_paths[1])
    assert set(iterations["seed"]) == {0, 1}


def test_unreadable_store_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database, just text" * 100)
    with pytest.raises(ValueError, match="cannot open result store"):
        Store(bad)


# ---------------------------------------------------------------- wrong files
def _foreign_files(tmp_path):
    """A text file, another program's database and the other kind of dynbo store."""
    from dynbo.service.storage import ServiceStore

    text = tmp_path / "text.sqlite"
    text.write_text("not a database\n")
    foreign = tmp_path / "notes.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.execute("CREATE TABLE meta (id INTEGER, note TEXT)")
    conn.commit()
    conn.close()
    service = tmp_path / "service.sqlite"
    ServiceStore(service).close()
    # other programs' databases whose table names are dynbo's: runs, events, meta
    lookalikes = {}
    for name, statement in [
        ("runs", "CREATE TABLE runs (id INTEGER PRIMARY KEY, name TEXT)"),
        ("events", "CREATE TABLE events (id INTEGER PRIMARY KEY, name TEXT)"),
        ("meta", "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"),
    ]:
        lookalikes[f"lookalike-{name}"] = tmp_path / f"{name}.db"
        conn = sqlite3.connect(lookalikes[f"lookalike-{name}"])
        conn.execute(statement)
        conn.execute(f"INSERT INTO {name} VALUES ('1', 'mine')")
        conn.commit()
        conn.close()
    return {"text": text, "foreign": foreign, "service": service, **lookalikes}


def test_a_store_refuses_a_file_that_is_not_one_and_leaves_it_unchanged(tmp_path, capsys):
    from dynbo.cli import main
    from dynbo.service.storage import ServiceStore

    files = _foreign_files(tmp_path)
    result = tmp_path / "results.sqlite"
    Store(result).close()
    before = {name: path.read_bytes() for name, path in {**files, "result": result}.items()}
    lookalikes = [name for name in files if name.startswith("lookalike")]
    for name in ("text", "foreign", "service", *lookalikes):
        with pytest.raises(ValueError, match="not a dynbo result store|cannot open result store"):
            Store(files[name])
        code = main(
            ["run", "--benchmark", "eggholder", "--policy", "gp-ucb", "--clock", "step"]
            + ["--horizon", "2", "--warmup", "1", "--store", str(files[name])]
        )
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and err[0].startswith("dynbo: error:")
    for name in ("text", "foreign", "result", *lookalikes):
        target = files.get(name, result)
        with pytest.raises(ValueError, match="not a dynbo service store|cannot open service"):
            ServiceStore(target)
        code = main(["serve", "--store", str(target), "--port", "0"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and err[0].startswith("dynbo: error:")
    after = {name: path.read_bytes() for name, path in {**files, "result": result}.items()}
    assert after == before


def test_a_store_of_another_schema_version_is_refused_unchanged(tmp_path):
    path = tmp_path / "results.sqlite"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = 'abc' WHERE key = 'schema'")
    # a later version may have other columns: the version is what the message names
    conn.execute("ALTER TABLE runs ADD COLUMN later TEXT")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(ValueError, match="its schema is 'abc'"):
        Store(path)
    assert path.read_bytes() == before
