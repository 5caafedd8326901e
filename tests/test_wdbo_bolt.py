import math

import numpy as np
import pytest
import torch

from dynbo.harness import Protocol, RunSpec, execute
from dynbo.policies import make
from dynbo.relevancy import convolution_matrix
from dynbo.relevancy.reference import naive_relevancies
from dynbo.theory import max_dataset_size
from tests.toy import MovingPeak

FIXED = {
    "learn_hyperparameters": False,
    "initial_hyperparameters": {
        "outputscale": 1.0,
        "lengthscale_space": 0.3,
        "lengthscale_time": 1.0,
        "noise": 0.01,
    },
    "raw_samples": 16,
    "restarts": 1,
}


def f(x, t):
    return float(np.sin(4 * x[0]) + np.cos(3 * x[1]) * np.cos(t))


def naive_step(policy, present):
    """Relevancies of the policy's current dataset by the naive Theorem 4.1."""
    gp = policy.model
    h = gp.hyperparameters
    inputs = gp.inputs
    delta = gp.covariance(inputs, inputs) + torch.diag(gp.noise_variances)
    conv = convolution_matrix(
        inputs,
        spatial=gp.kernel.spatial,
        temporal=gp.kernel.temporal,
        lengthscale_space=list(h.lengthscale_space),
        lengthscale_time=h.lengthscale_time,
        present_time=present,
    )
    return naive_relevancies(
        delta.numpy(), gp.standardized_targets.numpy(), conv.numpy(), h.outputscale
    )


def test_wdbo_removes_what_the_papers_loop_removes():
    # min_dataset_size=1 so that only the budget can stop the removal loop
    p = make("wdbo", bounds=[[0, 0], [1, 1]], seed=0, alpha=0.25, min_dataset_size=1, **FIXED)
    rng = np.random.default_rng(2)
    for t in [0.0, 0.2, 0.4, 3.0, 4.0, 5.0]:
        x = rng.uniform(0, 1, 2)
        p.observe(x, t, f(x, t))
    # iteration 1 (t = 5.5): b = 1, nothing to remove, no growth yet (no previous time)
    q = p.suggest(5.5)
    assert p.diagnostics.removed == 0 and p.budget == 1.0
    p.observe(q.x, 5.6, f(q.x, 5.6))
    # iteration 2 (t = 6.5): b = 1 still removes nothing; then b = 1.25^((6.5 - 5.5) / l_T)
    q = p.suggest(6.5)
    assert p.diagnostics.removed == 0
    assert p.budget == pytest.approx(1.25, rel=1e-12)
    p.observe(q.x, 6.6, f(q.x, 6.6))
    # iteration 3 (t = 7): trace lines 9-20 with the naive criterion (Theorem 4.1)
    shadow = make("wdbo", bounds=[[0, 0], [1, 1]], seed=0, alpha=0.25, **FIXED)
    data = p.dataset
    for x, t, y in zip(data.x, data.t, data.y):
        shadow.observe(x, t, y)
    shadow.model.restandardize()
    mean, scale = shadow.model.target_mean, shadow.model.target_scale
    b = 1.25
    expected_removed, stop_value = [], None
    while b > 1:
        values = naive_step(shadow, present=7.0)
        i = int(np.argmin(values))
        if not b > 1 + values[i]:  # line 15 fails: the loop breaks (line 19)
            stop_value = values[i]
            break
        expected_removed.append(float(shadow.dataset.t[i]))
        b /= 1 + values[i]  # line 17
        shadow._remove(i)
        # the paper's loop keeps the GP's units while it removes
        assert (shadow.model.target_mean, shadow.model.target_scale) == (mean, scale)
    b *= 1.25 ** ((7.0 - 6.5) / 1.0)  # line 24 with l_T = 1
    p.suggest(7.0)
    diag = p.diagnostics
    # by hand: the six old observations have relevancies 1e-4 .. 0.08, whose product
    # (1 + R) = 1.11 fits in the budget 1.25; the next candidate (t = 5.6, R = 0.18) does not.
    assert expected_removed == [0.2, 0.0, 0.4, 3.0, 4.0, 5.0]
    assert diag.extra["removed_times"] == expected_removed
    assert stop_value == pytest.approx(0.18, abs=0.01)
    assert list(p.dataset.t) == [5.6, 6.6]
    assert p.budget == pytest.approx(b, rel=1e-9)
    assert math.prod(1 + r for r in diag.extra["removed_relevancies"]) == pytest.approx(
        1.25 / (b / 1.25**0.5), rel=1e-9
    )


