"""The cart-pole policy-search benchmark (UI-TVBO / ET-GP-UCB, spec Sec. 3.7)."""

import math

import numpy as np
import pytest
import scipy.optimize
import scipy.signal

from dynbo.benchmarks import cartpole
from dynbo.benchmarks.cartpole import (
    BANDED_BATCH,
    COST_CAP,
    FRICTION_NOMINAL,
    INITIAL_STATE,
    CartPole,
    closed_loop_costs,
    closed_loop_costs_and_gradients,
    continuous_model,
    discretize,
    friction,
    lqr_gain,
)
from dynbo.benchmarks.search import sobol_unit_sample

FRICTIONS = [FRICTION_NOMINAL, 2.5 * FRICTION_NOMINAL, 4.5 * FRICTION_NOMINAL]
Q = 10.0 * np.eye(4)
R = np.eye(1)


@pytest.fixture(scope="module")
def bench():
    return CartPole()


def box_points(bench, count, seed=0):
    lower, upper = bench.bounds
    return lower + sobol_unit_sample(4, count, seed) * (upper - lower)


# ---------------------------------------------------------------------- model
@pytest.mark.parametrize("mu", FRICTIONS)
def test_zoh_matches_series_and_cont2discrete(mu):
    a, b = continuous_model(mu)
    a_d, b_d = discretize(mu)
    # Independent of expm: the power series A_d = sum (A T)^k / k!,
    # B_d = sum A^k T^(k+1) / (k+1)! B (||A T|| ~ 2, so 40 terms reach round-off).
    step = cartpole.SAMPLE_TIME
    series_a, series_b = np.zeros((4, 4)), np.zeros((4, 1))
    power = np.eye(4)
    for k in range(40):
        series_a += power * step**k / math.factorial(k)
        series_b += power @ b * step ** (k + 1) / math.factorial(k + 1)
        power = power @ a
    np.testing.assert_allclose(a_d, series_a, rtol=0, atol=1e-10)
    np.testing.assert_allclose(b_d, series_b, rtol=0, atol=1e-10)
    ref_a, ref_b, *_ = scipy.signal.cont2discrete((a, b, np.eye(4), np.zeros((4, 1))), step, "zoh")
    np.testing.assert_allclose(a_d, ref_a, rtol=0, atol=1e-10)
    np.testing.assert_allclose(b_d, ref_b, rtol=0, atol=1e-10)


def test_continuous_model_constants():
    a, b = continuous_model(FRICTION_NOMINAL)
    inertia = 0.0804 * (0.147 / 2) ** 2 + 0.0804 * 0.147**2 / 12 + 0.25 * 0.0804 * 0.0025**2
    half = 0.5 * 0.0804 * 0.147 / inertia
    assert a[3, 2] == pytest.approx(half * 9.81)
    assert a[3, 3] == pytest.approx(-2.2e-3 / inertia)
    assert a[3, 1] == pytest.approx(half)
    assert b[3, 0] == pytest.approx(-half)
    assert a[1, 1] == -1.0 and b[1, 0] == 1.0


# ---------------------------------------------------------------------- LQR gain
@pytest.mark.parametrize("mu", FRICTIONS)
def test_dare_gain_solves_riccati_and_matches_backward_recursion(mu):
    a_d, b_d = discretize(mu)
    theta, p = lqr_gain(a_d, b_d)
    gain = np.linalg.solve(R + b_d.T @ p @ b_d, b_d.T @ p @ a_d)
    residual = a_d.T @ p @ a_d - a_d.T @ p @ b_d @ gain + Q - p
    assert np.max(np.abs(residual)) < 1e-8 * np.max(np.abs(p))
    # Long finite-horizon backward recursion from P_N = Q.
    finite = Q.copy()
    for _ in range(20_000):
        k = np.linalg.solve(R + b_d.T @ finite @ b_d, b_d.T @ finite @ a_d)
        updated = Q + a_d.T @ finite @ (a_d - b_d @ k)
        updated = 0.5 * (updated + updated.T)
        if np.max(np.abs(updated - finite)) < 1e-12 * np.max(np.abs(finite)):
            break
        finite = updated
    np.testing.assert_allclose(theta, k[0], rtol=1e-8)
    assert np.max(np.abs(np.linalg.eigvals(a_d - b_d @ theta[None, :]))) < 1


