"""The per-iteration fit: the likelihood's analytic Hessian, projected Newton, the
``fit_strategy`` option and its restart rule (``dynbo.policies.fit_strategy``)."""

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_limits

from dynbo import deadline
from dynbo.deadline import Budget, BudgetSpent
from dynbo.models import (
    ArmCovariance,
    HyperparameterBounds,
    Hyperparameters,
    KernelSpec,
    NegativeLogMarginalLikelihood,
    SpatioTemporalGP,
    fit_hyperparameters,
)
from dynbo.models.fit import StartOutcome
from dynbo.policies import Policy, fit_strategy, make
from dynbo.policies.fit_strategy import (
    DISTINCT_LOG_CHANGE,
    RESTART_RULE,
    FitHistory,
    RestartRule,
)
from tests.test_gp import make_data

PRIORS = {"lengthscale_space": (1.0, 1.7), "noise": (-4.0, 1.0), "lengthscale_time": (3.0, 1.7)}


def hessian_by_differences(objective, theta, step=1e-5):
    """Central differences of the analytic gradient, column by column."""
    columns = []
    for i in range(theta.size):
        e = np.zeros_like(theta)
        e[i] = step
        columns.append((objective(theta + e)[1] - objective(theta - e)[1]) / (2 * step))
    return np.stack(columns, axis=1)


def arm_kernel():
    g = torch.Generator().manual_seed(3)
    points = torch.rand(8, 2, generator=g)
    factor = torch.randn(8, 8, generator=g)
    return ArmCovariance(points, factor @ factor.T / 8 + 0.1 * torch.eye(8)), points


#: kernels, fixed names and priors of the objective's tests: every branch of the evaluation
OBJECTIVES = [
    ("matern52", "matern32", False, (), None),
    ("se", "matern12", True, (), None),
    ("matern32", None, False, (), None),
    ("matern12", "se", False, (), PRIORS),
    ("matern52", "wiener", False, (), None),
    ("matern52", "matern52", True, ("noise",), PRIORS),
    ("se", "matern32", False, ("outputscale",), {"noise": ("gamma", 1.1, 5.0)}),
    ("arms", "matern12", False, (), None),
]


def objective_of(spatial, temporal, ard, size=35):
    """A GP on ``size`` points of :func:`make_data` with the named kernel (``"arms"``: a
    given arm covariance)."""
    z, y = make_data(size, d=2)
    if spatial == "arms":
        arms, points = arm_kernel()
        z[:, :2] = points[torch.arange(size) % 8]
        spec = KernelSpec(dim=2, temporal=temporal, arms=arms)
    else:
        spec = KernelSpec(dim=2, spatial=spatial, temporal=temporal, ard=ard)
    inputs = z if temporal else z[:, :2]
    gp = SpatioTemporalGP(spec, Hyperparameters(1.0, (0.3,), 5.0 if temporal else None, 0.05))
    gp.set_data(inputs, y)
    return gp


