"""`dynbo tune`: settings chosen on tuning seeds apart from the evaluation seeds."""

import math
import sys

import numpy as np
import pytest

from dynbo.harness import Store, build_campaign, load_campaign, run_campaign
from dynbo.harness.tune import (
    campaign_toml,
    candidate_scores,
    finish_tuning,
    plan_tuning,
    seed_ranges,
    tune,
    write_campaign,
)
from dynbo.policies import available, make, option_defaults, policy_class
from dynbo.policies.tunables import Tunable

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

FAST = {"raw_samples": 16, "restarts": 1, "fit_iterations": 5}

#: evaluation seeds 0, 1; two 1-D benchmarks; a short step-clock protocol
CONFIG = {
    "name": "tiny",
    "benchmarks": [
        {"name": "ackley", "options": {"dim": 1}},
        {"name": "griewank", "options": {"dim": 1}, "label": "G"},
    ],
    "policies": [
        {"name": "gp-ucb", "options": FAST},
        {"name": "sw-gp-ucb", "options": FAST, "label": "SW"},
    ],
    "seeds": 2,
    "references": ["random"],
    "protocol": {"clock": "step", "horizon": 6, "warmup": 3},
}
TUNING_SEEDS = [100, 101]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """One tuning of CONFIG (budget 3, tuning seeds 100-101), shared by the tests."""
    path = tmp_path_factory.mktemp("tune") / "tuning.sqlite"
    with Store(path) as store:
        result = tune(CONFIG, store, tuning_seeds=TUNING_SEEDS, budget=3, progress=False)
    return path, result


def test_tuning_runs_only_tuning_seeds_and_every_candidate(tuned):
    path, result = tuned
    with Store(path) as store:
        runs = store.runs()
    assert {run["seed"] for run in runs} == set(TUNING_SEEDS)
    # 2 policies x 3 candidates x 2 benchmarks x 2 seeds; no reference player is tuned
    assert len(runs) == result.outcome.total == 24
    assert {run["policy"] for run in runs} == {"gp-ucb", "sw-gp-ucb"}
    assert {run["status"] for run in runs} == {"done"}
    gp, sw = result.choices
    assert gp.tuned_names == ("exploration_scale",)
    assert sw.tuned_names == ("exploration_scale", "window")
    for choice in result.choices:
        assert choice.candidates[0] == {}  # the entry's own settings come first
        assert len({str(c) for c in choice.candidates}) == 3
        for settings in choice.candidates[1:]:
            for name, value in settings.items():
                tunable = policy_class(choice.policy).tunables[name]
                assert tunable.low <= value <= tunable.high


def test_tuning_seeds_that_meet_the_evaluation_seeds_are_refused(tmp_path):
    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        with pytest.raises(
            ValueError, match=r"apart from the evaluation seeds \(0-1\); both have 1"
        ):
            tune(CONFIG, store, tuning_seeds=[1, 5], budget=2, progress=False)
        assert store.runs() == [] and store.campaigns() == []
    for bad, message in [
        ({"tuning_seeds": [], "budget": 2}, "seeds"),
        ({"tuning_seeds": [7, 7], "budget": 2}, "more than once"),
        ({"tuning_seeds": [7], "budget": 0}, "budget"),
        ({"tuning_seeds": [7], "budget": 2, "method": "grid"}, "unknown tuning method"),
        ({"tuning_seeds": [7], "budget": 2, "metric": "queries"}, "tuning metric"),
    ]:
        with pytest.raises(ValueError, match=message):
            plan_tuning(CONFIG, **bad)


def test_chosen_settings_reach_the_evaluation_runs_and_the_report(tuned, tmp_path):
    _, result = tuned
    out = write_campaign(result.config, tmp_path / "tuned.toml")
    evaluation = load_campaign(out)
    assert {spec.seed for spec in evaluation.specs} == {0, 1}
    store_path = tmp_path / "eval.sqlite"
    with Store(store_path) as store:
        run_campaign(evaluation, store, progress=False)
        runs = store.runs()
    chosen = {choice.policy: choice for choice in result.choices}
    for run in runs:
        assert run["seed"] in (0, 1)
        if run["policy"] == "random":
            continue
        choice = chosen[run["policy"]]
        assert run["policy_options"] == {**FAST, **choice.candidates[choice.chosen]}
    assert {run["policy"] for run in runs} == {"gp-ucb", "sw-gp-ucb", "random"}

    from dynbo.report.html import write_report

    page = write_report(store_path, tmp_path / "report", progress=None).read_text()
    assert "<h2>Settings</h2>" in page
    for choice in result.choices:
        assert choice.provenance.startswith("tuned on seeds 100-101, budget 3, Sobol design")
        assert choice.provenance in page
    assert "reference player (not tuned)" in page


