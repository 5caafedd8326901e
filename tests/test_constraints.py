"""Black-box constraints (issue 29): the constraint GPs, removals from every output, the
safe set, its fallback, the step limit, observe's checks and the saved state."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from dynbo.policies import Policy, available, make
from tests.test_policy_base import assert_states_equal

FAST = {"raw_samples": 64, "restarts": 2, "acquisition_iterations": 30}
#: the options a policy needs besides the bounds
NEEDS = {"ui-tvbo": {"noise_variance": 0.01}}


def objective(x, t):
    return float(-np.sum((np.asarray(x) - 0.6) ** 2) + 0.1 * math.sin(t))


def constraint(x, t):
    """Safe (>= 0) left of a boundary that drifts right with time."""
    return float(0.5 + 0.02 * t - np.asarray(x)[0])


def _make(name, d=1, **options):
    config = {**FAST, **NEEDS.get(name, {}), **options}
    return make(name, bounds=[[0.0] * d, [1.0] * d], seed=0, **config)


def _told(policy, points, times, names=("c",)):
    for x, t in zip(points, times):
        x = np.atleast_1d(np.asarray(x, dtype=float))
        policy.observe(x, t, objective(x, t), constraints={n: constraint(x, t) for n in names})
    return policy


# ---------------------------------------------------------------------- the constraint GP
def _matern52(r):
    return (1 + math.sqrt(5) * r + 5.0 / 3.0 * r**2) * np.exp(-math.sqrt(5) * r)


def _matern32(r):
    return (1 + math.sqrt(3) * r) * np.exp(-math.sqrt(3) * r)


def test_a_constraint_gp_posterior_equals_the_dense_computation():
    h = {"outputscale": 1.7, "lengthscale_space": 0.3, "lengthscale_time": 2.5, "noise": 0.05}
    p = _make(
        "st-gp-ucb",
        d=2,
        constraints=["a", "b"],
        learn_hyperparameters=False,
        initial_hyperparameters=h,
    )
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 1, size=(7, 2))
    T = np.arange(7) * 0.7
    values = {"a": rng.normal(size=7) * 3 + 1, "b": rng.normal(size=7)}
    for i in range(7):
        p.observe(
            X[i], T[i], objective(X[i], T[i]), constraints={k: v[i] for k, v in values.items()}
        )
    p.suggest(5.0)  # restandardizes (fixed hyperparameters)
    Xs = rng.uniform(0, 1, size=(5, 2))
    ts = 5.0

    def k(x1, t1, x2, t2):
        r = np.linalg.norm(x1[:, None, :] - x2[None, :, :], axis=2) / h["lengthscale_space"]
        rt = np.abs(t1[:, None] - t2[None, :]) / h["lengthscale_time"]
        return h["outputscale"] * _matern52(r) * _matern32(rt)

    K = k(X, T, X, T) + h["noise"] * np.eye(7)
    Ks = k(Xs, np.full(5, ts), X, T)
    inputs = torch.as_tensor(np.hstack([Xs, np.full((5, 1), ts)]))
    mean, sd = p._constraints.predict(inputs)
    for j, name in enumerate(("a", "b")):
        y = values[name]
        m, s = y.mean(), y.std(ddof=1)
        dense_mean = m + s * Ks @ np.linalg.solve(K, (y - m) / s)
        dense_var = s**2 * (h["outputscale"] - np.einsum("ij,ji->i", Ks, np.linalg.solve(K, Ks.T)))
        np.testing.assert_allclose(mean[:, j].numpy(), dense_mean, rtol=0, atol=1e-10)
        np.testing.assert_allclose(sd[:, j].numpy() ** 2, dense_var, rtol=0, atol=1e-10)
    # the GP holds exactly the objective's inputs
    assert torch.equal(p._constraints.gps[0].inputs, p.model.inputs)


def test_each_constraint_gp_fits_its_own_hyperparameters():
    p = _make("st-gp-ucb", constraints=["smooth", "rough"])
    rng = np.random.default_rng(0)
    for i in range(12):
        x = rng.uniform(0, 1, 1)
        t = float(i)
        p.observe(x, t, objective(x, t), constraints={"smooth": x[0], "rough": math.sin(25 * x[0])})
    p.suggest(12.0)
    smooth, rough = (gp.hyperparameters for gp in p._constraints.gps)
    assert smooth.lengthscale_space[0] > rough.lengthscale_space[0]
    assert p._constraints.histories[0] is not None  # warm-newton remembers each fit


# ---------------------------------------------------------------------- removals
def _check_rows(policy):
    """Every output holds the kept rows: the objective's inputs and the values told."""
    models = policy._constraints
    for gp in models.gps:
        assert torch.equal(gp.inputs, policy.model.inputs)
        assert torch.equal(gp.noise_scale, policy.model.noise_scale)
    data = policy.dataset
    expected = np.array([constraint(x, t) for x, t in zip(data.x, data.t)])
    np.testing.assert_allclose(models.values[:, 0].numpy(), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "name, options",
    [
        ("sw-gp-ucb", {"window": 3}),
        ("wdbo", {}),
        ("wdbo", {"one_at_a_time": True}),
        ("ui-tvbo", {"binning": 2, "binning_recent": 2}),
    ],
)
def test_a_removal_removes_the_point_from_every_output(name, options):
    reference_loop = options.pop("one_at_a_time", False)
    p = _make(name, constraints=["c"], **options)
    if reference_loop:
        p.batched_removals = False  # the paper's loop: one removal at a time
    removed = 0
    rng = np.random.default_rng(1)
    for i in range(12):
        q = p.suggest(float(i) * 3.0)
        _told(p, [rng.uniform(0, 1, 1) if i % 2 else q.x], [q.t])
        removed += p.diagnostics.removed
        _check_rows(p)
    if name == "sw-gp-ucb":
        assert p.dataset_size == 3
    elif name == "wdbo":
        assert removed > 0, "W-DBO removed nothing: the test checks nothing"