def paper_removals(policy, present, budget, options):
    """Lines 9-20 of Algorithm 1 on a copy of ``policy``'s data, scored at ``present``."""
    shadow = make("wdbo", bounds=[[0, 0], [1, 1]], seed=0, **options)
    data = policy.dataset
    for x, t, y in zip(data.x, data.t, data.y):
        shadow.observe(x, t, y)
    shadow.model.restandardize()
    removed, relevancies = [], []
    while budget > 1 and shadow.dataset_size > 1:
        values = naive_step(shadow, present=present)
        i = int(np.argmin(values))
        if not budget > 1 + values[i]:
            break
        removed.append(float(shadow.dataset.t[i]))
        relevancies.append(float(values[i]))
        budget /= 1 + values[i]
        shadow._remove(i)
    return removed, relevancies


@pytest.mark.parametrize("relevancy_time", ["suggest", "last_observation"])
def test_wdbo_relevancy_time_scores_where_it_says(relevancy_time):
    # The cleaning of iteration k runs inside suggest(t_{k+1}); "suggest" scores the
    # relevancies at t_{k+1}, "last_observation" at t_k (the paper's timing).
    options = {**FIXED, "initial_hyperparameters": {**FIXED["initial_hyperparameters"]}}
    options["initial_hyperparameters"]["lengthscale_time"] = 2.0
    p = make(
        "wdbo",
        bounds=[[0, 0], [1, 1]],
        seed=0,
        alpha=0.5,
        min_dataset_size=1,
        relevancy_time=relevancy_time,
        **options,
    )
    rng = np.random.default_rng(5)
    for t in [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5]:
        x = rng.uniform(0, 1, 2)
        p.observe(x, t, f(x, t))
    q = p.suggest(4.0)
    p.observe(q.x, 4.1, f(q.x, 4.1))
    p.suggest(6.0)  # b = 1.5^(2 / 2) = 1.5 from here on
    p.observe(q.x, 6.1, f(q.x, 6.1))
    budget = p.budget
    assert budget == pytest.approx(1.5, rel=1e-12)
    present = {"suggest": 9.0, "last_observation": 6.1}[relevancy_time]
    expected_times, expected_values = paper_removals(p, present, budget, options)
    other_times, other_values = paper_removals(p, 15.1 - present, budget, options)
    assert expected_times != other_times  # the timing changes what is removed here
    p.suggest(9.0)
    extra = p.diagnostics.extra
    assert expected_times and extra["removed_times"] == expected_times
    np.testing.assert_allclose(extra["removed_relevancies"], expected_values, rtol=1e-9)
    # the option is part of the configuration and survives a state round trip
    clone = type(p).from_state_dict(p.state_dict())
    assert clone.relevancy_time == relevancy_time


def test_wdbo_relevancy_time_validation():
    with pytest.raises(ValueError, match="relevancy_time"):
        make("wdbo", bounds=[[0], [1]], relevancy_time="now")


def test_wdbo_never_goes_below_its_minimum_size_and_validates():
    p = make("wdbo", bounds=[[0], [1]], seed=0, alpha=100.0, min_dataset_size=3, **FIXED)
    for t in np.linspace(0, 1, 6):
        p.observe([t], t, float(t))
    p.suggest(2.0)
    p.suggest(50.0)
    p.suggest(51.0)
    assert p.dataset_size == 3
    with pytest.raises(ValueError, match="alpha"):
        make("wdbo", bounds=[[0], [1]], alpha=-0.1)
    with pytest.raises(ValueError, match="min_dataset_size"):
        make("wdbo", bounds=[[0], [1]], min_dataset_size=0)


@pytest.mark.parametrize("family,expected", [("matern32", 106), ("se", 115), ("matern12", 94)])
def test_bolt_recovers_its_response_time_model_and_n_star(family, expected):
    # BOLT measures R(n) between consecutive suggest calls; fed R(n) = 0.05 + 2e-7 n^3 s
    # with l_T = 60 s fixed it must find the worked example's n* (spec section 7.2).
    options = dict(FIXED)
    options["initial_hyperparameters"] = {
        **FIXED["initial_hyperparameters"],
        "lengthscale_time": 60.0,
    }
    p = make("bolt", bounds=[[0], [1]], seed=0, temporal_kernel=family, **options)
    t = 0.0
    for _ in range(6):
        n = p.dataset_size
        q = p.suggest(t)
        p.observe(q.x, t, f([q.x[0], 0.0], t))
        t += 0.05 + 2e-7 * n**3
    p.suggest(t)
    np.testing.assert_allclose(p.response_time_model(), [0.05, 0, 0, 2e-7], rtol=1e-6, atol=1e-9)
    assert p.max_dataset_size == expected
    assert p.diagnostics.extra["n_star"] == expected