def test_tuning_again_runs_nothing_and_chooses_the_same(tuned):
    path, result = tuned
    with Store(path) as store:
        again = tune(CONFIG, store, tuning_seeds=TUNING_SEEDS, budget=3, progress=False)
        assert len(store.runs()) == 24
    assert again.outcome.done == 0 and again.outcome.skipped == again.outcome.total == 24
    assert again.config == result.config


def test_scores_are_the_overall_normalization_by_hand():
    # candidate -> benchmark -> seed -> regret
    values = [
        {"a": {1: 2.0, 2: 4.0}, "b": {1: 10.0, 2: 10.0}},
        {"a": {1: 0.0, 2: 2.0}, "b": {1: 30.0, 2: 20.0}},
        {"a": {1: 4.0, 2: 4.0}, "b": {1: 10.0}},  # seed 2 of b missing: not eligible
    ]
    # a: min 0, max 4; b: min 10, max 30
    # candidate 0: seed 1 (0.5 + 0) / 2, seed 2 (1 + 0) / 2 -> 0.375
    # candidate 1: seed 1 (0 + 1) / 2, seed 2 (0.5 + 0.5) / 2 -> 0.5
    scores = candidate_scores(values, ["a", "b"], [1, 2])
    assert scores[:2] == pytest.approx([0.375, 0.5]) and math.isinf(scores[2])
    # a benchmark on which every run is equal counts as 0 for everyone
    assert candidate_scores([{"a": {1: 3.0}}, {"a": {1: 3.0}}], ["a"], [1]) == [0.0, 0.0]


class _Runs:
    """A store that answers with given runs (the score's input, set by hand)."""

    def __init__(self, runs):
        self._runs = runs

    def runs(self, campaign_id=None):
        return self._runs


def test_the_best_candidate_wins_and_ties_go_to_the_earlier():
    config = {**CONFIG, "policies": [{"name": "wdbo", "options": FAST}], "references": []}
    plan = plan_tuning(config, tuning_seeds=TUNING_SEEDS, budget=4)
    specs = {spec.run_id: spec for spec in plan.campaign.specs}
    assert len(specs) == 4 * 2 * 2

    def runs(regret):
        rows = []
        for run_id, (_, j) in plan.run_candidates.items():
            spec = specs[run_id]
            value = regret(j, spec.display_benchmark, spec.seed)
            rows.append(
                {
                    "run_id": run_id,
                    "label": spec.display_benchmark,
                    "seed": spec.seed,
                    "status": "done" if value is not None else "failed",
                    "summary": {} if value is None else {"average_regret": value},
                }
            )
        return _Runs(rows)

    # candidate 2 best on ackley, candidate 3 best on G by a larger normalized margin
    table = {
        "ackley": [5.0, 4.0, 1.0, 3.0],  # normalized 1, .75, 0, .5
        "G": [2.0, 2.0, 1.0, 0.0],  # normalized 1, 1, .5, 0
    }
    choice = finish_tuning(plan, runs(lambda j, b, s: table[b][j])).choices[0]
    assert choice.scores == pytest.approx([1.0, 0.875, 0.25, 0.25])
    assert choice.chosen == 2  # a tie with candidate 3: the earlier one
    assert choice.options == {**FAST, **choice.candidates[2]}
    # a failed run makes its candidate ineligible, however good the others
    choice = finish_tuning(
        plan, runs(lambda j, b, s: None if (j, s) == (2, 101) else table[b][j])
    ).choices[0]
    assert math.isinf(choice.scores[2]) and choice.chosen == 3
    with pytest.raises(ValueError, match="none of its 4 candidates finished"):
        finish_tuning(plan, runs(lambda j, b, s: None))


def test_conflicting_options_and_equal_exploration_are_not_tuned():
    base = {k: v for k, v in CONFIG.items() if k != "references"}
    config = {**base, "policies": [{"name": "r-gp-ucb", "options": {"epsilon": 0.01, **FAST}}]}
    (entry,) = plan_tuning(config, tuning_seeds=[7], budget=3).entries
    assert entry.tuned_names == ("exploration_scale",)  # epsilon fixes reset_every
    config = {**base, "policies": [{"name": "r-gp-ucb", "options": FAST}]}
    (entry,) = plan_tuning(config, tuning_seeds=[7], budget=3).entries
    assert entry.tuned_names == ("exploration_scale", "reset_every")
    assert all(isinstance(c["reset_every"], int) for c in entry.candidates[1:])
    config = {**base, "equal_exploration": 2.0, "policies": [{"name": "gp-ucb", "options": FAST}]}
    plan = plan_tuning(config, tuning_seeds=[7], budget=3)
    assert plan.entries[0].candidates == ({},) and len(plan.campaign.specs) == 2
    config = {
        **base,
        "policies": [{"name": "sparq-gp-ucb", "options": {"queries_rule": "approximation"}}],
    }
    (entry,) = plan_tuning(config, tuning_seeds=[7], budget=2).entries
    assert entry.tuned_names == ("exploration_scale", "alpha")