@pytest.mark.parametrize("spatial,temporal,ard,fixed,priors", OBJECTIVES)
def test_hessian_matches_finite_differences_of_the_gradient(spatial, temporal, ard, fixed, priors):
    gp = objective_of(spatial, temporal, ard)
    objective = NegativeLogMarginalLikelihood(gp, fixed=fixed, priors=priors)
    rng = np.random.default_rng(1)
    for _ in range(2):
        theta = objective.pack(gp.hyperparameters) + rng.normal(scale=0.3, size=objective.size)
        value, gradient, hessian = objective.with_hessian(theta)
        # the same value and gradient as the gradient-only evaluation
        fresh = NegativeLogMarginalLikelihood(gp, fixed=fixed, priors=priors)
        assert fresh(theta)[0] == pytest.approx(value, rel=1e-12)
        np.testing.assert_allclose(fresh(theta)[1], gradient, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(hessian, hessian.T)
        expected = hessian_by_differences(objective, theta)
        scale = max(1.0, np.abs(expected).max())
        assert np.abs(hessian - expected).max() <= 1e-6 * scale


@pytest.mark.parametrize("spatial,temporal,ard,fixed,priors", OBJECTIVES)
def test_the_numpy_evaluation_is_the_torch_one(spatial, temporal, ard, fixed, priors):
    # small datasets on a CPU: the evaluations in NumPy, the same formulas as in torch
    gp = objective_of(spatial, temporal, ard)
    objective = NegativeLogMarginalLikelihood(gp, fixed=fixed, priors=priors)
    assert objective._numpy
    rng = np.random.default_rng(2)
    for _ in range(3):
        theta = objective.pack(gp.hyperparameters) + rng.normal(scale=0.5, size=objective.size)
        value, gradient, hessian = objective._evaluate_numpy(theta, with_hessian=True)
        # the GP factorizes Delta itself (in torch, as a restored policy does)
        assert objective.factor_at(theta) is None
        expected_value, expected_gradient, expected_hessian = objective._evaluate_torch(
            theta, with_hessian=True
        )
        assert value == pytest.approx(expected_value, rel=1e-13)
        for got, expected in ((gradient, expected_gradient), (hessian, expected_hessian)):
            scale = max(1.0, np.abs(expected).max())
            np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * scale)
        # without the Hessian: the same value and gradient
        alone = objective._evaluate_numpy(theta)
        assert alone[0] == value and np.array_equal(alone[1], gradient) and alone[2] is None
        # and the same whatever the number of BLAS threads (a run limits them, a policy
        # restored elsewhere may not): a replay must not depend on it
        for threads in (1, 2):
            with threadpool_limits(limits=threads, user_api="blas"):
                again = objective._evaluate_numpy(theta, with_hessian=True)
            assert again[0] == value
            assert np.array_equal(again[1], gradient) and np.array_equal(again[2], hessian)
        value, gradient, hessian = objective._evaluate_numpy(theta, with_hessian=True)
        # the GP factorizes Delta itself (in torch, as a restored policy does)
        assert objective.factor_at(theta) is None


@pytest.mark.parametrize("with_hessian", [False, True])
def test_the_numpy_evaluation_does_not_depend_on_the_blas_threads_up_to_its_largest(
    with_hessian,
):
    # OpenBLAS splits large calls between threads (LAPACK's POTRI even at n = 17), which
    # changes the rounding; a replay must not depend on how many threads a process runs
    from dynbo.models.fit import _NUMPY_HESSIAN_LARGEST, _NUMPY_LARGEST

    size = _NUMPY_HESSIAN_LARGEST if with_hessian else _NUMPY_LARGEST
    gp = objective_of("matern52", "matern32", True, size)
    objective = NegativeLogMarginalLikelihood(gp, priors=PRIORS)
    theta = objective.pack(gp.hyperparameters) + 0.1
    results = []
    for threads in (1, 2):
        with threadpool_limits(limits=threads, user_api="blas"):
            results.append(objective._evaluate_numpy(theta, with_hessian))
    (value, gradient, hessian), (value_2, gradient_2, hessian_2) = results
    assert value == value_2 and np.array_equal(gradient, gradient_2)
    assert (hessian is None) is not with_hessian
    assert hessian is None or np.array_equal(hessian, hessian_2)


def test_the_numpy_evaluation_leaves_jitter_and_large_datasets_to_torch():
    from dynbo.models.fit import _NUMPY_HESSIAN_LARGEST, _NUMPY_LARGEST

    # two observations at one point, a noise of 1e-26: Delta is singular to working
    # precision, NumPy gives up and the torch evaluation adds the jitter
    gp = SpatioTemporalGP(KernelSpec(dim=1, temporal=None), Hyperparameters(1.0, (0.3,)))
    gp.set_data(torch.tensor([[0.5], [0.5], [0.1]]), torch.tensor([1.0, 1.1, 0.0]))
    objective = NegativeLogMarginalLikelihood(gp)
    theta = objective.pack(gp.hyperparameters)
    theta[-1] = math.log(1e-26)
    assert objective._evaluate_numpy(theta) is None
    value, _ = objective(theta)
    assert math.isfinite(value) and objective.max_jitter > 0
    assert objective.factor_at(theta) is None  # a jittered factor is not the GP's
    # beyond _NUMPY_LARGEST observations (with the Hessian: _NUMPY_HESSIAN_LARGEST) the
    # evaluations stay in torch
    for size in (_NUMPY_HESSIAN_LARGEST, _NUMPY_HESSIAN_LARGEST + 1, _NUMPY_LARGEST + 1):
        objective = NegativeLogMarginalLikelihood(objective_of("matern52", "matern32", False, size))
        used = []
        objective._evaluate_numpy = lambda theta, with_hessian=False: used.append(with_hessian)
        theta = objective.pack(objective.gp.hyperparameters)
        objective(theta)
        objective.with_hessian(theta + 0.1)
        expected = [False] if size <= _NUMPY_LARGEST else []
        assert used == expected + ([True] if size <= _NUMPY_HESSIAN_LARGEST else [])