def test_bolt_holds_its_dataset_at_n_star_under_the_modeled_clock():
    response = (0.05, 0.0, 0.0, 2e-7)
    options = dict(FIXED)
    options["initial_hyperparameters"] = {
        **FIXED["initial_hyperparameters"],
        "lengthscale_time": 60.0,
    }
    spec = RunSpec(
        benchmark="moving-peak",
        policy="bolt",
        seed=0,
        protocol=Protocol(clock="modeled", response_time=response, warmup=15, warmup_fraction=0.02),
        policy_options=options,
    )
    result = execute(spec, benchmark=MovingPeak(horizon=40.0, cost=0.0))
    assert result.status == "done", result.error
    loop = [r for r in result.iterations if not r["warmup"]]
    n_star = max_dataset_size(lambda n: 0.05 + 2e-7 * n**3, "matern32", 60.0)
    assert n_star == 106
    reached = next(i for i, r in enumerate(loop) if r["dataset_size"] >= n_star)
    after = [r["dataset_size"] for r in loop[reached:]]
    assert len(after) > 30
    assert all(abs(n - n_star) <= 1 for n in after)
    assert sum(r["removed"] for r in loop) >= len(after) - 1


def test_bolt_response_aggregates_give_the_full_list_fit_with_bounded_memory():
    # Reference: the same policy keeping every (size, duration) pair, fitted unweighted.
    from dynbo.policies.bolt import BOLT
    from dynbo.theory import fit_cubic

    class FullListBOLT(BOLT):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.pairs = []

        def _prepare(self, t, diag):
            if self._previous_time is not None:
                self.pairs.append((self._previous_size, t - self._previous_time))
            super()._prepare(t, diag)

        def response_time_model(self):
            if len({n for n, _ in self.pairs}) < self.min_response_points:
                return None
            sizes, durations = zip(*self.pairs)
            return fit_cubic(sizes, durations).coefficients

    options = {**FIXED, "initial_hyperparameters": {**FIXED["initial_hyperparameters"]}}
    options["initial_hyperparameters"]["lengthscale_time"] = 3.0
    options["candidates"] = np.random.default_rng(1).uniform(0, 1, (64, 2))  # exact, cheap argmax
    aggregated = make("bolt", bounds=[[0, 0], [1, 1]], seed=0, **options)
    full = FullListBOLT([[0, 0], [1, 1]], seed=0, **options)
    rng = np.random.default_rng(0)
    t, n_stars, held = 0.0, [], 0
    for _ in range(400):
        # the protocol's clock: the measured response time R(n) with a +-30 % jitter
        n = aggregated.dataset_size
        t += (0.01 + 3e-5 * n**3) * rng.uniform(0.7, 1.3)
        queries = [policy.suggest(t) for policy in (aggregated, full)]
        assert aggregated.max_dataset_size == full.max_dataset_size
        assert np.array_equal(queries[0].x, queries[1].x)
        if aggregated.max_dataset_size is not None:
            np.testing.assert_allclose(
                aggregated.response_time_model(), full.response_time_model(), rtol=1e-7, atol=1e-12
            )
            n_stars.append(aggregated.max_dataset_size)
            held += aggregated.dataset_size <= aggregated.max_dataset_size + 1
        y = f(queries[0].x, t)
        for policy in (aggregated, full):
            policy.observe(queries[0].x, t, y)
    assert len(n_stars) > 300 and held > 300  # n* was in force for most of the run
    # memory: one aggregate per distinct size, not one pair per iteration
    assert len(full.pairs) == 399
    table = aggregated.response_dataset()
    assert len(table) <= max(n_stars) + 2 < 30
    assert table[:, 2].sum() == 399
    assert len(aggregated.state_dict()["extra"]["responses"]) == len(table)


def test_keep_everything_never_removes():
    p = make("st-gp-ucb", bounds=[[0], [1]], seed=0, **FIXED)
    for t in range(30):
        p.observe([t / 30], float(t), float(np.sin(t)))
        p.suggest(float(t) + 0.5)
    assert p.dataset_size == 30


def test_bolt_validation():
    with pytest.raises(ValueError, match="min_response_points"):
        make("bolt", bounds=[[0], [1]], min_response_points=2)


def test_wdbo_budget_survives_long_pauses_over_short_lengthscales():
    options = {
        **FIXED,
        "initial_hyperparameters": {**FIXED["initial_hyperparameters"], "lengthscale_time": 0.01},
    }
    p = make("wdbo", bounds=[[0], [1]], seed=0, **options)
    for t in np.linspace(0, 5, 8):
        p.observe([t / 5], t, float(np.sin(t)))
    p.suggest(6.0)
    p.suggest(1e4)  # 1e6 lengthscales later: the budget is capped, not overflowing
    assert math.isfinite(p.budget) and p.budget > 1e200
    p.suggest(1e4 + 1)
    assert p.dataset_size == 2