@pytest.mark.parametrize("name", available())
def test_every_tunable_range_is_accepted_by_its_policy(name):
    cls = policy_class(name)
    assert "exploration_scale" in cls.tunables
    defaults = option_defaults(cls)
    extra = {"noise_variance": 0.01} if cls.known_noise else {}
    for option, tunable in cls.tunables.items():
        assert option in defaults, option
        default = defaults[option]
        if isinstance(default, (int, float)) and not isinstance(default, bool):
            assert tunable.low <= default <= tunable.high, (option, default)
        for value in (tunable.value(0.0), tunable.value(1.0)):
            assert value in (tunable.low, tunable.high)
            policy = make(name, bounds=[[0.0], [1.0]], **{option: value}, **extra)
            assert policy.config[option] == value


def test_tunable_values():
    log = Tunable(0.1, 10.0, log=True)
    assert log.value(0.5) == pytest.approx(1.0)
    whole = Tunable(5, 1000, log=True, integer=True)
    assert {type(whole.value(u)) for u in np.linspace(0, 1, 7)} == {int}
    assert Tunable(0.0, 1.0).value(1 / 3) == 0.3333
    for bad in [(1.0, 1.0), (0.0, 1.0, True), (float("nan"), 1.0)]:
        with pytest.raises(ValueError):
            Tunable(*bad)


def test_campaign_toml_reads_back_the_same_values(tmp_path):
    config = {
        "name": 'quote " and ü',
        "suites": ["quick"],
        "seeds": [0, 4],
        "equal_exploration": 1e-06,
        "policies": [
            "random",
            {"name": "wdbo", "options": {"beta": {"kind": "log_time", "c1": 1.5}, "x y": [1, 2.5]}},
        ],
        "protocol": {"clock": "modeled", "response_time": [0.05, 0.0, 0.0, 2e-7], "threads": 1},
    }
    assert tomllib.loads(campaign_toml(config)) == config
    path = write_campaign(config, tmp_path / "c.toml")
    assert tomllib.loads(path.read_text(encoding="utf-8")) == config


def test_campaigns_accept_a_policy_entry_provenance():
    config = {
        "benchmarks": ["ackley"],
        "policies": [{"name": "gp-ucb", "tuned": "tuned on seeds 5-6, budget 3"}],
    }
    assert len(build_campaign(config)) == 1
    for bad, message in [
        ({"policies": [{"name": "gp-ucb", "tuned": 3}]}, "tuned of policies entry"),
        ({"policies": [{"name": "gp-ucb", "tuned": " "}]}, "non-empty string"),
        ({"benchmarks": [{"name": "ackley", "tuned": "x"}]}, "needs a 'name'"),
    ]:
        with pytest.raises(ValueError, match=message):
            build_campaign({**config, **bad})


def test_seed_ranges():
    assert seed_ranges([102, 100, 101, 7, 9, 10]) == "7, 9-10, 100-102"


def test_cli_tune_writes_the_campaign_and_refuses_shared_seeds(tmp_path, capsys):
    from dynbo.cli import main

    config = tmp_path / "c.toml"
    small = {**CONFIG, "benchmarks": CONFIG["benchmarks"][:1], "policies": CONFIG["policies"][:1]}
    config.write_text(campaign_toml(small))
    store, out = tmp_path / "t.sqlite", tmp_path / "tuned.toml"
    args = ["tune", str(config), "--store", str(store), "--out", str(out), "--budget", "2"]
    assert main([*args, "--tuning-seeds", "0-3", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dynbo: error:") and "apart from the evaluation seeds" in err
    assert len(err.splitlines()) == 1 and not store.exists() and not out.exists()
    assert main([*args, "--tuning-seeds", "x", "--no-progress"]) == 2
    assert main([*args, "--tuning-seeds", "50", "--no-progress"]) == 0
    written = tomllib.loads(out.read_text())
    (entry,) = written["policies"]
    assert entry["tuned"].startswith("tuned on seeds 50, budget 2, Sobol design, average_regret")
    assert written["seeds"] == 2 and written["references"] == ["random"]
    assert "gp-ucb: candidate" in capsys.readouterr().out