def test_an_evaluation_with_the_hessian_counts_once_and_checks_the_deadline_first():
    z, y = make_data(20, d=2)
    gp = SpatioTemporalGP(KernelSpec(dim=2), Hyperparameters(1.0, (0.3,), 5.0, 0.05))
    gp.set_data(z, y)
    objective = NegativeLogMarginalLikelihood(gp)
    theta = objective.pack(gp.hyperparameters)
    objective(theta)  # remembered without a Hessian: one more evaluation for it
    objective.with_hessian(theta)
    objective.with_hessian(theta)
    objective(theta)
    assert objective.evaluations == 2
    with deadline.within(Budget.replay([(deadline.FIT, 1)])), pytest.raises(BudgetSpent):
        objective.with_hessian(theta + 0.1)
    assert objective.evaluations == 2


def two_start_optimum(gp, bounds, priors, fresh):
    """The reference: L-BFGS-B from the GP's values and from ``fresh``, as before."""
    reference = SpatioTemporalGP(gp.kernel, gp.hyperparameters)
    reference.set_data(gp.inputs, gp.targets)
    return fit_hyperparameters(
        reference, bounds=bounds, priors=priors, initial=[fresh], max_iterations=200
    )


@pytest.mark.parametrize("ard", [False, True])
def test_newton_reaches_the_two_start_optimum_in_few_evaluations(ard):
    z, y = make_data(60, d=2)
    spec = KernelSpec(dim=2, ard=ard)
    fresh = Hyperparameters(1.0, (0.2,), 30.0, 0.01)
    bounds = HyperparameterBounds()
    gp = SpatioTemporalGP(spec, fresh)
    gp.set_data(z[:50], y[:50])
    cold = fit_hyperparameters(gp, bounds=bounds, priors=PRIORS, method="newton")
    assert cold.message == "Newton decrement below tolerance"
    # one more block of data: the warm start is the previous optimum
    gp.set_data(z, y)
    reference = two_start_optimum(gp, bounds, PRIORS, fresh)
    warm = fit_hyperparameters(gp, bounds=bounds, priors=PRIORS, method="newton")
    assert warm.negative_log_likelihood <= reference.negative_log_likelihood + 1e-6 * abs(
        reference.negative_log_likelihood
    )
    assert warm.evaluations <= 6 < reference.evaluations
    assert -gp.log_marginal_likelihood() == pytest.approx(
        warm.negative_log_likelihood - _log_prior_terms(gp, PRIORS), rel=1e-9
    )
    # at a minimum: what a further exact Newton step would gain (half the decrement) is nil
    objective = NegativeLogMarginalLikelihood(gp, priors=PRIORS)
    theta = objective.pack(gp.hyperparameters)
    low, high = np.array(objective.bounds(bounds)).T
    inside = (theta > low) & (theta < high)
    _, gradient, hessian = objective.with_hessian(theta)
    free_hessian = hessian[np.ix_(inside, inside)]
    assert np.linalg.eigvalsh(free_hessian).min() > 0
    assert 0.5 * gradient[inside] @ np.linalg.solve(free_hessian, gradient[inside]) < 1e-8