def test_forget_removes_the_point_from_every_output():
    p = _told(_make("gp-ucb", constraints=["c"]), [[0.1], [0.4], [0.8]], [0.0, 1.0, 2.0])
    p.forget([0.4], 1.0)
    assert p.dataset_size == 2 and p._constraints.n == 2
    _check_rows(p)


def test_a_reset_clears_every_output():
    p = _make("br-gp-ucb", constraints=["c"], restart_every=3)
    for i in range(7):
        q = p.suggest(float(i))
        _told(p, [q.x], [q.t])
        _check_rows(p)
    assert p.dataset_size < 7


# ---------------------------------------------------------------------- safe set
SE_FIXED = {
    "spatial_kernel": "se",
    "temporal_kernel": "se",
    "learn_hyperparameters": False,
    "standardize": False,
    "initial_hyperparameters": {
        "outputscale": 1.0,
        "lengthscale_space": 0.2,
        "lengthscale_time": 1.0,
        "noise": 1e-4,
    },
}


def test_a_point_confirmed_safe_long_ago_leaves_the_safe_set():
    """One observation c = 1 at x0 = 0.5, t = 0 under fixed hyperparameters (SE in time,
    l_T = 1, lambda = 1, noise 1e-4, no standardization). At x0 and time tau the posterior
    is mean = k / (1 + 1e-4) and variance = 1 - k^2 / (1 + 1e-4) with k = exp(-tau^2 / 2):
    the lower bound mean - 2 sd is 0.794 at tau = 0.1 and -0.984 at tau = 1."""
    p = _make(
        "st-gp-ucb",
        constraints=["c"],
        constraint_mode="safe",
        safe_points=[[0.9]],
        beta_c=2.0,
        safe_fallback="confirmed",
        **SE_FIXED,
    )
    p.observe([0.5], 0.0, 0.0, constraints={"c": 1.0})

    def hand(tau):
        k = math.exp(-(tau**2) / 2)
        mean = k / (1 + 1e-4)
        return mean - 2 * math.sqrt(1 - k * k / (1 + 1e-4))

    assert hand(0.1) == pytest.approx(0.794, abs=1e-3) and hand(1.0) == pytest.approx(
        -0.984, abs=1e-3
    )
    for tau in (0.1, 0.5, 1.0):
        mean, sd = p._constraints.predict(torch.tensor([[0.5, tau]]))
        assert float(mean[0, 0] - 2 * sd[0, 0]) == pytest.approx(hand(tau), abs=1e-12)

    q = p.suggest(0.1)
    report = p.diagnostics.extra["constraints"]
    assert report["safe_set_empty"] is False and report["fallback"] is None
    assert report["lower_bounds"]["c"] >= 0
    assert abs(q.x[0] - 0.5) < 0.2  # near the confirmed point
    p.cancel_pending()

    q = p.suggest(1.0)  # no data since t = 0: the bound has widened below 0 everywhere
    report = p.diagnostics.extra["constraints"]
    assert report["safe_set_empty"] is True and report["fallback"] == "confirmed"
    assert q.x[0] == pytest.approx(0.5, abs=1e-12)  # the most recently confirmed point


