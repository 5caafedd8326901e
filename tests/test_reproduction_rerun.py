"""benchmarks/reproduction_rerun.py: a tuned campaign reaches the evaluation runs."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from dynbo.harness import Store
from dynbo.harness.tune import write_campaign

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "reproduction_rerun.py"

FAST = {"raw_samples": 16, "restarts": 1, "fit_iterations": 5}

#: evaluation seeds 0, 1; one 1-D benchmark; a short step-clock protocol
CONFIG = {
    "name": "tiny",
    "benchmarks": [{"name": "ackley", "options": {"dim": 1}}],
    "policies": [{"name": "sw-gp-ucb", "options": FAST}],
    "seeds": 2,
    "protocol": {"clock": "step", "horizon": 5, "warmup": 2},
}


def _script():
    spec = importlib.util.spec_from_file_location("reproduction_rerun", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(module, monkeypatch, argv):
    monkeypatch.setattr(sys, "argv", ["reproduction_rerun.py", *argv])
    module.main()


def test_a_campaign_file_replaces_the_reproductions_config(tmp_path):
    module = _script()
    path = write_campaign(CONFIG, tmp_path / "c.toml")
    args = module.argparse.Namespace(
        name="w-sparq-rkhs",
        campaign=str(path),
        seeds=3,
        equal_exploration=None,
        clock=None,
        response_time=None,
    )
    config, paper = module.campaign_config(args)
    assert paper is None  # the rkhs paper prints a figure
    assert config["policies"] == CONFIG["policies"]
    assert config["benchmarks"] == CONFIG["benchmarks"]
    assert config["seeds"] == 3 and config["references"] == ["random", "oracle-lag"]


def test_tuned_settings_reach_the_evaluation_runs(tmp_path, monkeypatch):
    module = _script()
    path = write_campaign(CONFIG, tmp_path / "c.toml")
    out, tuned = tmp_path / "out.json", tmp_path / "tuned.toml"
    _run(
        module,
        monkeypatch,
        [
            "w-sparq-rkhs",
            "--campaign",
            str(path),
            "--tuning-seeds",
            "100-101",
            "--budget",
            "2",
            "--tuning-store",
            str(tmp_path / "tuning.sqlite"),
            "--tuned-campaign",
            str(tuned),
            "--store",
            str(tmp_path / "eval.sqlite"),
            "--out",
            str(out),
            "--stated-ranking",
            "sw-gp-ucb;random",
            "--per-run",
        ],
    )
    result = json.loads(out.read_text())
    # every evaluation run, with its summary fields
    assert {(r["policy"], r["seed"]) for r in result["per_run"]} == {
        (p, s) for p in ("sw-gp-ucb", "random", "oracle-lag") for s in (0, 1)
    }
    assert all(r["queries"] == 5 and r["average_regret"] >= 0 for r in result["per_run"])
    # one benchmark: no OVERALL row, so the stated ordering meets the benchmark's row
    assert result["kendall_tau_stated"]["row"] == "ackley"
    assert result["kendall_tau_stated"]["policies"] == ["sw-gp-ucb", "random"]
    assert result["tuning"]["stored_wall_seconds_total"] > 0
    (entry,) = result["tuning"]["entries"]
    assert result["tuning"]["tuning_seeds"] == [100, 101]
    assert len(entry["candidates"]) == 2 and entry["candidates"][0]["settings"] == {}
    assert result["kendall_tau_overall"] is None and result["kendall_tau_note"]
    with Store(tmp_path / "tuning.sqlite") as store:
        assert {run["seed"] for run in store.runs()} == {100, 101}
    with Store(tmp_path / "eval.sqlite") as store:
        runs = [run for run in store.runs() if run["policy"] == "sw-gp-ucb"]
    assert {run["seed"] for run in runs} == {0, 1}
    for run in runs:
        for name, value in entry["options"].items():
            assert run["policy_options"][name] == value
    assert tuned.is_file()
    tuned_policies = result["campaign"]["policies"]
    assert tuned_policies[0]["options"] == entry["options"]
    assert tuned_policies[0]["tuned"] == entry["provenance"]


def test_a_stated_ranking_gives_kendalls_tau_b():
    module = _script()
    levels = module.stated_levels("a,b;c,d")
    assert levels == [["a", "b"], ["c", "d"]]
    agree = module.stated_tau(levels, {"a": 0.1, "b": 0.2, "c": 0.5, "d": 0.9})
    assert agree["tau_b"] > 0.7 and agree["policies"] == ["a", "b", "c", "d"]
    flipped = module.stated_tau(levels, {"a": 0.9, "b": 0.5, "c": 0.2, "d": 0.1})
    assert flipped["tau_b"] == -agree["tau_b"]
    assert module.stated_tau(levels, {"a": 0.1, "c": 0.5})["tau_b"] == 1.0  # only those run


def test_a_stated_ranking_meets_the_chosen_row_and_every_row():
    from types import SimpleNamespace

    module = _script()
    means = {
        ("sudden", "a"): 0.1,
        ("sudden", "b"): 0.5,
        ("smooth", "a"): 0.9,
        ("smooth", "b"): 0.2,
        ("OVERALL", "a"): 0.4,
        ("OVERALL", "b"): 0.3,
    }
    table = SimpleNamespace(
        rows=["sudden", "smooth", "OVERALL"],
        cells={key: SimpleNamespace(mean=v) for key, v in means.items()},
    )
    levels = module.stated_levels("a;b")
    headline, every = module.stated_by_row(levels, table, "sudden")
    assert headline["row"] == "sudden" and headline["tau_b"] == 1.0
    assert {row: v["tau_b"] for row, v in every.items()} == {
        "sudden": 1.0,
        "smooth": -1.0,
        "OVERALL": -1.0,
    }
    assert module.stated_by_row(levels, table, None)[0]["row"] == "OVERALL"
    with pytest.raises(ValueError, match="not a row"):
        module.stated_by_row(levels, table, "missing")
