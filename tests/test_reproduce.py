"""`dynbo reproduce`: the shipped campaigns, the papers' numbers, the dry run, the report."""

import dataclasses
from importlib import resources

import pytest

from dynbo import reproductions
from dynbo.benchmarks import suite
from dynbo.cli import main
from dynbo.harness import RunSpec, Store, build_campaign, validate_campaign
from dynbo.harness.loop import RunResult
from dynbo.policies import available as policy_names
from dynbo.report.paper import paper_table_html, paper_table_markdown
from dynbo.report.tables import OVERALL, build_table

SUITES = {
    "bolt-table3": "bolt",
    "wdbo-table2": "wdbo",
    "bogunovic-fig2": "markov",
    "et-gp-ucb-temperature": "sensors",
    "et-gp-ucb-cartpole": "control",
    "w-sparq-rkhs": "rkhs",
}


def test_the_reproductions_ship_as_package_data():
    assert reproductions.available() == list(SUITES)
    assert reproductions.known() == list(SUITES)
    files = {p.name for p in resources.files("dynbo.reproductions").iterdir()}
    for name in reproductions.available():
        assert f"{name}.toml" in files
    assert {"bolt-table3.json", "wdbo-table2.json"} <= files


@pytest.mark.parametrize("name", list(SUITES))
def test_every_shipped_campaign_validates_with_the_cheaper_overrides(name):
    config, _ = reproductions.load(name)
    assert config["suites"] == [SUITES[name]]
    campaign = reproductions.campaign_for(name, seeds=1, horizon=7)
    validate_campaign(campaign)
    full = reproductions.campaign_for(name, seeds=1)
    assert {s.seed for s in campaign.specs} == {0}
    assert campaign.config["seeds"] == 1
    if {s.protocol.clock for s in campaign.specs} == {"step"}:
        assert campaign.config["protocol"]["horizon"] == 7
        assert campaign.name == f"{name} [seeds=1, horizon=7]"
        assert {s.protocol.horizon for s in campaign.specs} == {7.0}
        assert {s.benchmark_options["horizon"] for s in campaign.specs} == {7.0}
        # the policy settings derived from T follow it (R-GP-UCB's block length)
        for spec in campaign.specs:
            if "horizon" in spec.policy_options:
                assert spec.policy_options["horizon"] == 7
    else:
        # real-time clocks: the paper's protocol, time-compressed onto [0, 7]
        assert campaign.name.startswith(f"{name} [seeds=1, horizon=7 time-compressed x")
        # its recorded config rebuilds the same runs
        rebuilt = build_campaign(campaign.config)
        assert [s.run_id for s in rebuilt.specs] == [s.run_id for s in campaign.specs]
        for short, spec in zip(campaign.specs, full.specs):
            assert short.protocol.compression > 1
            assert dataclasses.replace(short.protocol, compression=None) == spec.protocol
            assert short.policy_options == spec.policy_options
            assert short.benchmark_options == spec.benchmark_options
            horizon = spec.benchmark_options.get("horizon", spec.protocol.horizon)
            if horizon is not None:
                assert short.protocol.compression == pytest.approx(horizon / 7)
    # one seed: one run per benchmark of the suite and policy of the campaign
    entries = suite(SUITES[name]).entries
    policies = {s.policy for s in campaign.specs}
    assert len(campaign) == len(entries) * len(policies)
    assert {s.label for s in campaign.specs} == {e.label for e in entries}


def test_the_paper_protocols_are_the_suites_runs():
    bolt = reproductions.campaign_for("bolt-table3")
    same = build_campaign({"suites": ["bolt"]})
    assert {s.run_id for s in bolt.specs} == {s.run_id for s in same.specs}
    assert len(bolt) == 10 * 7 * 10 and {s.protocol.clock for s in bolt.specs} == {"measured"}
    assert {s.benchmark_options["horizon"] for s in bolt.specs} == {600.0}
    wdbo = reproductions.campaign_for("wdbo-table2")
    assert len(wdbo) == 12 * 6 * 10
    markov = reproductions.campaign_for("bogunovic-fig2")
    assert {s.policy for s in markov.specs} == {"gp-ucb", "r-gp-ucb", "tv-gp-ucb"}
    assert {s.seed for s in markov.specs} == set(range(200))
    assert {s.protocol.clock for s in markov.specs} == {"step"}
    # the within-model settings of the suite's entries are kept
    tv = next(s for s in markov.specs if s.policy == "tv-gp-ucb" and s.label == "se-eps0.03")
    assert tv.policy_options["epsilon"] == 0.03
    assert not tv.policy_options["learn_hyperparameters"]