def test_the_seeds_are_the_default_fallback():
    p = _make("wdbo", constraints=["c"], constraint_mode="safe", safe_points=[[0.25]])
    assert p._safety.fallback == "seed"
    p.observe([0.6], 0.0, 0.0, constraints={"c": 0.3})  # confirmed, but not a seed
    p._safety = dataclasses.replace(p._safety, beta_c=1e4)  # nothing is safe
    q = p.suggest(0.5)
    assert q.x[0] == pytest.approx(0.25)
    assert p.diagnostics.extra["constraints"]["fallback"] == "seed"


@pytest.mark.parametrize("rule", ["confirmed", "seed"])
def test_the_empty_safe_set_falls_back_to_the_latest_confirmed_point_or_the_safest_seed(rule):
    p = _make(
        "wdbo",
        constraints=["c"],
        constraint_mode="safe",
        safe_points=[[0.25], [0.7]],
        safe_fallback=rule,
    )
    q = p.suggest(0.0)  # nothing observed: the prior's bound is below 0 everywhere
    assert q.x[0] == pytest.approx(0.25)  # a tie between the seeds: the first
    report = p.diagnostics.extra["constraints"]
    assert report["safe_set_empty"] is True and report["fallback"] == "seed"
    p.observe([0.25], 0.0, 0.0, constraints={"c": 0.3})  # confirmed safe
    p.observe([0.3], 0.5, 0.0, constraints={"c": 0.4})  # confirmed safe, the latest
    p.observe([0.6], 1.0, 0.0, constraints={"c": -0.4})  # unsafe: not confirmed
    assert p._safety.confirmed[0] == pytest.approx(0.3)
    for beta_c in (100.0, 1e4):  # bounds so wide that nothing is safe
        p._safety = dataclasses.replace(p._safety, beta_c=beta_c)
        state = p.state_dict()
        q = p.suggest(2.0)
        report = p.diagnostics.extra["constraints"]
        assert report["safe_set_empty"] is True
        if rule == "confirmed":  # the last known good setting, whatever the model says
            assert q.x[0] == pytest.approx(0.3) and report["fallback"] == "confirmed"
        else:  # by hand: the seed with the highest lower bound under the model used
            mean, sd = p._constraints.predict(torch.tensor([[0.25, 2.0], [0.7, 2.0]]))
            bounds = (mean[:, 0] - beta_c * sd[:, 0]).tolist()
            best = 0.25 if bounds[0] >= bounds[1] else 0.7
            assert q.x[0] == pytest.approx(best) and report["fallback"] == "seed"
        p.load_state_dict(state)
    with pytest.raises(ValueError, match="safe_fallback must be one of"):
        _make(
            "wdbo",
            constraints=["c"],
            constraint_mode="safe",
            safe_points=[[0.25]],
            safe_fallback="nearest",
        )


def test_a_point_measured_unsafe_after_its_confirmation_is_confirmed_no_longer():
    """The fallback goes to the latest confirmed point that has not been measured unsafe
    since: once the drift has made it unsafe, to the one confirmed before it, and to the
    seeds when none is left (without this, the query went back again and again to the
    point it had just measured unsafe)."""
    p = _make(
        "wdbo",
        constraints=["c"],
        constraint_mode="safe",
        safe_points=[[0.25]],
        safe_fallback="confirmed",
    )
    p.observe([0.1], 0.0, 0.0, constraints={"c": 0.3})
    p.observe([0.3], 0.5, 0.0, constraints={"c": 0.4})
    p.observe([0.45], 1.0, 0.0, constraints={"c": 0.1})
    p.observe([0.3], 1.5, 0.0, constraints={"c": 0.2})  # re-confirmed: now the latest
    state = p.state_dict()

    def fallback_at(t):
        p._safety = dataclasses.replace(p._safety, beta_c=1e4)  # nothing is safe
        q = p.suggest(t)
        report = p.diagnostics.extra["constraints"]
        p.cancel_pending()
        p._safety = dataclasses.replace(p._safety, beta_c=3.0)
        assert report["safe_set_empty"] is True
        return q.x[0], report["fallback"]

    assert fallback_at(2.0) == (pytest.approx(0.3), "confirmed")
    p.observe([0.3], 2.0, 0.0, constraints={"c": -0.05})  # the drift reached it
    assert fallback_at(2.5) == (pytest.approx(0.45), "confirmed")
    p.observe([0.45], 2.5, 0.0, constraints={"c": -0.2})
    assert fallback_at(3.0) == (pytest.approx(0.1), "confirmed")
    p.observe([0.1], 3.0, 0.0, constraints={"c": -0.1})
    assert fallback_at(3.5) == (pytest.approx(0.25), "seed")  # none left: the seeds
    p.load_state_dict(state)  # the saved state keeps the earlier confirmations
    assert [float(x[0]) for x in p._safety.confirmed_earlier] == pytest.approx([0.1, 0.45])
    assert float(p._safety.confirmed[0]) == pytest.approx(0.3)