def test_noiseless_cost_at_dare_gain_is_the_riccati_value_and_stationary(bench):
    # Without process noise, J(theta) N is the cost-to-go from s_0; the LQR gain minimizes
    # it over all policies, so N J(theta_DARE) = s_0' P s_0 (the 1000-sample truncation is
    # ~1e-17) and the gradient vanishes there.
    zero = np.zeros((bench.steps - 1, 4))
    for mu in FRICTIONS:
        a_d, b_d = discretize(mu)
        theta, p = lqr_gain(a_d, b_d)
        cost, gradient = closed_loop_costs_and_gradients(theta, a_d, b_d, zero)
        value = INITIAL_STATE @ p @ INITIAL_STATE
        assert cost[0] * bench.steps == pytest.approx(value, rel=1e-10)
        width = bench.bounds[1] - bench.bounds[0]
        assert np.max(np.abs(gradient * width)) < 1e-9


def brute_force_minimum(costs, lower, upper, samples=1024):
    """Sobol sample of the box, then Nelder-Mead (no gradients) from the best point."""
    width = upper - lower
    unit = sobol_unit_sample(4, samples, 7)
    best = unit[int(np.argmin(costs(lower + unit * width)))]
    result = scipy.optimize.minimize(
        lambda u: float(costs(lower + np.clip(u, 0, 1)[None, :] * width)[0]),
        best,
        method="Nelder-Mead",
        options={"xatol": 1e-8, "fatol": 1e-13, "maxfev": 20_000},
    )
    return lower + np.clip(result.x, 0, 1) * width, float(result.fun)


@pytest.mark.parametrize("t", [99, 100])
def test_dare_gain_equals_brute_force_minimum_within_the_noise(bench, t):
    lower, upper = bench.bounds
    width = upper - lower
    a_d, b_d = bench.system(t)
    theta = bench.lqr_gain(t)
    # Noiseless: the brute-force minimizer is the LQR gain (up to the search tolerance).
    zero = np.zeros((bench.steps - 1, 4))
    found, cost = brute_force_minimum(lambda x: closed_loop_costs(x, a_d, b_d, zero), lower, upper)
    lqr_cost = closed_loop_costs(theta, a_d, b_d, zero)[0]
    assert cost == pytest.approx(lqr_cost, rel=1e-10)
    assert np.max(np.abs(found - theta) / width) < 1e-3
    # With the step's noise realization: the minimizer moves by a few 1e-3 box widths and
    # the minimum is below J(theta_DARE) by < 1e-3, far below the observation noise
    # (sigma_n = 0.14) and the step-to-step spread of J (0.03).
    found, cost = brute_force_minimum(lambda x: bench.episode_cost(x, t), lower, upper)
    lqr_cost = float(bench.episode_cost(theta, t))
    assert 0 <= lqr_cost - cost < 1e-3
    assert np.max(np.abs(found - theta) / width) < 0.05
    # The benchmark's optimum is that brute-force minimum.
    optimum_x, optimum_value = bench.optimum(t)
    assert -optimum_value <= cost + 1e-10
    assert np.max(np.abs(optimum_x - found) / width) < 1e-3


# ---------------------------------------------------------------------- drift
def test_optimal_gain_changes_at_the_sudden_friction_change(bench):
    width = bench.bounds[1] - bench.bounds[0]
    assert bench.friction(99) == FRICTION_NOMINAL
    assert bench.friction(100) == pytest.approx(2.5 * FRICTION_NOMINAL)
    np.testing.assert_array_equal(bench.lqr_gain(50), bench.lqr_gain(99))
    jump = np.abs(bench.lqr_gain(100) - bench.lqr_gain(99)) / width
    assert jump.max() > 0.1  # theta_3: -27.9 -> -31.4
    change = np.abs(bench.optimum(100)[0] - bench.optimum(99)[0]) / width
    drift = np.abs(bench.optimum(99)[0] - bench.optimum(50)[0]) / width
    assert change.max() > 0.1
    assert drift.max() < 0.05  # only the noise realization differs
    assert bench.optimum(99)[1] - bench.optimum(100)[1] > 0.5  # J* 14.1 -> 14.9