def test_the_published_numbers_are_the_papers():
    _, bolt = reproductions.load("bolt-table3")
    # Bardou & Thiran (2025), Table 3, read from the paper
    assert bolt["table"]["hartmann3"]["r-gp-ucb"] == [0.42, 0.01]
    assert bolt["table"]["eggholder"]["abo"] == [546, 110.1]
    assert bolt["table"]["powell"]["bolt"] == [1235, 30]
    assert bolt["table"][OVERALL]["wdbo"] == [0.14, 0.03]
    assert bolt["citation"]["year"] == 2025 and bolt["citation"]["table"] == "Table 3"
    assert bolt["citation"]["title"].startswith("Optimizing Through Change")
    _, wdbo = reproductions.load("wdbo-table2")
    # Bardou, Thiran & Ranieri (2024), Table 2: means only
    assert wdbo["table"]["rosenbrock"]["abo"] == [171.04, None]
    assert wdbo["table"]["powell"]["wdbo"] == [428.1, None]
    assert wdbo["table"]["styblinski-tang"]["tv-gp-ucb"] == [15.74, None]
    assert wdbo["citation"]["year"] == 2024 and wdbo["citation"]["table"] == "Table 2"
    for name, paper in (("bolt-table3", bolt), ("wdbo-table2", wdbo)):
        labels = {e.label for e in suite(SUITES[name]).entries}
        rows = set(paper["table"]) - {OVERALL}
        # every row of the paper is a suite label (the real-world ones included)
        assert rows == labels and paper["not_run"] == {}
        assert labels <= rows
        assert set(paper["policies"]) <= set(policy_names())
        for row in paper["table"].values():
            assert set(row) == set(paper["policies"])
    assert reproductions.load("bogunovic-fig2")[1] is None


def test_unknown_and_unavailable_reproductions_are_value_errors(monkeypatch):
    with pytest.raises(ValueError, match="unknown reproduction 'nope'"):
        reproductions.load("nope")
    monkeypatch.setitem(reproductions.UNAVAILABLE, "future-paper", "needs a future policy")
    with pytest.raises(ValueError, match="not available: needs a future policy"):
        reproductions.campaign_for("future-paper")
    with pytest.raises(ValueError, match="seeds"):
        reproductions.campaign_for("bolt-table3", seeds=0)


def _bolt_benchmark(spec):
    from dynbo.benchmarks import get

    options = {k: v for k, v in spec.benchmark_options.items() if k != "horizon"}
    return get(spec.benchmark, **options)


def test_the_modeled_clock_estimate_counts_the_queries_of_a_growing_dataset():
    # R(n) = 1 + n s, c = 1 s, warm-up 2: queries advance t by 4, 5, 6, ... (n = 2, 3, ...)
    # and t passes T = 20 after 4 + 5 + 6 + 7 = 22: four queries
    seconds = reproductions.run_estimate("modeled", 20.0, 1.0, (1.0, 1.0, 0.0, 0.0), warmup=2)
    expected = 4 * reproductions.QUERY_SECONDS + reproductions.CONTINUOUS_OVERHEAD
    assert seconds == pytest.approx(expected)
    # measured: each query advances the clock by its computing and c
    measured = reproductions.run_estimate("measured", 100.0, 0.3)
    assert measured == pytest.approx(
        100.0 / (reproductions.QUERY_SECONDS + 0.3) * reproductions.QUERY_SECONDS
        + reproductions.CONTINUOUS_OVERHEAD
    )


def test_the_estimate_follows_the_documented_cost_model():
    campaign = reproductions.campaign_for("bolt-table3", seeds=1, horizon=30)
    one = reproductions.estimate(campaign)
    assert one.runs == 70 and (one.benchmarks, one.policies, one.seeds) == (10, 7, 1)
    # time-compressed: the queries, and so the computing, of the full 600 s protocol,
    # each benchmark with its own cost c
    shapes = [(bench.horizon, bench.cost) for bench in map(_bolt_benchmark, campaign.specs)]
    assert {h for h, _ in shapes} == {600.0}
    assert one.run_seconds == pytest.approx(
        sum(reproductions.run_estimate("measured", h, c) for h, c in shapes)
    )
    two = reproductions.estimate(campaign, workers=2)
    assert two.seconds == pytest.approx(one.seconds / 2)
    markov = reproductions.estimate(reproductions.campaign_for("bogunovic-fig2", seeds=2))
    # six entries of T = 200 steps and one of T = 400, three policies, two seeds
    expected = (
        3
        * 2
        * (6 * reproductions.run_estimate("step", 200) + reproductions.run_estimate("step", 400))
    )
    assert markov.run_seconds == pytest.approx(expected)
    assert "42 runs (7 benchmarks x 3 policies x 2 seeds)" in markov.describe()