def test_one_safe_observation_does_not_make_the_whole_box_safe():
    """A safe set's constraint GP has prior mean 0 (the threshold): one observation at
    the seed, c = 0.3, must not make points far from it safe (with the data's mean as the
    prior mean and a one-point fit's small scale, the whole box looked safe)."""
    p = _make("gp-ucb", constraints=["c"], constraint_mode="safe", safe_points=[[0.3]])
    p.observe([0.3], 0.0, 0.0, constraints={"c": 0.3})  # c = 0.6 - x
    q = p.suggest(1.0)
    assert 0.6 - q.x[0] >= 0, q.x
    mean, var = p.predict([[1.0]], 1.0, output="c")
    assert mean[0] - 3 * np.sqrt(var[0]) < 0


def test_consistently_safe_data_neither_make_far_points_safe_nor_stay_safe_for_ever():
    p = _make("st-gp-ucb", constraints=["c"], constraint_mode="safe", safe_points=[[0.1]])
    for i, x in enumerate([0.1, 0.12, 0.08, 0.1, 0.11, 0.09]):
        p.observe([x], float(i), 0.0, constraints={"c": 0.35 - x})
    p.suggest(6.0)
    mean, var = p.predict([[1.0]], 6.0, output="c")
    assert mean[0] - 3 * np.sqrt(var[0]) < 0  # far from the data
    mean, var = p.predict([[0.1]], 1e4, output="c")
    assert mean[0] - 3 * np.sqrt(var[0]) < 0  # long after the data


def test_safe_mode_queries_satisfy_the_lower_bound_at_the_chosen_point():
    p = _make("st-gp-ucb", d=2, constraints=["c"], constraint_mode="safe", safe_points=[[0.1, 0.5]])
    rng = np.random.default_rng(0)
    for i in range(8):
        q = p.suggest(float(i))
        report = p.diagnostics.extra["constraints"]
        if not report["safe_set_empty"]:
            assert min(report["lower_bounds"].values()) >= 0
            mean, sd = p._constraints.predict(torch.tensor([[*q.x, q.t]]))
            assert float(mean[0, 0] - 3.0 * sd[0, 0]) >= -1e-9
        x = q.x if i % 3 else rng.uniform(0, 0.4, 2)
        p.observe(x, q.t, objective(x, q.t), constraints={"c": constraint(x, q.t)})


