"""What a new user hit with the harness and the CLI (NaN objectives, Ctrl-C, kill -9,
invalid campaigns, read-only stores, small things), each with a regression test."""

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from dynbo.benchmarks import registry
from dynbo.cli import main
from dynbo.harness import Protocol, RunSpec, Store, build_campaign, execute, run_campaign
from tests.toy import MovingPeak

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + str(ROOT)}
FAST = {"raw_samples": 16, "restarts": 2, "fit_iterations": 10}


class NaNAfter(MovingPeak):
    """The moving peak whose instrument starts answering NaN (or a NaN optimum)."""

    def __init__(self, horizon=10.0, cost=0.5, after=4.0, what="value"):
        super().__init__(horizon=horizon, cost=cost)
        self.name, self.after, self.what = "nan-after", after, what

    def f(self, x, t):
        values = super().f(x, t)
        if self.what == "value" and np.any(np.asarray(t) > self.after):
            return values * np.nan
        return values

    def optimum(self, t):
        x, value = super().optimum(t)
        return x, (float("nan") if self.what == "optimum" and t > self.after else value)


def _spec(seed=0, benchmark="nan-after", clock="modeled"):
    return RunSpec(
        benchmark=benchmark,
        policy="gp-ucb",
        seed=seed,
        protocol=Protocol(clock=clock, response_time=(0.5, 0, 0, 0), warmup=3),
        policy_options=FAST,
    )


# ---------------------------------------------------------------- item 1: NaN objectives
@pytest.mark.parametrize("what", ["value", "optimum"])
def test_a_nan_objective_fails_the_run_and_it_is_stored(tmp_path, what):
    result = execute(_spec(), benchmark=NaNAfter(what=what))
    assert result.status == "failed" and "non-finite" in result.error
    assert all(np.isfinite(r["y"]) and np.isfinite(r["f_max"]) for r in result.iterations)
    with Store(tmp_path / "s.sqlite") as store:
        assert store.save_run(result)
        assert store.completed_run_ids(include_failed=True) == {result.spec.run_id}


def test_a_campaign_goes_on_past_a_nan_run_and_does_not_retry_it(tmp_path, monkeypatch):
    monkeypatch.setitem(registry._BENCHMARKS, "nan-after", NaNAfter)
    monkeypatch.setitem(registry._BENCHMARKS, "moving-peak", MovingPeak)
    campaign = build_campaign(
        {
            "benchmarks": ["nan-after", "moving-peak"],
            "policies": [{"name": "gp-ucb", "options": FAST}],
            "seeds": 1,
            "protocol": {"clock": "modeled", "response_time": [0.5, 0, 0, 0], "warmup": 3},
        }
    )
    with Store(tmp_path / "s.sqlite") as store:
        outcome = run_campaign(campaign, store, progress=False)
        assert (outcome.done, outcome.failed) == (1, 1)
        again = run_campaign(campaign, store, progress=False)
        assert again.skipped == 2 and again.done == again.failed == 0
        retried = run_campaign(campaign, store, progress=False, retry_failed=True)
        assert retried.failed == 1 and retried.skipped == 1


# ---------------------------------------------------------------- items 2, 3: signals
SLOW_CONFIG = """
name = "slow"
benchmarks = [{name = "eggholder", options = {dim = 1, horizon = 400.0, cost = 0.5}}]
policies = [{name = "gp-ucb", options = {raw_samples = 16, restarts = 2}}]
seeds = 6

[protocol]
clock = "modeled"
response_time = [0.5, 0.0, 0.0, 0.0]
warmup = 3
"""

# two runs of a few seconds, then two of minutes
FAST_THEN_SLOW = """
name = "mixed"
benchmarks = [
  {name = "eggholder", options = {dim = 1, horizon = 6.0, cost = 0.5}, label = "fast"},
  {name = "eggholder", options = {dim = 1, horizon = 400.0, cost = 0.5}, label = "slow"},
]
policies = [{name = "gp-ucb", options = {raw_samples = 16, restarts = 2}}]
seeds = [0, 1]

[protocol]
clock = "modeled"
response_time = [0.5, 0.0, 0.0, 0.0]
warmup = 3
"""