@pytest.mark.parametrize("ard", [False, True])
def test_the_last_newton_step_skips_the_hessian_and_ends_where_the_full_test_ends(ard, monkeypatch):
    # the step expected to be the last tests convergence with the Hessian it came from:
    # the same optimum as testing with the new point's own Hessian, with fewer Hessians
    from dynbo.models import fit as fit_module

    z, y = make_data(60, d=2)
    spec = KernelSpec(dim=2, ard=ard)
    bounds = HyperparameterBounds()

    def warm_fit():
        gp = SpatioTemporalGP(spec, Hyperparameters(1.0, (0.2,), 30.0, 0.01))
        gp.set_data(z[:50], y[:50])
        fit_hyperparameters(gp, bounds=bounds, priors=PRIORS, method="newton")
        gp.set_data(z, y)
        return fit_hyperparameters(gp, bounds=bounds, priors=PRIORS, method="newton")

    outcomes = []
    real = fit_module._converged_with

    def spy(*args):
        outcomes.append(real(*args))
        return outcomes[-1]

    monkeypatch.setattr(fit_module, "_converged_with", spy)
    fast = warm_fit()
    monkeypatch.setattr(fit_module, "_LAST_STEP", 0.0)  # every trial with its Hessian
    full = warm_fit()
    assert fast.message == full.message == "Newton decrement below tolerance"
    assert fast.negative_log_likelihood == pytest.approx(full.negative_log_likelihood, rel=1e-12)
    for name in ("outputscale", "noise", "lengthscale_time", "lengthscale_space"):
        assert getattr(fast.hyperparameters, name) == pytest.approx(
            getattr(full.hyperparameters, name), rel=1e-6
        )
    assert fast.hessian_evaluations < full.hessian_evaluations
    # every evaluation without the Hessian is a last step's trial: the fit's evaluations
    # are the full fit's, plus one for each last step whose test with the previous
    # Hessian failed (its point then evaluated again with the Hessian)
    without = fast.evaluations - fast.hessian_evaluations
    assert without >= 1 and any(outcomes)
    assert fast.evaluations - full.evaluations == without - (
        full.hessian_evaluations - fast.hessian_evaluations
    )
    # a failed test with the previous Hessian computes the new point's own (one more
    # evaluation than the full fit for each)
    assert fast.evaluations - full.evaluations == outcomes.count(False)


def _log_prior_terms(gp, priors):
    """What the MAP objective adds to ``-log p(y)`` at the GP's values."""
    objective = NegativeLogMarginalLikelihood(gp, priors=priors)
    plain = NegativeLogMarginalLikelihood(gp)
    theta = objective.pack(gp.hyperparameters)
    return objective(theta)[0] - plain(theta)[0]


def test_newton_holds_parameters_on_their_bounds_and_respects_fixed_values():
    z, y = make_data(40)
    gp = SpatioTemporalGP(KernelSpec(dim=2), Hyperparameters(1.0, (0.2,), 1.0, 0.1))
    gp.set_data(z, y)
    bounds = HyperparameterBounds(lengthscale_space=(0.3, 0.5), fixed=frozenset({"noise"}))
    result = fit_hyperparameters(gp, bounds=bounds, method="newton")
    assert 0.3 <= result.hyperparameters.lengthscale_space[0] <= 0.5
    assert result.hyperparameters.noise == 0.1
    lbfgsb = SpatioTemporalGP(gp.kernel, Hyperparameters(1.0, (0.2,), 1.0, 0.1))
    lbfgsb.set_data(z, y)
    expected = fit_hyperparameters(lbfgsb, bounds=bounds, max_iterations=200)
    assert result.negative_log_likelihood <= expected.negative_log_likelihood + 1e-7


def test_restarts_run_only_when_the_rule_gives_a_reason():
    z, y = make_data(30)
    fresh = Hyperparameters(1.0, (0.2,), 30.0, 0.01)
    seen = []

    def never(outcome):
        seen.append(outcome)
        return None

    gp = SpatioTemporalGP(KernelSpec(dim=2), fresh)
    gp.set_data(z, y)
    quiet = fit_hyperparameters(gp, method="newton", restarts=[fresh], restart_if=never)
    assert quiet.starts == 1 and quiet.restart_reason is None and len(quiet.optima) == 1
    (outcome,) = seen
    assert isinstance(outcome, StartOutcome) and outcome.size == 30 and outcome.converged
    assert outcome.hyperparameters == quiet.hyperparameters
    loud = fit_hyperparameters(
        gp,
        method="newton",
        initial=[fresh],
        restarts=[fresh],
        restart_if=lambda outcome: "because",
        restart_method="l-bfgs-b",
    )
    assert loud.starts == 3 and loud.restart_reason == "because"
    assert fit_hyperparameters(gp, restarts=[fresh]).restart_reason == "always"
    with pytest.raises(ValueError, match="restart_method"):
        fit_hyperparameters(gp, restart_method="bfgs")
    with pytest.raises(ValueError, match="method"):
        fit_hyperparameters(gp, method="adam")