# ---------------------------------------------------------------------- step limit
@pytest.mark.parametrize(
    "name, options",
    [
        ("gp-ucb", {}),
        ("wdbo", {"constraints": ["c"]}),
        (
            "st-gp-ucb",
            {"constraints": ["c"], "constraint_mode": "safe", "safe_points": [[0.5, 0.5]]},
        ),
        ("abo", {}),
        ("w-gp-ucb", {"constraints": ["c"]}),
    ],
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_step_limit_is_never_exceeded(name, options, seed):
    step = np.array([0.05, 0.2])
    p = make(name, bounds=[[0.0, 0.0], [1.0, 2.0]], seed=seed, max_step=step, **FAST, **options)
    rng = np.random.default_rng(seed)
    last = None
    for i in range(6):
        q = p.suggest(float(i))
        report = p.diagnostics.extra["constraints"]
        if last is not None:
            assert np.all(np.abs(q.x - last) <= step), (q.x, last)
            assert report["step_limit_active"]
        elif "safe_points" in options:
            assert np.all(np.abs(q.x - [0.5, 0.5]) <= step)
        # sometimes the device applies another setting: the limit follows the applied one
        x = q.x if i % 2 else np.clip(q.x + rng.uniform(-0.04, 0.04, 2), 0, [1, 2])
        extra = {"constraints": {"c": constraint(x, q.t)}} if "constraints" in options else {}
        p.observe(x, max(q.t, float(i)), objective(x, q.t), **extra)
        last = x


def test_the_step_limit_on_a_finite_candidate_set():
    grid = np.linspace(0, 1, 21).reshape(-1, 1)
    p = _make("gp-ucb", candidates=grid, max_step=0.1)
    last = np.array([0.5])
    p.observe(last, 0.0, 0.0)
    for i in range(5):
        q = p.suggest(float(i + 1))
        assert abs(q.x[0] - last[0]) <= 0.1 + 1e-12
        p.observe(q.x, q.t, objective(q.x, q.t))
        last = q.x


# ---------------------------------------------------------------------- observe's checks
@pytest.mark.parametrize(
    "constraints, message",
    [
        (None, "declares"),
        ({"a": 1.0}, "missing 'b'"),
        ({"a": 1.0, "b": 2.0, "z": 0.0}, "unknown 'z'"),
        ({"a": float("nan"), "b": 0.0}, "finite"),
        ({"a": "x", "b": 0.0}, "real number"),
        ([1.0, 2.0], "declares"),
    ],
)
def test_observe_refuses_bad_constraint_values_and_leaves_the_policy_unchanged(
    constraints, message
):
    p = _make("wdbo", constraints=["a", "b"])
    p.observe([0.2], 0.0, 1.0, constraints={"a": 1.0, "b": -1.0})
    before = p.state_dict()
    with pytest.raises(ValueError, match=message):
        p.observe([0.3], 1.0, 1.0, constraints=constraints)
    assert_states_equal(p.state_dict(), before)


def test_constraints_given_to_a_policy_without_any_are_refused():
    p = _make("gp-ucb")
    before = p.state_dict()
    with pytest.raises(ValueError, match="declares none"):
        p.observe([0.3], 1.0, 1.0, constraints={"c": 1.0})
    assert_states_equal(p.state_dict(), before)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"constraints": "c"}, "list of constraint names"),
        ({"constraints": ["c", "c"]}, "repeated"),
        ({"constraints": [""]}, "non-empty"),
        ({"constraints": ["c"], "constraint_mode": "strict"}, "constraint_mode"),
        ({"constraint_mode": "safe", "safe_points": [[0.5]]}, "needs constraints"),
        ({"constraints": ["c"], "constraint_mode": "safe"}, "safe seed point"),
        ({"constraints": ["c"], "safe_points": [[1.5]]}, "outside the domain"),
        ({"constraints": ["c"], "beta_c": -1.0}, "beta_c"),
        ({"max_step": 0.0}, "max_step"),
        ({"max_step": [0.1, 0.2]}, "max_step"),
    ],
)
def test_bad_constraint_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        _make("gp-ucb", **options)


# ---------------------------------------------------------------------- feasibility
def test_feasibility_mode_prefers_the_feasible_region():
    """The objective rises to x = 1; only x <= 0.4 is feasible."""

    def run(**options):
        p = _make("gp-ucb", **options)
        xs = []
        for i in range(14):
            q = p.suggest(float(i))
            xs.append(q.x[0])
            extra = {"constraints": {"c": 0.4 - q.x[0]}} if options else {}
            p.observe(q.x, q.t, q.x[0], **extra)
        return np.array(xs[-6:])

    constrained, free = run(constraints=["c"]), run()
    assert np.median(constrained) < 0.5 < np.median(free)
    assert np.mean(constrained <= 0.45) >= 0.5


# ---------------------------------------------------------------------- every policy
@pytest.mark.parametrize("name", available())
def test_every_policy_accepts_constraints(name):
    p = _make(name, constraints=["c", "d"], max_step=0.5)
    for i in range(4):
        q = p.suggest(float(i))
        value = {"c": constraint(q.x, q.t), "d": 1.0 - q.x[0]}
        p.observe(q.x, q.t, objective(q.x, q.t), constraints=value)
        if len(q.additional):
            m = len(q.additional)
            p.observe_additional(
                q.additional,
                q.t,
                [objective(x, q.t) for x in q.additional],
                constraints={"c": [constraint(x, q.t) for x in q.additional], "d": [0.5] * m},
            )
        assert p._constraints.n == p.dataset_size
        assert "constraints" in p.diagnostics.extra