def test_the_dry_run_prints_the_run_count_and_creates_no_store(tmp_path, capsys):
    store = tmp_path / "r.sqlite"
    argv = ["reproduce", "bolt-table3", "--seeds", "1", "--horizon", "30", "--workers", "2"]
    assert main([*argv, "--store", str(store), "--dry-run"]) == 0
    out = capsys.readouterr().out
    bolt = suite("bolt")
    runs = len(bolt.entries) * len(bolt.policies)
    assert runs == 70
    assert f"{runs} runs (10 benchmarks x 7 policies x 1 seed)" in out
    assert "estimated time: about" in out and "2 workers" in out
    assert not store.exists() and not list(tmp_path.iterdir())


@pytest.mark.parametrize("name", ["nope", "future-paper"])
def test_an_unknown_or_unavailable_name_exits_2_with_one_error_line(
    tmp_path, capsys, monkeypatch, name
):
    monkeypatch.setitem(reproductions.UNAVAILABLE, "future-paper", "needs a future policy")
    assert main(["reproduce", name, "--store", str(tmp_path / "s.sqlite")]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dynbo: error:") and name in lines[0]
    assert captured.out == "" and not list(tmp_path.iterdir())


# (label, policy, seed) -> average regret of a fake store on two of BOLT's benchmarks
MEASURED = {
    ("hartmann3", "gp-ucb", 0): 1.0,
    ("hartmann3", "gp-ucb", 1): 1.4,
    ("hartmann3", "bolt", 0): 0.2,
    ("hartmann3", "bolt", 1): 0.4,
    ("powell", "gp-ucb", 0): 3000.0,
    ("powell", "gp-ucb", 1): 3400.0,
    ("powell", "bolt", 0): 1100.0,
    ("powell", "bolt", 1): 1300.0,
}


def fake_store(path):
    store = Store(path)
    ids = []
    for (label, policy, seed), value in MEASURED.items():
        spec = RunSpec(
            benchmark=label, label=label, policy=policy, seed=seed, benchmark_options={"dim": 2}
        )
        summary = {"average_regret": value, "queries": 5}
        store.save_run(RunResult(spec, "done", [], [], summary))
        ids.append(spec.run_id)
    store.add_campaign("c1", "fake", {"name": "fake"})
    store.link("c1", ids)
    return store


def test_the_comparison_table_shows_the_paper_and_the_measured_numbers(tmp_path):
    with fake_store(tmp_path / "s.sqlite") as store:
        table = build_table(store.runs("c1"))
    _, paper = reproductions.load("bolt-table3")
    page = paper_table_html(paper, table, note="Measured with 2 seeds.")
    # the paper's cells and the measured mean +- se (hartmann3 bolt: 0.3 +- 0.1, bold)
    assert "0.3 ± 0.02</td>" in page and "<b>0.3 ± 0.1</b>" in page
    assert "1.45 ± 0.15</td>" in page and "1.2 ± 0.2</td>" in page
    assert "1235 ± 30</td>" in page and "<b>1200 ± 100</b>" in page
    assert page.count("<th>paper</th><th>dynbo</th>") == 7
    assert "Measured with 2 seeds." in page and "Optimizing Through Change" in page
    # policies and benchmarks the store lacks: the paper's number, no measurement
    assert '<td class="paper" style="color:#555" data-paper="0.42">0.42 ± 0.01</td>' in page
    assert "Temperature" in page
    md = paper_table_markdown(paper, table)
    row = next(line for line in md.splitlines() if line.startswith("| hartmann3 "))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[0] == "hartmann3 [Hartmann (3)]"
    assert cells[1:3] == ["1.45 ± 0.15", "1.2 ± 0.2"]  # gp-ucb: paper, measured
    assert cells[-2:] == ["0.3 ± 0.02", "**0.3 ± 0.1**"]
    powell = next(line for line in md.splitlines() if line.startswith("| powell "))
    assert "| 3669 ± 137 | 3200 ± 200 |" in powell  # gp-ucb: paper, measured
    wlan = next(line for line in md.splitlines() if line.startswith("| wlan "))
    assert wlan.endswith("| 8.1 ± 0.21 | – |")  # paper only: not in the store
    overall = next(line for line in md.splitlines() if line.startswith("| OVERALL "))
    assert "0.01 ± 0.01" in overall


def test_the_comparison_shows_the_time_averaged_regret_beside_the_per_query_one(tmp_path):
    with fake_store(tmp_path / "s.sqlite") as store:
        runs = store.runs("c1")
    for run in runs:  # the time-averaged regret: here ten times the per-query one
        run["summary"]["time_averaged_regret"] = 10 * run["summary"]["average_regret"]
    table = build_table(runs)
    averaged = build_table(runs, "time_averaged_regret")
    _, paper = reproductions.load("bolt-table3")
    page = paper_table_html(paper, table, time_averaged=averaged)
    assert page.count("<th>paper</th><th>dynbo</th><th>dynbo, time-averaged</th>") == 7
    assert "<b>0.3 ± 0.1</b>" in page and "<b>3 ± 1</b>" in page  # hartmann3 bolt
    assert "time-averaged" in page and "waits" in page  # the caption says why
    md = paper_table_markdown(paper, table, time_averaged=averaged)
    row = next(line for line in md.splitlines() if line.startswith("| hartmann3 "))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:4] == ["1.45 ± 0.15", "1.2 ± 0.2", "12 ± 2"]  # gp-ucb
    # without it, two columns per policy as before
    assert "time-averaged" not in paper_table_html(paper, table)


