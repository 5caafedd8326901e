"""Equal exploration: one multiplier of sigma for every policy, and a scale on each schedule."""

import math

import numpy as np
import pytest

from dynbo import benchmarks
from dynbo.acquisition.ucb import Exploration
from dynbo.harness.campaign import build_campaign
from dynbo.harness.loop import make_run_policy
from dynbo.policies import make

FAST = {"raw_samples": 16, "restarts": 1, "fit_iterations": 5}


def test_equal_exploration_gives_every_policy_the_same_multiplier_at_every_iteration():
    from dynbo.policies import available

    policies = available()  # every policy, whatever its convention for beta
    assert len(policies) >= 14
    campaign = build_campaign(
        {
            "benchmarks": [{"name": "ackley", "options": {"dim": 1}}],
            "policies": [{"name": p, "options": FAST} for p in policies],
            "references": ["random"],
            "equal_exploration": 2.47,
            "protocol": {"clock": "step", "horizon": 5},
        }
    )
    bench = benchmarks.get("ackley", dim=1)
    rng = np.random.default_rng(0)
    seen = {}
    for spec in campaign.specs:
        if spec.policy == "random":
            assert "sigma_multiplier" not in spec.policy_options
            continue
        assert spec.policy_options["sigma_multiplier"] == 2.47
        policy = make_run_policy(spec, bench, 5.0)
        multipliers = []
        for k in range(1, 4):
            query = policy.suggest(float(k))
            multipliers.append(policy.diagnostics.extra["sigma_multiplier"])
            policy.observe(query.x, float(k), float(rng.normal()))
        seen[spec.policy] = multipliers
    assert seen and all(m == [2.47, 2.47, 2.47] for m in seen.values()), seen


def test_the_schedules_differ_without_it_and_the_scale_multiplies_them():
    bounds = [[0.0, 0.0], [1.0, 1.0]]
    rng = np.random.default_rng(1)
    data = [(rng.uniform(size=2), 0.0, float(rng.normal())) for _ in range(4)]
    kappas = {}
    for name in ("gp-ucb", "sw-gp-ucb"):
        for scale in (1.0, 3.0):
            p = make(name, bounds=bounds, exploration_scale=scale, **FAST)
            for x, t, y in data:
                p.observe(x, t, y)
            kappas[(name, scale)] = p.kappa()
            assert kappas[(name, scale)] == pytest.approx(scale * kappas[(name, 1.0)])
    # GP-UCB: sqrt(0.2 d log 2n); SW-GP-UCB: its radius itself (a different convention)
    assert kappas[("gp-ucb", 1.0)] == pytest.approx(math.sqrt(0.2 * 2 * math.log(8)))
    assert kappas[("gp-ucb", 1.0)] != pytest.approx(kappas[("sw-gp-ucb", 1.0)])
    fixed = make("sw-gp-ucb", bounds=bounds, sigma_multiplier=0.5, **FAST)
    assert fixed.kappa() == 0.5


def test_exploration_options_are_checked():
    assert Exploration(True, 2.0).kappa(lambda: 4.0) == 8.0
    assert Exploration(False, 2.0).kappa(lambda: 4.0) == 4.0
    assert Exploration(False, fixed=1.5).kappa(lambda: 1 / 0) == 1.5  # schedule not read
    with pytest.raises(ValueError, match="exploration_scale"):
        make("gp-ucb", bounds=[[0], [1]], exploration_scale=-1.0)
    with pytest.raises(ValueError, match="sigma_multiplier"):
        make("gp-ucb", bounds=[[0], [1]], sigma_multiplier=float("nan"))
    with pytest.raises(ValueError, match="not both"):
        make("gp-ucb", bounds=[[0], [1]], sigma_multiplier=1.0, exploration_scale=2.0)
    config = {"benchmarks": ["ackley"], "policies": ["gp-ucb"], "equal_exploration": 2.0}
    with pytest.raises(ValueError, match="must be a number"):
        build_campaign({**config, "equal_exploration": "2"})
    with pytest.raises(ValueError, match="in \\[0"):
        build_campaign({**config, "equal_exploration": -1})
    own = {"name": "gp-ucb", "options": {"sigma_multiplier": 1.0}}
    with pytest.raises(ValueError, match="sets sigma_multiplier"):
        build_campaign({**config, "policies": [own]})
    scaled = {"name": "gp-ucb", "options": {"exploration_scale": 2.0}}
    with pytest.raises(ValueError, match="exploration_scale"):
        build_campaign({**config, "policies": [scaled]})


def test_the_reports_settings_name_the_campaigns_equal_exploration():
    from dynbo.report.html import _settings_html

    runs = [
        {
            "run_id": "a",
            "policy": "gp-ucb",
            "label": "b",
            "policy_options": {"sigma_multiplier": 2.0},
        },
        {"run_id": "r", "policy": "random", "label": "b", "policy_options": {}},
    ]
    variants = {"a": "gp-ucb", "r": "random"}
    config = {"policies": ["gp-ucb"], "references": ["random"], "equal_exploration": 2.0}
    page = _settings_html(runs, variants, config, ("gp-ucb", "random"))
    gp_row, random_row = page.split("<tr><th>gp-ucb</th>")[1], page.split("<tr><th>random</th>")[1]
    assert "equal_exploration" in gp_row.split("</tr>")[0]
    assert "equal_exploration" not in random_row.split("</tr>")[0]
    assert "equal_exploration" not in _settings_html(
        runs, variants, {"policies": ["gp-ucb"]}, ("gp-ucb", "random")
    )