def outcome(**changes):
    values = {
        "start": Hyperparameters(1.0, (0.2,), 5.0, 0.01),
        "hyperparameters": Hyperparameters(1.0, (0.25,), 5.0, 0.01),
        "negative_log_likelihood": 20.0,
        "gain": 0.5,
        "size": 20,
        "iterations": 3,
        "converged": True,
        "message": "Newton decrement below tolerance",
        "reached_bounds": (),
        "largest_log_change": 0.2,
    }
    values.update(changes)
    return StartOutcome(**values)


def test_the_restart_rule_fires_in_the_documented_cases():
    rule = RestartRule(
        every_fit_size=10,
        shortest_period=3,
        period_fraction=0.1,
        longest_period=20,
        size_change=0.25,
        log_change=1.0,
        gain=3.0,
    )
    # the period: a tenth of the dataset, from 3 to 20 fits
    assert [rule.period(n) for n in (5, 30, 31, 95, 200, 1000)] == [3, 3, 4, 10, 20, 20]
    history = FitHistory(fits_since_fresh=3, size=49)
    # before the fit: no history, a small dataset, the period, a large change of the size
    assert rule.before_fit(None, 50) == "no fit history"
    assert rule.before_fit(FitHistory(0, 10), 10) == "at most 10 observations"
    assert rule.before_fit(FitHistory(0, 10), 11) is None
    assert rule.before_fit(history, 50) is None
    assert "5 fits" in rule.before_fit(FitHistory(4, 49), 50)
    assert "3 fits" in rule.before_fit(FitHistory(2, 19), 20)
    assert "dataset size" in rule.before_fit(FitHistory(0, 49), 30)
    # after the warm start: kept as it is ...
    assert rule.after_warm_start(history, outcome()) is None
    # ... unless it did not converge, reached a bound, moved far or gained much
    assert "did not converge" in rule.after_warm_start(
        history, outcome(converged=False, message="iteration cap reached")
    )
    assert "bound (noise)" in rule.after_warm_start(history, outcome(reached_bounds=("noise",)))
    assert "moved by 1.5" in rule.after_warm_start(history, outcome(largest_log_change=1.5))
    assert "gained 3.5 nats" in rule.after_warm_start(history, outcome(gain=3.5))
    assert rule.after_warm_start(history, outcome(gain=2.9)) is None


def test_the_history_keeps_a_runner_up_from_another_basin_only():
    best = Hyperparameters(1.0, (0.05,), 5.0, 0.01)
    same_basin = Hyperparameters(1.0, (0.0500001,), 5.0, 0.01)
    other_basin = Hyperparameters(2.0, (0.9,), 5.0, 0.3)
    far_worse = Hyperparameters(0.5, (0.01,), 5.0, 0.001)

    def result(optima, reason=None):
        from dynbo.models.fit import FitResult

        return FitResult(best, 10.0, 3, 4, 0.0, "", len(optima), reason, tuple(optima))

    kept = FitHistory.after(
        result([(10.0, best), (10.0, same_basin), (11.0, other_basin)], "why"), 20, None
    )
    assert kept.runner_up == other_basin and kept.fits_since_fresh == 0 and kept.size == 20
    dropped = FitHistory.after(result([(10.0, best), (20.0, far_worse)]), 21, kept)
    assert dropped.runner_up is None and dropped.fits_since_fresh == 1
    assert math.log(0.0500001 / 0.05) < DISTINCT_LOG_CHANGE
    # through the policy's state (plain values) and back
    assert FitHistory.from_state(kept.state()) == kept
    assert FitHistory.from_state(None) is None
    with pytest.raises(ValueError, match="fits_since_fresh"):
        FitHistory.from_state({**kept.state(), "fits_since_fresh": -1})
    with pytest.raises(ValueError, match="size"):
        FitHistory.from_state({**kept.state(), "size": 2.5})
    with pytest.raises(ValueError, match="runner_up"):
        FitHistory.from_state({**kept.state(), "runner_up": {"outputscale": 1.0}})


def drive(policy, iterations, seed=0):
    """Ask/tell on a drifting 2-D function; the fit results of each suggest."""
    rng = np.random.default_rng(seed)
    results = []
    original = policy._fit

    def recording(t):
        results.append(original(t))
        return results[-1]

    policy._fit = recording
    for i in range(iterations):
        t = float(i)
        x = policy.suggest(t).x if i >= 6 else rng.uniform(0.0, 1.0, 2)
        y = float(np.sin(5 * x[0] + t / 8) + x[1] ** 2 + 0.05 * rng.normal())
        policy.observe(x, t, y)
    del policy._fit
    return results