def test_smooth_drift_is_continuous():
    steps = np.arange(0, 301)
    mu = friction(steps, "smooth") / FRICTION_NOMINAL
    assert np.all(mu[:51] == 1.0)
    assert mu[100] == pytest.approx(4.0)
    assert np.max(np.abs(np.diff(mu))) < 0.1  # at most 1.5 pi / 50 = 0.094 per step
    assert 3.5 - 1e-12 <= mu[100:].min() and mu[100:].max() <= 4.5 + 1e-12
    # Between steps the profile is continuous too (no jump at 50 or 100).
    for edge in (50, 100):
        near = friction(np.array([edge - 1e-9, edge, edge + 1e-9]), "smooth")
        assert np.ptp(near) < 1e-9 * FRICTION_NOMINAL
    bench = CartPole(drift="smooth")
    width = bench.bounds[1] - bench.bounds[0]
    gains = np.array([bench.lqr_gain(k) for k in range(300)])
    # Per step at most ~1% of the box (the sudden jump moves theta_3 by 14%).
    assert np.max(np.abs(np.diff(gains, axis=0)) / width) < 0.02
    assert np.ptp(gains[:, 2]) > 5  # theta_3 moves from -27.9 to about -37


def test_dare_gain_lies_inside_the_box_for_both_drifts():
    for drift in ("sudden", "smooth"):
        bench = CartPole(drift=drift)
        lower, upper = bench.bounds
        gains = np.array([bench.lqr_gain(k) for k in range(0, 300, 3)])
        assert np.all(gains > lower) and np.all(gains < upper)


# ---------------------------------------------------------------------- values
def test_cost_is_deterministic_per_step_and_differs_between_steps(bench):
    x = box_points(bench, 16)
    first = bench.f(x, 7)
    np.testing.assert_array_equal(first, bench.f(x, 7))
    np.testing.assert_array_equal(first, bench.f(x, 7.6))  # step floor(t)
    np.testing.assert_array_equal(first, CartPole().f(x, 7))  # same seed, new instance
    assert np.all(first != bench.f(x, 8))  # fresh noise each step, same friction
    assert np.all(first != CartPole(seed=1).f(x, 7))
    assert np.max(np.abs(first - bench.f(x, 8))) < 0.5
    np.testing.assert_array_equal(bench.process_noise(7), bench.process_noise(7.2))


def test_f_is_minus_the_cost_and_vectorized(bench):
    x = box_points(bench, 8)
    times = np.array([0, 0, 5, 100, 100.5, 5, 299, 0])
    values = bench.f(x, times)
    singles = np.array([float(bench.f(point, t)) for point, t in zip(x, times)])
    np.testing.assert_allclose(values, singles, rtol=1e-13)
    np.testing.assert_array_equal(bench.episode_cost(x, times), -values)
    assert bench.f(x[0], 3).shape == ()
    assert np.all((values < -10) & (values > -60))


def test_banded_and_loop_simulations_agree_with_a_plain_loop(bench):
    x = box_points(bench, BANDED_BATCH + 20, seed=3)  # above the batch: the time loop
    a_d, b_d = bench.system(100)
    noise = bench.process_noise(100)
    looped = closed_loop_costs(x, a_d, b_d, noise)
    banded = np.concatenate(
        [closed_loop_costs(x[i : i + 10], a_d, b_d, noise) for i in range(0, len(x), 10)]
    )
    np.testing.assert_allclose(looped, banded, rtol=1e-12)
    # A plain simulation of u = -theta s, cost including s_0.
    state = np.tile(INITIAL_STATE, (len(x), 1))
    total = np.zeros(len(x))
    for k in range(bench.steps):
        u = -np.sum(state * x, axis=1)
        total += 10 * np.sum(state**2, axis=1) + u**2
        if k < bench.steps - 1:
            state = state @ a_d.T + np.outer(u, b_d[:, 0]) + noise[k]
    np.testing.assert_allclose(looped, total / bench.steps, rtol=1e-12)


def test_adjoint_gradient_matches_finite_differences(bench):
    x = box_points(bench, 4, seed=5)
    costs, gradients = bench.episode_cost_and_gradient(x, 42)
    np.testing.assert_array_equal(costs, bench.episode_cost(x, 42))
    width = bench.bounds[1] - bench.bounds[0]
    for j in range(4):
        step = 1e-6 * width[j]
        plus, minus = x.copy(), x.copy()
        plus[:, j] += step
        minus[:, j] -= step
        numeric = (bench.episode_cost(plus, 42) - bench.episode_cost(minus, 42)) / (2 * step)
        np.testing.assert_allclose(gradients[:, j], numeric, rtol=1e-5, atol=1e-7)


