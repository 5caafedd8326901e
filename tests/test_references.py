"""Reference players: random and oracle-lag, on every benchmark family and in campaigns."""

import json

import numpy as np
import pytest

from dynbo import benchmarks
from dynbo.harness import Protocol, RunSpec, execute
from dynbo.harness.campaign import build_campaign
from dynbo.harness.references import make_reference, reference_names
from tests.toy import MovingPeak

# one benchmark of each family, small enough for a test (options the registry accepts)
FAMILIES = {
    "synthetic": ("ackley", {"dim": 2}),
    "moving optimum": ("piecewise-six-hump-camel", {}),
    "markov": ("markov", {"grid_size": 20}),
    "rkhs": ("rkhs", {}),
    "temperature": ("temperature-sensors", {}),
    "wlan": ("wlan", {}),
    "cartpole": ("cartpole", {}),
}


def family_spec(name, options, policy, seed=0):
    return RunSpec(
        benchmark=name,
        policy=policy,
        seed=seed,
        protocol=Protocol(clock="step", horizon=6, warmup=2),
        benchmark_options=options,
    )


def accepted(name, options):
    known = set(benchmarks.options(name))
    return {k: v for k, v in options.items() if k in known}


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("player", reference_names())
def test_every_reference_runs_on_every_benchmark_family(family, player):
    name, options = FAMILIES[family]
    options = accepted(name, options)
    spec = family_spec(name, options, player)
    result = execute(spec)
    assert result.status == "done", result.error
    loop = [r for r in result.iterations if not r["warmup"]]
    assert len(loop) >= 5
    bench = benchmarks.get(name, **options)
    for row in loop:
        x = np.array(json.loads(row["x"]))
        assert np.all(x >= bench.bounds[0] - 1e-12) and np.all(x <= bench.bounds[1] + 1e-12)
        assert row["dataset_size"] == 0 and row["regret"] >= -1e-9


def test_oracle_lag_plays_the_maximizer_at_the_previous_observation_time():
    bench = MovingPeak(horizon=20.0, cost=0.5)
    spec = RunSpec(
        benchmark="moving-peak",
        policy="oracle-lag",
        seed=3,
        protocol=Protocol(clock="modeled", response_time=(0.25, 0, 0, 0), warmup=3),
    )
    result = execute(spec, benchmark=bench)
    assert result.status == "done", result.error
    rows = result.iterations
    for previous, row in zip(rows, rows[1:]):
        if row["warmup"]:
            continue
        x_star, _ = bench.optimum(previous["t"])
        np.testing.assert_allclose(json.loads(row["x"]), x_star, rtol=0, atol=1e-12)
        # it answers in R(0) = 0.25 s; the loop starts at T / 40 = 0.5 s
        start = previous["t"] + 0.5 if previous["k"] > 0 else 0.5
        assert row["t"] == pytest.approx(start + 0.25)
    # without a warm-up the first query plays the maximizer at the loop's start time
    player = make_reference("oracle-lag", bench, 0)
    np.testing.assert_allclose(player.suggest(4.0).x, bench.optimum(4.0)[0])
    player.observe([0.1], 5.0, 0.0)
    np.testing.assert_allclose(player.suggest(7.0).x, bench.optimum(5.0)[0])


def test_random_is_uniform_seeded_and_apart_from_the_loops_streams():
    bench = MovingPeak(horizon=20.0, cost=0.5)
    a = make_reference("random", bench, 7)
    b = make_reference("random", bench, 7)
    c = make_reference("random", bench, 8)
    xa = np.array([a.suggest(float(k)).x for k in range(400)])
    xb = np.array([b.suggest(float(k)).x for k in range(400)])
    xc = np.array([c.suggest(float(k)).x for k in range(400)])
    np.testing.assert_array_equal(xa, xb)
    assert not np.array_equal(xa, xc)
    low, high = bench.bounds
    assert np.all(xa >= low) and np.all(xa <= high)
    # uniform: the mean and the variance of U(low, high), within 5 standard errors
    width = high - low
    assert abs(xa.mean(0) - (low + width / 2)).max() < 5 * width.max() / np.sqrt(12 * 400)
    np.testing.assert_allclose(xa.var(0), width**2 / 12, rtol=0.25)
    assert a.dataset_size == 0 and a.diagnostics.iteration == 400
    with pytest.raises(ValueError, match="takes no options"):
        make_reference("random", bench, 0, {"beta": 2.0})
    with pytest.raises(ValueError, match="unknown reference player"):
        make_reference("oracle", bench, 0)


def test_random_plays_the_candidates_of_a_finite_benchmark():
    bench = benchmarks.get("temperature-sensors")
    player = make_reference("random", bench, 0)
    candidates = {tuple(row) for row in bench.candidates}
    for k in range(50):
        assert tuple(player.suggest(float(k)).x) in candidates


