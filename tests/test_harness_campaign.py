import datetime
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dynbo.benchmarks import options as accepted_options
from dynbo.cli import main
from dynbo.harness import Store, build_campaign, load_campaign, run_campaign

CONFIG = """
name = "tiny"
benchmarks = [
  {name = "eggholder", options = {dim = 1, horizon = 12.0, cost = 0.5}},
  {name = "hartmann3", options = {dim = 2, horizon = 12.0, cost = 0.5}, label = "h3"},
]
policies = [
  {name = "gp-ucb", options = {raw_samples = 32, restarts = 2}},
  {name = "wdbo", options = {raw_samples = 32, restarts = 2}},
]
seeds = 2

[protocol]
clock = "modeled"
response_time = [0.5, 0.0, 0.0, 1e-6]
warmup = 5
"""


@pytest.fixture
def config_path(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(CONFIG)
    return path


def table(path):
    with Store(path) as store:
        return store.iteration_rows(), sorted(
            (r["run_id"], r["status"], r["summary"]["average_regret"]) for r in store.runs()
        )


def test_campaign_config_expands_and_validates(config_path):
    campaign = load_campaign(config_path)
    assert len(campaign) == 8
    assert {s.display_benchmark for s in campaign.specs} == {"eggholder", "h3"}
    assert len({s.run_id for s in campaign.specs}) == 8
    quick = build_campaign({"suites": ["quick"]})
    assert len(quick) == 3 * 4 * 2 and quick.specs[0].protocol.clock == "modeled"
    for bad, message in [
        ({"benchmarks": ["nope"], "policies": ["gp-ucb"]}, "unknown benchmark"),
        ({"benchmarks": ["eggholder"], "policies": ["nope"]}, "unknown policy"),
        ({"benchmarks": ["eggholder"], "policies": ["gp-ucb"], "seeds": 0}, "seeds"),
        (
            {"benchmarks": ["eggholder"], "policies": ["gp-ucb"], "speed": 1},
            "unknown campaign keys",
        ),
        (
            {"benchmarks": ["eggholder"], "policies": ["gp-ucb"], "protocol": {"clock": "x"}},
            "clock",
        ),
        ({"suites": ["nope"]}, "unknown suite"),
        ({"policies": ["gp-ucb"]}, "no benchmarks"),
    ]:
        with pytest.raises(ValueError, match=message):
            build_campaign(bad)


def test_modeled_campaign_twice_gives_byte_identical_tables(config_path, tmp_path):
    campaign = load_campaign(config_path)
    for name in ("a.sqlite", "b.sqlite"):
        with Store(tmp_path / name) as store:
            outcome = run_campaign(campaign, store, progress=False)
            assert outcome.done == 8 and outcome.failed == 0
    rows_a, runs_a = table(tmp_path / "a.sqlite")
    rows_b, runs_b = table(tmp_path / "b.sqlite")
    assert rows_a == rows_b and runs_a == runs_b
    assert repr(rows_a).encode() == repr(rows_b).encode()
    # a second call skips everything
    with Store(tmp_path / "a.sqlite") as store:
        again = run_campaign(campaign, store, progress=False)
    assert again.skipped == 8 and again.done == 0


def test_process_pool_and_dask_give_the_same_results(config_path, tmp_path):
    from distributed import Client, LocalCluster

    campaign = load_campaign(config_path)
    with Store(tmp_path / "pool.sqlite") as store:
        run_campaign(campaign, store, workers=2, progress=False)
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        with Client(cluster) as client, Store(tmp_path / "dask.sqlite") as store:
            outcome = run_campaign(campaign, store, scheduler=client, progress=False)
    assert outcome.done == 8
    assert table(tmp_path / "pool.sqlite") == table(tmp_path / "dask.sqlite")


def _stored_runs(path: Path) -> int:
    if not path.exists():
        return 0
    try:
        conn = sqlite3.connect(path, timeout=1)
        try:
            return conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return 0


def test_sigkill_at_several_points_then_resume_equals_an_uninterrupted_campaign(
    config_path, tmp_path
):
    reference = tmp_path / "reference.sqlite"
    with Store(reference) as store:
        run_campaign(load_campaign(config_path), store, progress=False)
    store_path = tmp_path / "killed.sqlite"
    command = [
        sys.executable,
        "-m",
        "dynbo.cli",
        "bench",
        str(config_path),
        "--store",
        str(store_path),
        "--no-progress",
    ]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    kills = 0
    for target, workers, extra_delay in [(0, "1", 1.5), (2, "2", 0.3), (5, "1", 0.0)]:
        proc = subprocess.Popen(
            command + ["--workers", workers],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while (
            _stored_runs(store_path) < target
            and proc.poll() is None
            and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        time.sleep(extra_delay)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            kills += 1
        proc.wait()
        assert _stored_runs(store_path) <= 8
    assert kills >= 2
    assert 0 < _stored_runs(store_path) < 8 or kills == 3
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert table(store_path) == table(reference)
    with Store(store_path) as store:
        assert len(store.completed_run_ids()) == 8
        ids = [r[0] for r in store.iteration_rows()]
        assert len(ids) == len(table(reference)[0])


def run_cli(args, capsys):
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    "args,message",
    [
        (["run", "--benchmark", "nope", "--policy", "gp-ucb"], "unknown benchmark 'nope'"),
        (["run", "--benchmark", "eggholder", "--policy", "nope"], "unknown policy 'nope'"),
        (
            ["run", "--benchmark", "eggholder", "--policy", "gp-ucb", "--horizon", "-5"],
            "positive number",
        ),
        (
            [
                "run",
                "--benchmark",
                "eggholder",
                "--policy",
                "gp-ucb",
                "--benchmark-option",
                "dimm=2",
            ],
            "no option",
        ),
        (["bench", "missing.toml"], "cannot read campaign config"),
        (["bench"], "config file or --suite"),
        (["bench", "--suite", "nope"], "unknown suite"),
        (["export", "--store", "missing.sqlite", "--out", "x"], "no result store"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_cli_bad_arguments_exit_nonzero_with_one_clear_line(
    args, message, capsys, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(args, capsys)
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("dynbo: error:") and message in lines[0]


def test_cli_unreadable_config_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("name = [unclosed")
    code, _, err = run_cli(["bench", str(bad)], capsys)
    assert code == 2 and "not valid TOML" in err and len(err.strip().splitlines()) == 1


def test_cli_run_list_and_export(tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    code, out, _ = run_cli(
        [
            "run",
            "--benchmark",
            "eggholder",
            "--policy",
            "gp-ucb",
            "--clock",
            "modeled",
            "--horizon",
            "8",
            "--benchmark-option",
            "dim=1",
            "--policy-option",
            "raw_samples=16",
            "--store",
            str(store),
            "--quiet",
        ],
        capsys,
    )
    assert code == 0 and '"average_regret"' in out
    code, out, _ = run_cli(["list"], capsys)
    assert code == 0 and "eggholder" in out and "wdbo" in out and "quick" in out
    code, out, _ = run_cli(
        ["export", "--store", str(store), "--out", str(tmp_path / "csv")], capsys
    )
    assert code == 0 and (tmp_path / "csv" / "iterations.csv").exists()


def test_calibrate_never_overwrites_a_file_that_is_not_a_calibration(tmp_path, capsys):
    victim = tmp_path / "results.sqlite"
    victim.write_bytes(b"SQLite format 3\x00 stand-in for a result store")
    before = victim.read_bytes()
    args = ["calibrate", "--policy", "gp-ucb", "--sizes", "5", "--repeats", "1"]
    code, out, err = run_cli([*args, "--dim", "1", "--output", str(victim)], capsys)
    assert code == 2 and out == "" and "not a calibration file" in err
    assert victim.read_bytes() == before
    code, _, err = run_cli([*args, "--dim", "1", "--output", str(tmp_path)], capsys)
    assert code == 2 and "is a directory" in err


def test_calibrate_fits_and_stores_a_model_that_campaigns_use(tmp_path, capsys, monkeypatch):
    from dynbo.harness import load_calibration, make_protocol

    path = tmp_path / "calibration.json"
    code, out, _ = run_cli(
        [
            "calibrate",
            "--policy",
            "st-gp-ucb",
            "--sizes",
            "10",
            "20",
            "40",
            "80",
            "--dim",
            "2",
            "--repeats",
            "1",
            "--output",
            str(path),
        ],
        capsys,
    )
    assert code == 0 and path.exists()
    model = load_calibration(path)
    assert all(c >= 0 for c in model.coefficients) and model(80) > 0
    monkeypatch.setenv("DYNBO_CALIBRATION", str(path))
    protocol = make_protocol({"clock": "modeled", "response_time": "calibrated"})
    assert protocol.response_time == model.coefficients
    monkeypatch.setenv("DYNBO_CALIBRATION", str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="no calibration file"):
        make_protocol({"clock": "modeled", "response_time": "calibrated"})
    assert make_protocol({"clock": "modeled"}).response_time == (0.05, 0.0, 0.0, 2e-7)


@pytest.mark.parametrize(
    "toml,message",
    [
        ("suites = 5", "suites must be a list"),
        (
            'benchmarks=["eggholder"]\npolicies=["gp-ucb"]\n[protocol]\nhorizon=[1]',
            "horizon must be a number",
        ),
        (
            'benchmarks=["eggholder"]\npolicies=["gp-ucb"]\n[protocol]\nclock="modeled"\nresponse_time=5',
            "4 cubic coefficients",
        ),
        (
            'benchmarks=["eggholder"]\npolicies=["gp-ucb"]\nseeds=9000000000000000000',
            "seeds must be a count from 1 to 100000",
        ),
        (
            'benchmarks=["eggholder"]\npolicies=["gp-ucb"]\n[protocol]\nthreads=2.5',
            "threads must be a positive integer",
        ),
        (
            'benchmarks=["eggholder"]\npolicies=["gp-ucb"]\n[protocol]\nthreads=99999999999',
            "threads must be at most 4096",
        ),
        (
            'benchmarks=["markov"]\npolicies=["gp-ucb"]\n[protocol]\nclock="modeled"\n'
            "response_time=[0, 0, 0, 0]",
            "would never advance",
        ),
    ],
)
def test_cli_bad_campaign_values_are_one_line(toml, message, tmp_path, capsys):
    path = tmp_path / "c.toml"
    path.write_text(toml)
    code, _, err = run_cli(["bench", str(path), "--store", str(tmp_path / "s.sqlite")], capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_cli_malformed_scheduler_address_fails_before_the_store(tmp_path, capsys):
    path = tmp_path / "c.toml"
    path.write_text('benchmarks=["eggholder"]\npolicies=["gp-ucb"]\nseeds=1')
    store = tmp_path / "s.sqlite"
    code, _, err = run_cli(
        ["bench", str(path), "--scheduler", "zzz", "--store", str(store)], capsys
    )
    assert code == 2 and "--scheduler 'zzz'" in err and len(err.strip().splitlines()) == 1
    assert not store.exists()


def test_cli_unwritable_store_fails_before_running(tmp_path, capsys):
    (tmp_path / "file.txt").write_text("a file, not a folder")
    code, out, err = run_cli(
        [
            "run",
            "--benchmark",
            "eggholder",
            "--policy",
            "gp-ucb",
            "--store",
            str(tmp_path / "file.txt" / "x.sqlite"),
        ],
        capsys,
    )
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1


def test_cli_rejects_bad_policy_options_and_seeds(capsys):
    code, _, err = run_cli(
        ["run", "--benchmark", "eggholder", "--policy", "gp-ucb", "--policy-option", "foo=1"],
        capsys,
    )
    assert code == 2 and "unknown option(s) 'foo'" in err
    code, _, err = run_cli(
        ["run", "--benchmark", "eggholder", "--policy", "gp-ucb", "--seed", "-1"], capsys
    )
    assert code == 2 and "--seed" in err


def test_the_documented_campaign_example_is_valid(tmp_path):
    import re

    from dynbo.harness import validate_campaign

    text = (Path(__file__).parent.parent / "docs" / "campaigns.md").read_text()
    config = tmp_path / "drift.toml"
    config.write_text(re.search(r"```toml\n(.*?)```", text, re.S).group(1))
    campaign = load_campaign(config)
    validate_campaign(campaign)
    # 3 benchmarks x (3 policies + the 2 reference players) x 3 seeds
    assert campaign.name == "drift-study" and len(campaign) == 3 * 5 * 3
    assert {s.policy for s in campaign.specs} >= {"random", "oracle-lag"}
    assert {s.protocol.clock for s in campaign.specs} == {"modeled"}
    assert {s.display_benchmark for s in campaign.specs} == {"eggholder", "hartmann3", "ackley-2d"}


def test_validation_builds_a_random_benchmark_once_not_once_per_seed(monkeypatch):
    import dynbo.benchmarks as registry
    from dynbo.harness import validate_campaign

    built = []
    real_get = registry.get
    monkeypatch.setattr(registry, "get", lambda name, **o: built.append(o) or real_get(name, **o))
    campaign = build_campaign({"suites": ["markov"], "seeds": 5})
    validate_campaign(campaign)
    assert len(campaign) == 7 * 4 * 5 and len(built) == 7  # one per entry, not per seed


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_scheduler_leaves_the_store_as_it_was(config_path, tmp_path, capsys):
    import dask

    address = f"tcp://127.0.0.1:{_closed_port()}"
    store_path = tmp_path / "s.sqlite"
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        code, _, err = run_cli(
            ["bench", str(config_path), "--scheduler", address, "--store", str(store_path)],
            capsys,
        )
        assert code == 2 and len(err.strip().splitlines()) == 1
        assert f"cannot reach a Dask scheduler at {address!r}" in err
        assert not store_path.exists()
        # a library caller's store: no campaign row, no run row
        with Store(store_path) as store:
            with pytest.raises(ValueError, match="cannot reach a Dask scheduler"):
                run_campaign(load_campaign(config_path), store, scheduler=address, progress=False)
            assert store.campaigns() == [] and store.runs() == []


def test_a_scheduler_port_out_of_range_is_refused_without_waiting():
    import dask

    from dynbo.harness.campaign import connect_scheduler

    # a connect timeout far longer than the test: the refusal must come before any wait
    with dask.config.set({"distributed.comm.timeouts.connect": "600s"}):
        for address in ("tcp://127.0.0.1:99999", "127.0.0.1:70000"):
            with pytest.raises(ValueError, match="cannot reach a Dask scheduler.*range"):
                connect_scheduler(address)


def test_a_campaign_whose_horizon_ends_before_the_first_query(tmp_path, capsys):
    path = tmp_path / "c.toml"
    path.write_text(
        'benchmarks = [{name = "eggholder", options = {dim = 1, horizon = 0.1, cost = 0.5}}]\n'
        'policies = [{name = "gp-ucb", options = {raw_samples = 32, restarts = 2}}]\n'
        'seeds = 1\n[protocol]\nclock = "modeled"\nresponse_time = [0.5, 0.0, 0.0, 0.0]\n'
        "warmup = 3\n"
    )
    store = tmp_path / "s.sqlite"
    code, out, _ = run_cli(["bench", str(path), "--store", str(store), "--no-progress"], capsys)
    assert code == 0 and "1 done" in out
    assert "1 of them made no query after the warm-up" in out
    code, out, _ = run_cli(["show", str(store)], capsys)
    assert code == 0 and "made no query after the warm-up" in out
    for fmt in ("markdown", "latex", "html"):  # every format says so, none is an error
        code, out, _ = run_cli(["show", str(store), "--format", fmt], capsys)
        assert code == 0 and "made no query after the warm-up" in out
    report = tmp_path / "rep"
    code, _, err = run_cli(["report", str(store), "--out", str(report)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "made a query after the warm-up" in err and "matplotlib" not in err
    assert not report.exists()  # no empty folder left behind


@pytest.mark.parametrize(
    "config,message",
    [
        (
            {"benchmarks": [{"name": "ackley", "label": "A"}, {"name": "griewank", "label": "A"}]},
            "share the table row 'A'",
        ),
        ({"benchmarks": ["ackley", {"name": "ackley", "options": {"dim": 3}}]}, "row 'ackley'"),
        (
            {
                "benchmarks": ["ackley"],
                "policies": [{"name": "gp-ucb", "label": "x"}, {"name": "wdbo", "label": "x"}],
            },
            "share the table column 'x'",
        ),
        (
            {"benchmarks": ["ackley"], "policies": ["gp-ucb", {"name": "wdbo", "label": "gp-ucb"}]},
            "column 'gp-ucb'",
        ),
        ({"benchmarks": [{"name": "ackley", "label": "a\nb"}]}, "one printable line"),
        ({"benchmarks": [{"name": "ackley", "label": "a|b"}]}, "without '|'"),
        ({"benchmarks": [{"name": "ackley", "label": 3}]}, "non-empty string"),
        ({"benchmarks": [{"name": "ackley", "label": " "}]}, "non-empty string"),
        # the tables' own row
        ({"benchmarks": ["ackley", {"name": "griewank", "label": "OVERALL"}]}, "reserved"),
        ({"benchmarks": [{"name": "ackley", "label": "overall "}]}, "reserved"),
        # the same runs under two headings (a run is stored once: one would vanish)
        (
            {"benchmarks": [{"name": "ackley", "label": "a"}, {"name": "ackley", "label": "b"}]},
            "'a' and 'b' are the same benchmark",
        ),
        ({"benchmarks": ["ackley", "ackley"]}, "same benchmark"),
        (
            {
                "benchmarks": ["ackley"],
                "policies": [{"name": "wdbo", "label": "A"}, {"name": "wdbo", "label": "B"}],
            },
            "same policy",
        ),
    ],
)
def test_entries_that_would_share_a_table_heading_are_refused(config, message):
    config = {"policies": ["gp-ucb"], **config}
    with pytest.raises(ValueError, match=message):
        build_campaign(config)


@pytest.mark.parametrize(
    "config, message",
    [
        ({"seeds": [0, 2**63]}, r"seeds must be .* \[0, 2\*\*63\)"),
        ({"seeds": [0, 3, 0]}, "seeds lists 0 more than once"),
        ({"name": 3}, "name must be a non-empty string"),
        ({"name": datetime.date(1979, 5, 27)}, "the campaign: name is a date"),
        (
            {"benchmarks": [{"name": "ackley", "options": {"t0": datetime.time()}}]},
            r"benchmarks\[0\]: options: t0 is a date or time",
        ),
    ],
)
def test_seeds_and_values_a_store_cannot_hold_are_refused(config, message):
    with pytest.raises(ValueError, match=message):
        build_campaign({"benchmarks": ["ackley"], "policies": ["gp-ucb"], **config})


def test_suites_that_time_their_runs_differently_need_the_campaigns_protocol():
    with pytest.raises(ValueError, match="differ in clock .*quick: 'modeled'.*sensors: 'step'"):
        build_campaign({"suites": ["quick", "sensors"], "seeds": 1})
    with pytest.raises(ValueError, match="differ in seeds"):
        build_campaign({"suites": ["markov", "rkhs"]})
    both = build_campaign(
        {"suites": ["markov", "rkhs"], "seeds": 1, "protocol": {"clock": "step", "warmup": 0}}
    )
    assert {spec.protocol.clock for spec in both.specs} == {"step"}


def test_a_campaign_horizon_replaces_the_suites_own():
    from dynbo.harness.loop import benchmark_options

    campaign = build_campaign({"suites": ["quick"], "seeds": 1, "protocol": {"horizon": 30}})
    for spec in campaign.specs:
        assert spec.protocol.horizon == 30.0
        assert spec.benchmark_options.get("horizon", 30) == 30
        if "horizon" in accepted_options(spec.benchmark):
            assert benchmark_options(spec)["horizon"] == 30.0
    # as `dynbo reproduce --horizon` does: R-GP-UCB's block length follows the horizon
    markov = build_campaign({"suites": ["markov"], "seeds": 1, "protocol": {"horizon": 50}})
    assert {s.policy_options["horizon"] for s in markov.specs if s.policy == "r-gp-ucb"} == {50}
    # a horizon equal to the suite's own leaves the benchmarks' options as they were
    same = build_campaign({"suites": ["quick"], "seeds": 1, "protocol": {"horizon": 60}})
    plain = build_campaign({"suites": ["quick"], "seeds": 1})
    assert [s.benchmark_options for s in same.specs] == [s.benchmark_options for s in plain.specs]
    # the campaign's own benchmarks keep their options: both given and different is refused
    own = build_campaign(
        {
            "benchmarks": [{"name": "ackley", "options": {"horizon": 60}}],
            "policies": ["gp-ucb"],
            "protocol": {"horizon": 30},
        }
    )
    with pytest.raises(ValueError, match="differs from the benchmark option horizon"):
        benchmark_options(own.specs[0])


def test_a_single_run_stored_by_dynbo_run_is_a_campaign_show_and_report_find(tmp_path, capsys):
    store = tmp_path / "r.sqlite"
    args = ["run", "--benchmark", "eggholder", "--policy", "gp-ucb", "--clock", "step"]
    args += ["--horizon", "4", "--warmup", "2", "--store", str(store), "--quiet"]
    args += ["--policy-option", "raw_samples=32", "--policy-option", "restarts=2"]
    code, _, _ = run_cli(args, capsys)
    assert code == 0
    code, out, _ = run_cli(["show", str(store)], capsys)
    assert code == 0 and "run: gp-ucb on eggholder (seed 0)" in out and "1 linked" in out
    code, _, _ = run_cli(["report", str(store), "--out", str(tmp_path / "rep")], capsys)
    assert code == 0 and (tmp_path / "rep" / "index.html").exists()
    # its stored configuration rebuilds exactly that run
    with Store(store, read_only=True) as s:
        (campaign,) = s.campaigns()
        rebuilt = build_campaign(campaign["config"])
        assert rebuilt.campaign_id == campaign["campaign_id"]
        assert [spec.run_id for spec in rebuilt.specs] == [r["run_id"] for r in s.runs()]


def test_dynbo_list_names_each_benchmarks_options(capsys):
    code, out, _ = run_cli(["list", "benchmarks"], capsys)
    assert code == 0 and "benchmark options" in out
    line = next(x for x in out.splitlines() if x.startswith("  markov ") and "epsilon" in x)
    assert "lengthscale" in line and "noise_fraction" in line


def test_several_suites_name_their_rows_by_suite():
    both = build_campaign({"suites": ["bolt", "wdbo"], "seeds": 1})
    labels = {spec.label for spec in both.specs}
    assert "bolt/schwefel" in labels and "wdbo/schwefel" in labels
    alone = build_campaign({"suites": ["bolt"], "seeds": 1})
    assert "schwefel" in {s.label for s in alone.specs}  # one suite keeps its own labels


def test_campaign_files_with_a_byte_order_mark_load_and_non_utf8_ones_are_named(tmp_path):
    bom = tmp_path / "bom.toml"
    bom.write_bytes(b'\xef\xbb\xbfbenchmarks = ["ackley"]\npolicies = ["gp-ucb"]\n')
    assert len(load_campaign(bom).specs) == 1
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b'name = "caf\xe9"\nbenchmarks = ["ackley"]\npolicies = ["gp-ucb"]\n')
    with pytest.raises(
        ValueError, match=r"latin.toml is not UTF-8 text \(byte 0xe9 at offset 11\)"
    ):
        load_campaign(latin)


def test_run_refuses_policy_options_the_run_sets_itself(tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    for option in ("seed=3", "bounds=[[0],[1]]"):
        code, _, err = run_cli(
            [
                "run",
                "--benchmark",
                "eggholder",
                "--policy",
                "gp-ucb",
                "--policy-option",
                option,
                "--clock",
                "step",
                "--store",
                str(store),
            ],
            capsys,
        )
        name = option.split("=")[0]
        assert code == 2 and f"policy option {name!r} is the run's own" in err
        assert len(err.strip().splitlines()) == 1 and not store.exists()


def test_an_empty_store_path_is_refused(tmp_path, monkeypatch):
    from dynbo.service.storage import ServiceStore

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="the result store's path is empty"):
        Store("")
    with pytest.raises(ValueError, match="the service store's path is empty"):
        ServiceStore(" ")
    assert list(tmp_path.iterdir()) == []
    # a directory or a device is no store (SQLite would write its journal beside it)
    (tmp_path / "folder").mkdir()
    with pytest.raises(ValueError, match="result store's path .*folder.* not a regular file"):
        Store(tmp_path / "folder")
    if os.path.exists("/dev/null"):
        with pytest.raises(ValueError, match="service store's path '/dev/null' is not a regular"):
            ServiceStore("/dev/null")
    assert [p.name for p in tmp_path.iterdir()] == ["folder"]


def test_export_takes_a_campaign_prefix(config_path, tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    with Store(store) as s:
        outcome = run_campaign(load_campaign(config_path), s, progress=False)
    out = tmp_path / "export"
    prefix = outcome.campaign_id[:8]
    code, printed, _ = run_cli(
        ["export", "--store", str(store), "--campaign", prefix, "--out", str(out)], capsys
    )
    assert code == 0 and (out / "runs.csv").exists()
    assert len((out / "runs.csv").read_text().strip().splitlines()) == 1 + 8
    code, _, err = run_cli(
        ["export", "--store", str(store), "--campaign", "zzz", "--out", str(out)], capsys
    )
    assert code == 2 and "'zzz' matches no campaign" in err


def test_the_reproduce_help_lists_every_reproduction():
    from dynbo import reproductions
    from dynbo.cli import REPRODUCTION_NAMES

    assert list(REPRODUCTION_NAMES) == reproductions.available()


def test_a_reader_that_goes_away_is_not_an_error(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(
        f"{sys.executable} -m dynbo list | head -1",
        shell=True,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.stdout.startswith("benchmarks") and "error" not in proc.stderr


def test_each_campaign_shows_shared_runs_under_its_own_labels(config_path, tmp_path):
    relabelled = CONFIG.replace('label = "h3"', 'label = "hartmann, 2-D"')
    other = tmp_path / "other.toml"
    other.write_text(relabelled.replace('name = "tiny"', 'name = "tiny-relabelled"'))
    with Store(tmp_path / "s.sqlite") as store:
        first = run_campaign(load_campaign(config_path), store, progress=False)
        second = run_campaign(load_campaign(other), store, progress=False)
        assert second.skipped == 8 and second.done == 0  # the same runs, stored once
        for outcome, label in ((first, "h3"), (second, "hartmann, 2-D")):
            runs = store.runs(outcome.campaign_id)
            assert {r["label"] for r in runs} == {"eggholder", label}
            frame = store.iterations_frame(outcome.campaign_id)
            assert set(frame["benchmark"]) == {"eggholder", label}


@pytest.mark.parametrize(
    "args,name",
    [
        (["run", "--benchmark", "eggholder", "--policy", "gp-ucb", "--store", ""], "store"),
        (["report", "s.sqlite", "--out", ""], "out"),
        (["export", "--out", ""], "out"),
        (["calibrate", "--output", ""], "output"),
        (["data", "intel-lab", "--data-dir", ""], "data-dir"),
        (["bench", ""], "config"),
        (["reproduce", "bolt-table3", "--store", ""], "store"),
    ],
)
def test_empty_paths_are_refused_before_anything_runs(args, name, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(args, capsys)
    assert code == 2 and f"the {name} path is empty" in err
    assert list(tmp_path.iterdir()) == []  # nothing written in the working directory