def test_reproduce_runs_resumes_and_writes_the_report_with_the_paper_numbers(
    tmp_path, capsys, monkeypatch
):
    # one cheap run on a benchmark of BOLT's table, under the exactly replayable clock
    tiny = build_campaign(
        {
            "name": "tiny",
            "benchmarks": [
                {
                    "name": "eggholder",
                    "label": "eggholder",
                    "options": {"dim": 1, "horizon": 3.0, "cost": 0.05},
                }
            ],
            "policies": ["gp-ucb"],
            "seeds": 1,
            "protocol": {"clock": "modeled", "response_time": [0.3, 0.0, 0.0, 0.0], "warmup": 3},
        }
    )
    monkeypatch.setattr(reproductions, "campaign_for", lambda name, seeds=None, horizon=None: tiny)
    store, out = tmp_path / "s.sqlite", tmp_path / "report"
    argv = ["reproduce", "bolt-table3", "--store", str(store), "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed[-1] == str(out / "index.html")
    assert "1 runs, 0 already stored, 1 done, 0 failed" in "\n".join(printed)
    page = (out / "index.html").read_text()
    assert page.index('class="paper-comparison"') > page.index('<table class="results">')
    assert "516 ± 16.6</td>" in page  # Table 3's GP-UCB on Eggholder
    with Store(store, read_only=True) as s:
        measured = s.runs()[0]["summary"]["average_regret"]
    assert f'data-mean="{measured!r}"' in page
    assert "516 ± 16.6" in (out / "paper_table.md").read_text()
    # the same command again resumes: nothing is rerun
    assert main(argv) == 0
    assert "1 runs, 1 already stored, 0 done" in capsys.readouterr().out


def test_reference_players_are_estimated_without_a_model_fit():
    step = reproductions.run_estimate("step", 200.0, reference=True)
    assert step == pytest.approx(
        200 * reproductions.REFERENCE_QUERY_SECONDS + reproductions.STEP_OVERHEAD
    )
    assert step < reproductions.run_estimate("step", 200.0) / 5
    campaign = reproductions.campaign_for("bogunovic-fig2", seeds=1)
    config = {**campaign.config, "references": ["random", "oracle-lag"]}
    from dynbo.harness.campaign import build_campaign

    with_references = build_campaign(config)
    extra = [s for s in with_references.specs if s.policy in ("random", "oracle-lag")]
    assert len(extra) == 2 * 7
    added = reproductions.estimate(with_references).run_seconds - (
        reproductions.estimate(campaign).run_seconds
    )
    # six entries of T = 200 steps and one of T = 400, two reference players
    expected = 2 * (
        6 * reproductions.run_estimate("step", 200, reference=True)
        + reproductions.run_estimate("step", 400, reference=True)
    )
    assert added == pytest.approx(expected)