def test_a_policy_fits_with_the_rule_and_the_option_survives_the_state(monkeypatch):
    options = {"bounds": [[0.0, 0.0], [1.0, 1.0]], "raw_samples": 32, "restarts": 2}
    # small datasets: the fresh start at every fit
    reasons = [r.restart_reason for r in drive(make("st-gp-ucb", **options), 12)]
    assert reasons[0] == "no fit history"
    assert set(reasons[1:]) == {f"at most {RESTART_RULE.every_fit_size} observations"}
    # larger ones (here: the rule made to treat these as larger)
    rule = dataclasses.replace(RESTART_RULE, every_fit_size=0)
    monkeypatch.setattr(fit_strategy, "RESTART_RULE", rule)
    policy = make("st-gp-ucb", **options)
    assert policy.fit_strategy == "warm-newton"
    results = drive(policy, 20)
    reasons = [r.restart_reason for r in results]
    assert reasons[0] == "no fit history"
    assert any(r is None for r in reasons)  # most fits: the warm start (and runner-up) only
    assert max(r.evaluations for r in results if r.restart_reason is None) <= 12
    # the history and the option survive a save and a load
    restored = Policy.from_state_dict(policy.state_dict())
    assert restored._fit_history == policy._fit_history is not None
    assert restored.fit_strategy == "warm-newton"
    old = make("st-gp-ucb", fit_strategy="two-start", **options)
    assert old.config["fit_strategy"] == "two-start"
    assert all(r.starts == 2 and r.restart_reason is None for r in drive(old, 10))
    again = Policy.from_state_dict(old.state_dict())
    assert again.fit_strategy == "two-start" and again._fit_history is None
    # a state saved before the rule (no fit_history) loads: the next fit restarts
    state = policy.state_dict()
    del state["fit_history"]
    assert Policy.from_state_dict(state)._fit_history is None
    state["fit_history"] = {"fits_since_fresh": "3"}
    with pytest.raises(ValueError, match="fits_since_fresh"):
        Policy.from_state_dict(state)


@pytest.mark.parametrize("value", ["newton", "", None, 3])
def test_the_fit_strategy_option_is_validated(value):
    with pytest.raises(ValueError, match="fit_strategy"):
        make("gp-ucb", bounds=[[0.0], [1.0]], fit_strategy=value)


def test_the_default_rule_is_the_documented_one():
    # docs/design.md and docs/results/fit_speed.json describe these values
    assert RESTART_RULE == RestartRule(
        method="l-bfgs-b",
        every_fit_size=96,
        shortest_period=3,
        period_fraction=0.1,
        longest_period=20,
        size_change=0.25,
        log_change=1.0,
        gain=3.0,
    )


def test_a_budget_cuts_the_newton_fit_between_evaluations_and_keeps_the_history():
    policy = make("st-gp-ucb", bounds=[[0.0, 0.0], [1.0, 1.0]], raw_samples=32, restarts=2)
    drive(policy, 12)
    history, hyperparameters = policy._fit_history, policy.hyperparameters
    assert history is not None
    policy.observe([0.3, 0.6], 12.0, 0.4)
    policy.suggest(12.5, budget=Budget.replay([(deadline.FIT, 2)]))  # its second evaluation
    (cut,) = policy.diagnostics.extra["time_budget"]["spent_at"]
    assert cut["where"] == deadline.FIT and cut["ordinal"] == 2
    assert policy.hyperparameters == hyperparameters
    assert policy._fit_history == history


def test_the_evaluation_cost_benchmark_times_each_kind_at_each_size():
    # benchmarks/fit_evaluation_cost.py: where the fit's NumPy evaluations pay
    repository = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [
            sys.executable, "benchmarks/fit_evaluation_cost.py", "--sizes", "6", "10",
            "--rounds", "1", "--repeats", "2",
        ],
        cwd=repository, capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    report = json.loads(result.stdout)
    assert [row["n"] for row in report["rows"]] == [8, 12]  # two more: the prepared iterations
    for row in report["rows"]:
        for kind in ("torch_gradient", "numpy_gradient", "torch_hessian", "numpy_hessian"):
            assert 0 < row[f"{kind}_seconds"] < 1
    assert report["machine"]["threads"] == 1