def test_box_is_stable_and_unstable_gains_are_capped(bench):
    lower, upper = bench.bounds
    corners = np.array(np.meshgrid(*zip(lower, upper))).reshape(4, -1).T
    x = np.vstack([corners, box_points(bench, 256)])
    for mu in FRICTIONS:
        a_d, b_d = discretize(mu)
        closed = a_d[None] - b_d[None, :, :1] * x[:, None, :]
        assert np.max(np.abs(np.linalg.eigvals(closed))) < 0.997
    assert np.all(bench.episode_cost(x, 150) < 50)
    # Open loop (theta = 0, slow blow-up) and a violently unstable gain (overflow):
    # capped, finite, with zero gradient, and no NaN leaking into their batch neighbours.
    a_d, b_d = bench.system(0)
    noise = bench.process_noise(0)
    bad = np.array(
        [[0.0, 0, 0, 0], [100, 100, 100, 100], [-2.5, -5, -30, -3], [100, 100, 100, 100]]
    )
    with np.errstate(all="raise"):
        costs, gradients = closed_loop_costs_and_gradients(bad, a_d, b_d, noise)
        looped = closed_loop_costs(np.repeat(bad, 40, axis=0), a_d, b_d, noise)[::40]
    np.testing.assert_array_equal(costs[[0, 1, 3]], COST_CAP)
    np.testing.assert_array_equal(gradients[[0, 1, 3]], 0.0)
    np.testing.assert_allclose(costs[2], closed_loop_costs(bad[2], a_d, b_d, noise)[0], rtol=1e-13)
    np.testing.assert_allclose(looped, costs, rtol=1e-12)


# ---------------------------------------------------------------------- optimum
@pytest.mark.parametrize("drift", ["sudden", "smooth"])
def test_optimum_beats_box_points_and_the_lqr_gain(drift):
    bench = CartPole(drift=drift)
    x = box_points(bench, 512, seed=11)
    lower, upper = bench.bounds
    for t in (0, 60, 100, 230):
        optimum_x, optimum_value = bench.optimum(t)
        assert np.all(optimum_x >= lower) and np.all(optimum_x <= upper)
        assert optimum_value == pytest.approx(float(bench.f(optimum_x, t)), abs=1e-12)
        assert np.all(bench.f(x, t) <= optimum_value)
        lqr_value = float(bench.f(bench.lqr_gain(t), t))
        assert 0 <= optimum_value - lqr_value < 2e-3
    # Cached per step, copies handed out.
    first, _ = bench.optimum(60)
    first[:] = 0
    assert np.all(bench.optimum(60.7)[0] != 0)


def test_attributes_and_scaling(bench):
    assert bench.name == "cartpole" and bench.dim == 4 and bench.time_unit == "step"
    assert bench.horizon == 300 and bench.noise_variance == 0.02 and bench.cost == 0
    np.testing.assert_array_equal(bench.bounds, [[-3, -6, -50, -4], [-2, -4, -25, -2]])
    np.testing.assert_allclose(bench.search_scaling, [1 / 8, 1 / 4, 3, 1 / 8])
    assert bench.temporal_kernel == "matern12"
    assert CartPole(drift="smooth").temporal_kernel == "matern32"
    assert np.isfinite(bench.signal_variance(samples=2000))
    rng = np.random.default_rng(0)
    assert math.isfinite(bench.observe(bench.lqr_gain(0), 0, rng))


# ---------------------------------------------------------------------- options
@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("drift", "jump"),
        ("noise_variance", -0.1),
        ("horizon", 0),
        ("seed", -1),
        ("seed", 1.5),
        ("steps", 1),
        ("steps", 10.5),
    ],
)
def test_bad_options_raise_naming_the_option(option, value):
    with pytest.raises(ValueError, match=option):
        CartPole(**{option: value})


def test_bad_inputs_raise(bench):
    with pytest.raises(ValueError, match="times"):
        bench.f(np.zeros(4), -1)
    with pytest.raises(ValueError, match="shape"):
        bench.f(np.zeros((2, 3)), 0)
    with pytest.raises(ValueError, match="drift"):
        friction(3, "linear")