def test_a_campaign_adds_the_references_it_names_and_refuses_others():
    config = {
        "benchmarks": ["ackley"],
        "policies": ["gp-ucb"],
        "seeds": 2,
        "protocol": {"clock": "step", "horizon": 5},
    }
    assert {s.policy for s in build_campaign(config).specs} == {"gp-ucb"}
    with_refs = build_campaign({**config, "references": ["random", "oracle-lag"]})
    assert [s.policy for s in with_refs.specs].count("random") == 2
    assert {s.policy for s in with_refs.specs} == {"gp-ucb", "random", "oracle-lag"}
    listed = build_campaign({**config, "policies": ["gp-ucb", "random"], "references": ["random"]})
    assert [s.policy for s in listed.specs].count("random") == 2  # not twice per seed
    for bad, message in (
        ("random", "must be a list"),
        (["oracle"], "unknown reference player"),
        (["random", "random"], "twice"),
    ):
        with pytest.raises(ValueError, match=message):
            build_campaign({**config, "references": bad})


def table_runs(values):
    """Run rows as the store returns them: ``(benchmark, policy, seed) -> average regret``."""
    return [
        {
            "run_id": f"{bench}-{policy}-{seed}",
            "label": bench,
            "policy": policy,
            "policy_options": {},
            "seed": seed,
            "status": "done",
            "summary": {"average_regret": value, "queries": 10},
        }
        for (bench, policy, seed), value in values.items()
    ]


def test_tables_rank_the_policies_only_and_score_between_the_references():
    from dynbo.report.tables import OVERALL, SCORE, build_table, summary_table

    values = {}
    for seed in (0, 1):
        values.update(
            {
                ("A", "gp-ucb", seed): 4.0 + seed,  # mean 4.5
                ("A", "wdbo", seed): 2.0 + seed,  # mean 2.5
                ("A", "random", seed): 9.0 + seed,  # mean 9.5
                ("A", "oracle-lag", seed): 0.5 + seed,  # mean 1.0
                ("B", "gp-ucb", seed): 1.0,
                ("B", "wdbo", seed): 3.0,
                ("B", "random", seed): 5.0,
                ("B", "oracle-lag", seed): 0.0,
            }
        )
    table = build_table(table_runs(values))
    assert table.columns == ("gp-ucb", "wdbo", "random", "oracle-lag")
    assert table.references == ("random", "oracle-lag")
    # oracle-lag has the smallest regret, but the best of the row is a policy
    assert table.cells[("A", "wdbo")].bold and not table.cells[("A", "oracle-lag")].bold
    assert table.cells[("B", "gp-ucb")].bold
    # OVERALL: min-max over the policies' runs; A spans [2, 5], B is [1, 3]
    seed0 = {"gp-ucb": (4 - 2) / 3 + 0.0, "wdbo": 0.0 + 1.0, "random": 7 / 3 + 2.0}
    for column, expected in seed0.items():
        cell = table.cells[(OVERALL, column)]
        assert cell.seeds == 2
        seed1 = {"gp-ucb": (5 - 2) / 3 + 0.0, "wdbo": 1 / 3 + 1.0, "random": 8 / 3 + 2.0}[column]
        assert cell.mean == pytest.approx((expected / 2 + seed1 / 2) / 2)

    # SCORE: anchors oracle-lag (0) and random (1) per benchmark, by their means
    def score(a, b):
        return ((a - 1.0) / (9.5 - 1.0) + (b - 0.0) / (5.0 - 0.0)) / 2

    expected = {
        "gp-ucb": [score(4.0, 1.0), score(5.0, 1.0)],
        "wdbo": [score(2.0, 3.0), score(3.0, 3.0)],
        "oracle-lag": [score(0.5, 0.0), score(1.5, 0.0)],
        "random": [score(9.0, 5.0), score(10.0, 5.0)],
    }
    for column, per_seed in expected.items():
        assert table.cells[(SCORE, column)].mean == pytest.approx(np.mean(per_seed))
    assert table.cells[(SCORE, "random")].mean == pytest.approx(1.0)
    assert table.cells[(SCORE, "oracle-lag")].mean == pytest.approx(0.0)
    assert table.rows[-2:] == (OVERALL, SCORE)
    assert "SCORE" in table.caption and "not ranked" in table.caption
    assert "SCORE" in summary_table(table_runs(values))
    assert 'class="reference"' in table.html()


def test_without_oracle_lag_the_score_anchors_at_the_best_policy():
    from dynbo.report.tables import SCORE, build_table

    values = {
        ("A", "gp-ucb", 0): 4.0,
        ("A", "wdbo", 0): 2.0,
        ("A", "random", 0): 10.0,
    }
    table = build_table(table_runs(values))
    assert table.cells[(SCORE, "wdbo")].mean == 0.0
    assert table.cells[(SCORE, "gp-ucb")].mean == pytest.approx(2.0 / 8.0)
    assert table.cells[(SCORE, "random")].mean == 1.0
    # no random column: no score
    del values[("A", "random", 0)]
    assert SCORE not in build_table(table_runs(values)).rows


def test_reference_players_have_their_own_line_styles():
    from dynbo.report.figures import REFERENCE_STYLES, series_styles

    styles = series_styles(["wdbo", "random", "gp-ucb", "oracle-lag"])
    assert styles["random"] == REFERENCE_STYLES["random"]
    assert styles["oracle-lag"]["color"] == "black"
    assert styles["gp-ucb"]["color"] == "C0" and styles["wdbo"]["color"] == "C1"