def _start_bench(config: Path, store: Path, workers: int) -> subprocess.Popen:
    # output to files, not pipes: a worker that outlives its parent would hold a pipe open
    log = config.with_suffix(".log")
    return subprocess.Popen(
        [sys.executable, "-m", "dynbo", "bench", str(config), "--store", str(store)]
        + ["--workers", str(workers)],
        env=ENV,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
        start_new_session=True,  # its own process group, as a terminal's foreground job
        # and, as a terminal's foreground job, with Ctrl-C's default action: a child
        # inherits an ignored SIGINT (Python then keeps it ignored), and the process
        # running the tests may have it ignored (seen under pytest-xdist in CI)
        preexec_fn=_default_sigint,
    )


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _wait_gone(processes: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    _, alive = psutil.wait_procs(processes, timeout=timeout)
    return alive


def _wait_for_workers(proc: subprocess.Popen, count: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        # the pool's workers and the resource tracker
        if len(_descendants(proc.pid)) >= count:
            return
        time.sleep(0.05)


def _stored(path: Path) -> int:
    if not path.exists():
        return 0
    conn = sqlite3.connect(path, timeout=5)
    try:
        return conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


@pytest.mark.slow
@pytest.mark.parametrize("when", ["while workers start", "while runs compute"])
def test_ctrl_c_with_workers_stops_them_at_once_and_keeps_finished_runs(tmp_path, when):
    config = tmp_path / "c.toml"
    config.write_text(FAST_THEN_SLOW if when == "while runs compute" else SLOW_CONFIG)
    store = tmp_path / "s.sqlite"
    proc = _start_bench(config, store, workers=2)
    if when == "while workers start":
        _wait_for_workers(proc, 1)
        time.sleep(0.3)  # the workers are importing torch
    else:
        deadline = time.monotonic() + 120
        while _stored(store) < 1 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
    family = _descendants(proc.pid)
    assert proc.poll() is None, config.with_suffix(".log").read_text()
    interrupted = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group
    proc.wait(timeout=30)
    err = config.with_suffix(".log").read_text()
    elapsed = time.monotonic() - interrupted
    assert proc.returncode == 130, err
    assert elapsed < 10
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    # split on newlines only: a progress bar redraws its line with carriage returns
    interrupted_lines = [line for line in err.split("\n") if "dynbo: interrupted" in line]
    assert len(interrupted_lines) == 1 and interrupted_lines[0].startswith("dynbo: interrupted")
    assert not _wait_gone(family, timeout=10), "workers outlived the interrupt"
    if when == "while runs compute":
        # the fast runs finished before the interrupt and are stored; the slow ones
        # were cut and are not
        assert _stored(store) >= 1
        with Store(store, read_only=True) as s:
            assert all(r["status"] == "done" for r in s.runs())


@pytest.mark.slow
def test_kill_9_of_the_parent_ends_its_workers(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(SLOW_CONFIG)
    proc = _start_bench(config, tmp_path / "s.sqlite", workers=2)
    _wait_for_workers(proc, 3)  # two workers and the resource tracker
    time.sleep(0.5)
    family = _descendants(proc.pid)
    assert len(family) >= 3
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    alive = _wait_gone(family, timeout=15)
    assert not alive, [p.cmdline() for p in alive]


# ---------------------------------------------------------------- item 5: invalid campaigns
@pytest.mark.parametrize(
    "entry,message",
    [
        ('policies = [{name = "wdbo", options = {alphaa = 1}}]', "alphaa"),
        ('policies = [{name = "wdbo", options = {alpha = "x"}}]', "alpha must be a real number"),
        ('policies = [{name = "wdbo", options = {learn_hyperparameters = "no"}}]', "true or false"),
    ],
)
def test_an_invalid_campaign_is_one_line_and_stores_nothing(tmp_path, capsys, entry, message):
    config = tmp_path / "bad.toml"
    config.write_text(
        'benchmarks = [{name = "eggholder", options = {dim = 1, horizon = 10.0}}]\n'
        f"{entry}\nseeds = 2\n"
    )
    store = tmp_path / "s.sqlite"
    code = main(["bench", str(config), "--store", str(store), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err
    assert err.startswith("dynbo: error: invalid campaign")
    assert not store.exists()


def test_a_negative_noise_variance_is_rejected_before_the_first_run(tmp_path, capsys):
    config = tmp_path / "bad.toml"
    config.write_text(
        'benchmarks = [{name = "eggholder", options = {noise_variance = -1}}]\n'
        'policies = ["gp-ucb"]\n'
    )
    code = main(["bench", str(config), "--store", str(tmp_path / "s.sqlite")])
    err = capsys.readouterr().err
    assert code == 2 and "noise_variance" in err and not (tmp_path / "s.sqlite").exists()


def test_run_campaign_validates_before_touching_the_store(tmp_path):
    campaign = build_campaign(
        {"benchmarks": ["eggholder"], "policies": [{"name": "wdbo", "options": {"alpha": -1}}]}
    )
    with Store(tmp_path / "s.sqlite") as store:
        with pytest.raises(ValueError, match="alpha"):
            run_campaign(campaign, store, progress=False)
        assert store.campaign_ids() == [] and store.runs() == []


# ---------------------------------------------------------------- item 4 on the CLI
def test_cli_boolean_words_are_booleans(tmp_path, capsys, monkeypatch):
    from dynbo import policies

    seen = {}
    original = policies.make

    def spy(name, **config):
        seen.update(config)
        return original(name, **config)

    monkeypatch.setattr("dynbo.policies.make", spy)
    args = ["run", "--benchmark", "eggholder", "--policy", "gp-ucb", "--clock", "step"]
    args += ["--horizon", "3", "--warmup", "2", "--quiet", "--benchmark-option", "dim=1"]
    for word, value in [("no", False), ("Yes", True), ("0", False), ("true", True)]:
        code = main(args + ["--policy-option", f"learn_hyperparameters={word}"])
        assert code == 0 and seen["learn_hyperparameters"] is value
    code = main(args + ["--policy-option", "learn_hyperparameters=maybe"])
    err = capsys.readouterr().err
    assert code == 2 and "learn_hyperparameters must be true or false" in err


# ---------------------------------------------------------------- item 10: read-only
def _store_with_a_run(path: Path) -> None:
    spec = _spec(benchmark="moving-peak")
    with Store(path) as store:
        store.save_run(execute(spec, benchmark=MovingPeak(horizon=5.0)))


def test_export_of_an_empty_file_changes_nothing(tmp_path, capsys):
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    code = main(["export", "--store", str(empty), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "not a dynbo result store" in err
    assert empty.stat().st_size == 0 and sorted(os.listdir(tmp_path)) == ["empty.sqlite"]


def test_export_reads_without_writing(tmp_path):
    path = tmp_path / "s.sqlite"
    _store_with_a_run(path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert main(["export", "--store", str(path), "--out", str(tmp_path / "csv")]) == 0
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name != "csv"}
    assert after == before
    with Store(path, read_only=True) as store, pytest.raises(sqlite3.OperationalError):
        store.add_campaign("x", "x", {})


def _read_only_mounts() -> bool:
    try:
        return subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0
    except OSError:
        return False


@pytest.mark.skipif(not _read_only_mounts(), reason="needs user namespaces (unshare -rm)")
def test_export_from_a_read_only_file_system(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    _store_with_a_run(data / "s.sqlite")
    out = tmp_path / "out"
    script = (
        f"mount --bind {data} {data} && mount -o remount,ro,bind {data} && "
        f"! touch {data}/probe 2>/dev/null && "
        f"{sys.executable} -m dynbo export --store {data}/s.sqlite --out {out}"
    )
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script], env=ENV, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert (out / "runs.csv").exists() and (out / "iterations.csv").exists()


# ---------------------------------------------------------------- items 6, 11: the CLI
def test_os_errors_are_one_plain_line(tmp_path, capsys):
    path = tmp_path / "s.sqlite"
    _store_with_a_run(path)
    (tmp_path / "taken").write_text("a file where the output folder should go")
    code = main(["export", "--store", str(path), "--out", str(tmp_path / "taken")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "[Errno" not in err and "File exists" in err and "taken" in err


def test_version_module_entry_point_and_help():
    for command in ([sys.executable, "-m", "dynbo", "--version"], ["dynbo", "--version"]):
        done = subprocess.run(command, env=ENV, capture_output=True, text=True)
        assert done.returncode == 0 and done.stdout.startswith("dynbo ")
    done = subprocess.run(
        [sys.executable, "-m", "dynbo", "run", "--help"], env=ENV, capture_output=True, text=True
    )
    text = " ".join(done.stdout.split())
    assert "default: measured" in text and "seconds, or steps" in text and "default: 15" in text
    done = subprocess.run(
        [sys.executable, "-m", "dynbo", "bench", "--help"], env=ENV, capture_output=True, text=True
    )
    text = " ".join(done.stdout.split())
    assert "default: results/dynbo.sqlite" in text and "default: 1" in text
    assert "docs/campaigns.md" in text


def test_list_is_aligned_and_says_what_d_is(capsys):
    assert main(["list", "benchmarks"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "spatial dimension" in lines[0]
    options = next(i for i, line in enumerate(lines) if line.startswith("benchmark options"))
    header, rows = lines[1], lines[2:options]
    source = header.index("source")
    assert all(len(row) > source and row[source - 2 : source] == "  " for row in rows)
    assert main(["list", "policies"]) == 0
    assert "SEED-" not in capsys.readouterr().out