# ---------------------------------------------------------------------- state
@pytest.mark.parametrize("mode", ["feasibility", "safe"])
def test_a_loaded_policy_keeps_the_constraint_data_and_suggests_the_same_point(tmp_path, mode):
    p = _make("wdbo", constraints=["c"], constraint_mode=mode, safe_points=[[0.2]], max_step=0.3)
    for i in range(5):
        q = p.suggest(float(i))
        p.observe(q.x, q.t, objective(q.x, q.t), constraints={"c": constraint(q.x, q.t)})
    p.save(tmp_path / "p.pt")
    loaded = Policy.load(tmp_path / "p.pt")
    assert torch.equal(loaded._constraints.values, p._constraints.values)
    assert loaded._constraints.hyperparameters() == p._constraints.hyperparameters()
    assert np.array_equal(loaded._safety.applied, p._safety.applied)
    assert np.array_equal(loaded.suggest(5.0).x, p.suggest(5.0).x)


def test_a_step_limit_alone_keeps_the_closed_form_gradient():
    from dynbo.acquisition.constraints import SafeAcquisition
    from dynbo.acquisition.optimize import values_and_gradients

    p = _told(_make("st-gp-ucb", d=2, max_step=0.2), rng_points(6), np.arange(6.0), names=())
    acq = p._acquisition_function(6.0)
    lo, hi = torch.tensor([0.1, 0.3]), torch.tensor([0.5, 0.6])
    wrapped = SafeAcquisition(acq, p._constraints, p._safety, lo, hi, 0.0)
    points = torch.rand(5, 2, generator=torch.Generator().manual_seed(0))
    closed = wrapped.value_and_gradient(points)
    assert closed is not None
    x = points.clone().requires_grad_(True)
    (auto,) = torch.autograd.grad(wrapped(x).sum(), x)
    torch.testing.assert_close(closed[1], auto, rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(closed[0], values_and_gradients(wrapped, points)[0])


def rng_points(n, d=2, seed=0):
    return np.random.default_rng(seed).uniform(0, 1, size=(n, d))


def test_a_fit_made_ahead_gives_the_same_suggestion_with_constraints():
    def policy():
        p = _make("wdbo", constraints=["c"], constraint_mode="safe", safe_points=[[0.3]])
        return _told(p, rng_points(6, d=1), np.arange(6.0))

    ahead, plain = policy(), policy()
    before = ahead.state_dict()
    assert ahead.refit()
    assert_states_equal(ahead.state_dict(), before)  # refit changes nothing visible
    assert np.array_equal(ahead.suggest(6.0).x, plain.suggest(6.0).x)
    assert ahead._constraints.hyperparameters() == plain._constraints.hyperparameters()


def test_a_float32_policy_takes_constraints():
    p = _make("st-gp-ucb", d=2, dtype="float32", constraints=["c"], max_step=0.3)
    _told(p, rng_points(4), np.arange(4.0))
    q = p.suggest(4.0)
    assert np.all(np.abs(q.x - p.dataset.x[-1]) <= 0.3)
    assert p._constraints.gps[0].dtype == torch.float32


def test_predict_reads_a_constraint_gp_by_name():
    p = _told(
        _make("st-gp-ucb", d=2, constraints=["a", "c"]), rng_points(5), np.arange(5.0), ("a", "c")
    )
    x = rng_points(3, seed=1)
    mean, var = p.predict(x, 5.0, output="c")
    expected_mean, expected_sd = p._constraints.predict(
        torch.as_tensor(np.hstack([x, np.full((3, 1), 5.0)]))
    )
    np.testing.assert_allclose(mean, expected_mean[:, 1].numpy(), rtol=1e-12)
    np.testing.assert_allclose(var, expected_sd[:, 1].numpy() ** 2, rtol=1e-10)
    with pytest.raises(ValueError, match="declared constraints"):
        p.predict(x, 5.0, output="b")


@pytest.mark.parametrize("mode", ["feasibility", "safe"])
@pytest.mark.parametrize("box", [False, True])
def test_the_constrained_acquisition_gradient_in_closed_form_equals_autograd(mode, box):
    from dynbo.acquisition.constraints import SafeAcquisition

    p = _make(
        "st-gp-ucb", d=2, constraints=["a", "c"], constraint_mode=mode, safe_points=[[0.1, 0.1]]
    )
    _told(p, rng_points(8), np.arange(8.0), ("a", "c"))
    p.suggest(8.0)  # fits every GP
    acq = p._acquisition_function(8.0)
    lo, hi = (torch.tensor([0.0, 0.2]), torch.tensor([0.7, 0.9])) if box else (None, None)
    wrapped = SafeAcquisition(acq, p._constraints, p._safety, lo, hi, -0.7)
    points = torch.rand(64, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    closed = wrapped.value_and_gradient(points)
    assert closed is not None
    # each constraint GP was told the search's time (its temporal factor computed once)
    timed = [gp for gp in p._constraints.gps if gp.kernel.uses_time]
    assert timed and all(gp._temporal_row_cache[0] == float(acq.time) for gp in timed)
    x = points.clone().requires_grad_(True)
    values = wrapped(x)
    (auto,) = torch.autograd.grad(values.sum(), x)
    torch.testing.assert_close(closed[0], values.detach(), rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(closed[1], auto, rtol=1e-7, atol=1e-9)
    if mode == "safe":  # both kinds of point are there
        margins = wrapped.lower_margin(*wrapped.margins(wrapped.to_unit(points)))
        assert bool((margins >= 0).any()) and bool((margins < 0).any())


@pytest.mark.parametrize("name", ["wdbo", "st-gp-ucb"])
def test_a_spent_budget_leaves_every_output_consistent(name):
    p = _make(name, constraints=["c"], constraint_mode="safe", safe_points=[[0.2]])
    _told(p, rng_points(8, d=1), np.arange(8.0))
    p.suggest(8.0, budget=1e-9)  # every loop cut at its first check
    assert "time_budget" in p.diagnostics.extra
    _check_rows(p)
    assert p.diagnostics.extra["constraints"]["mode"] == "safe"


@pytest.mark.parametrize("name", ["sparq-gp-ucb", "w-sparq-gp-ucb"])
def test_sparq_re_queries_keep_to_the_step_limit_and_the_safe_set(name):
    p = _make(name, constraints=["c"], constraint_mode="safe", safe_points=[[0.1]], max_step=0.05)
    # past inputs far away, two of them measured unsafe (c = 0.3 - x)
    for i, x in enumerate([0.1, 0.9, 0.12, 0.8, 0.11]):
        p.observe([x], float(i), 0.0, constraints={"c": 0.3 - x})
    requeried = 0
    for k in range(8):
        q = p.suggest(5.0 + k)
        extra = p.diagnostics.extra
        for x in q.additional:
            requeried += 1
            assert np.all(np.abs(x - q.x) <= 0.05 + 1e-12), (x, q.x)
            if not np.allclose(x, q.x):  # the main query itself is its own business
                mean, var = p.predict(x.reshape(1, -1), q.t, output="c")
                assert mean[0] - 3.0 * np.sqrt(var[0]) >= 0, x
        if extra.get("requery"):
            assert extra["requeries_excluded"] >= 2  # at least 0.9 and 0.8
        p.observe(q.x, q.t, 0.0, constraints={"c": 0.3 - q.x[0]})
        if len(q.additional):
            p.observe_additional(
                q.additional,
                np.full(len(q.additional), q.t),
                np.zeros(len(q.additional)),
                constraints={"c": 0.3 - q.additional[:, 0]},
            )
    assert requeried >= 1  # the check above ran


def test_safe_points_must_be_candidates_on_a_finite_set():
    grid = np.array([[0.0], [0.5], [1.0]])
    with pytest.raises(
        ValueError, match=r"safe_points\[0\] = \[0.3\] is not one of the candidates"
    ):
        _make(
            "gp-ucb",
            candidates=grid,
            constraints=["c"],
            constraint_mode="safe",
            safe_points=[[0.3]],
        )
    p = _make(
        "gp-ucb", candidates=grid, constraints=["c"], constraint_mode="safe", safe_points=[[0.5]]
    )
    q = p.suggest(0.0)  # nothing known: the seed itself
    assert q.x[0] == 0.5 and p.diagnostics.extra["constraints"]["fallback"] == "seed"
