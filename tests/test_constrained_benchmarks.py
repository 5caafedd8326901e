"""Constrained benchmarks: feasible sets against hand computations, the constrained optima."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dynbo.benchmarks as benchmarks
from dynbo.benchmarks.cartpole import INITIAL_STATE
from dynbo.benchmarks.constrained import CartPoleTrack, ConstrainedWLAN, MovingHazard


# ---------------------------------------------------------------------- the interface
def test_an_unconstrained_benchmark_has_no_constraints():
    bench = benchmarks.get("hartmann3")
    x = np.full((3, bench.dim), 0.5)
    assert bench.constraint_names == ()
    assert bench.constraints(x, 1.0) == {}
    assert bench.feasible(x, 1.0).tolist() == [True] * 3
    assert bench.safe_points().shape == (0, bench.dim)
    assert bench.observe_constraints(x[0], 1.0, np.random.default_rng(0)) == {}


def test_the_constrained_benchmarks_are_registered():
    for name in ("moving-hazard", "wlan-min-rate", "cartpole-track"):
        assert name in benchmarks.names()
        assert benchmarks.get(name).constraint_names


@pytest.mark.parametrize(
    "name, option, value",
    [
        ("moving-hazard", "constraint_noise_variance", -1.0),
        ("moving-hazard", "horizon", 0.0),
        ("wlan-min-rate", "min_rate", 0.0),
        ("wlan-min-rate", "min_rate", float("nan")),
        ("cartpole-track", "max_excursion", -4.0),
        ("cartpole-track", "constraint_noise_variance", True),
    ],
)
def test_bad_options_are_refused_by_name(name, option, value):
    with pytest.raises(ValueError, match=option):
        benchmarks.get(name, **{option: value})


def test_observed_constraints_add_gaussian_noise_of_the_given_variance():
    bench = MovingHazard(constraint_noise_variance=0.01)
    rng = np.random.default_rng(3)
    x, t = np.array([0.2, 0.3]), 10.0
    exact = float(bench.constraints(x, t)["hazard"])
    draws = np.array([bench.observe_constraints(x, t, rng)["hazard"] for _ in range(4000)])
    assert abs(draws.mean() - exact) < 4 * 0.1 / math.sqrt(4000)
    assert draws.var() == pytest.approx(0.01, rel=0.1)
    quiet = MovingHazard(constraint_noise_variance=0.0)
    assert quiet.observe_constraints(x, t, rng) == {"hazard": exact}


def test_constraints_refuse_bad_points():
    bench = MovingHazard()
    with pytest.raises(ValueError, match="x must be"):
        bench.constraints(np.zeros(3), 0.0)
    with pytest.raises(ValueError, match="finite"):
        bench.feasible(np.array([np.nan, 0.0]), 0.0)


# ---------------------------------------------------------------------- moving hazard
def test_moving_hazard_feasible_set_by_hand():
    bench = MovingHazard(horizon=100.0)
    # t = 0: disc centre (0.7, 0.5), peak (0.75, 0.5); t = 25: disc centre (0.3, 0.5)
    # (two laps: angle pi), peak (0.5, 0.75) (one lap: angle pi / 2)
    assert np.allclose(bench.hazard_centre(0.0), [0.7, 0.5])
    assert np.allclose(bench.hazard_centre(25.0), [0.3, 0.5])
    assert np.allclose(bench.peak(25.0), [0.5, 0.75])
    points = np.array([[0.75, 0.5], [0.7, 0.75], [0.45, 0.5], [0.1, 0.1]])
    by_hand = [0.05**2 - 0.04, 0.25**2 - 0.04, 0.25**2 - 0.04, 0.6**2 + 0.4**2 - 0.04]
    values = bench.constraints(points, 0.0)["hazard"]
    assert np.allclose(values, by_hand)
    assert bench.feasible(points, 0.0).tolist() == [False, True, True, True]
    # per-point times: the first point at t = 25 is 0.45 from (0.3, 0.5): safe
    times = np.array([25.0, 0.0, 0.0, 0.0])
    assert bench.feasible(points, times).tolist() == [True, True, True, True]
    assert float(bench.f(np.array([0.75, 0.5]), 0.0)) == pytest.approx(1.0)


def test_moving_hazard_constrained_optimum_against_a_dense_grid():
    bench = MovingHazard(horizon=100.0)
    axis = np.linspace(0.0, 1.0, 601)
    grid = np.stack(np.meshgrid(axis, axis, indexing="ij"), axis=-1).reshape(-1, 2)
    for t in (0.0, 5.0, 12.0, 30.0, 50.0, 97.0):
        x_star, f_star = bench.optimum(t)
        assert bool(bench.feasible(x_star, t))
        assert float(bench.f(x_star, t)) == f_star
        feasible = bench.feasible(grid, t)
        best_grid = float(bench.f(grid[feasible], t).max())
        # no feasible grid point beats it; the grid (step 1/600) comes within its spacing
        assert best_grid <= f_star + 1e-12
        assert best_grid >= f_star - 2e-3


def test_moving_hazard_binds_for_the_computed_fraction_of_the_horizon():
    bench = MovingHazard(horizon=100.0)
    times = np.linspace(0.0, 100.0, 20001)[:-1]
    binding = np.array([bench.optimum(t)[1] < 1.0 for t in times])
    assert binding.mean() == pytest.approx(math.acos(0.625) / math.pi, abs=1e-3)


def test_moving_hazard_safe_points_are_safe_at_every_time():
    bench = MovingHazard(horizon=100.0)
    times = np.linspace(-10.0, 110.0, 2401)
    for point in bench.safe_points():
        values = bench.constraints(np.tile(point, (times.size, 1)), times)["hazard"]
        # sqrt(0.32) = 0.566 from the centre, the disc's centre 0.2 from it: the nearest
        # approach is |x - h| = sqrt(0.32) - 0.2, outside the radius 0.2
        assert values.min() >= (math.sqrt(0.32) - 0.2) ** 2 - 0.04 - 1e-9
        assert values.min() <= (math.sqrt(0.32) - 0.2) ** 2 - 0.04 + 1e-4


# ---------------------------------------------------------------------- WLAN
@pytest.fixture(scope="module")
def wlan():
    return ConstrainedWLAN(horizon=120.0, noise_variance=0.0)


def test_wlan_min_rate_by_hand(wlan):
    powers = np.array([10.0, 100.0, 3.0, 30.0])  # mW
    t = 40.0
    users = wlan.positions(t)
    rates = []
    for position in users:
        distance = np.maximum(np.linalg.norm(wlan.ap_positions - position, axis=1), 1.0)
        loss_db = wlan.constants.reference_loss_db + 40.0 * np.log10(distance)
        received = powers * 10.0 ** (-loss_db / 10.0)
        serving = int(np.argmax(received))
        interference = received.sum() - received[serving]
        rates.append(
            1.0 * math.log2(1.0 + received[serving] / (wlan.constants.noise_mw + interference))
        )
    value = float(wlan.constraints(powers, t)["min_rate"])
    assert value == pytest.approx(min(rates) - 1.0, rel=1e-10, abs=1e-12)
    assert bool(wlan.feasible(powers, t)) == (min(rates) >= 1.0)


def test_wlan_rate_jacobian_matches_finite_differences(wlan):
    gains = wlan.gains(wlan.positions(10.0))
    y = np.array([7.0, 20.0, 3.0, 12.0])
    _, jacobian = wlan._rates_and_jacobian(gains, y)
    step = 1e-6
    for b in range(4):
        shift = np.zeros(4)
        shift[b] = step
        upper = wlan._rates_and_jacobian(gains, y + shift)[0]
        lower = wlan._rates_and_jacobian(gains, y - shift)[0]
        assert np.allclose((upper - lower) / (2 * step), jacobian[:, b], atol=1e-6)


def test_wlan_constrained_optimum_beats_a_dense_random_sample(wlan):
    rng = np.random.default_rng(5)
    sample = 10.0 ** (rng.uniform(1.0, 25.0, size=(40_000, 4)) / 10.0)
    for t in (0.0, 60.0, 110.0):
        x_star, f_star = wlan.optimum(t)
        assert bool(wlan.feasible(x_star, t))
        assert float(wlan.f(x_star, t)) == f_star
        free_x, free_value = wlan.unconstrained_optimum(t)
        assert f_star <= free_value + 1e-9
        if bool(wlan.feasible(free_x, t)):
            assert f_star == pytest.approx(free_value, abs=1e-9)
        feasible = wlan.feasible(sample, np.full(len(sample), t))
        assert feasible.any()
        assert float(wlan.f(sample[feasible], t).max()) <= f_star + 1e-9


def test_wlan_constraint_binds_at_t0(wlan):
    # the sum-rate maximizer starves a user at t = 0 (seed 0, 4 APs, 18 users)
    free_x, free_value = wlan.unconstrained_optimum(0.0)
    assert not bool(wlan.feasible(free_x, 0.0))
    assert wlan.optimum(0.0)[1] < free_value


def test_wlan_without_a_feasible_point_says_so():
    bench = ConstrainedWLAN(horizon=60.0, min_rate=50.0)
    with pytest.raises(ValueError, match="no feasible point"):
        bench.optimum(0.0)


# ---------------------------------------------------------------------- cart-pole
@pytest.fixture(scope="module")
def track():
    return CartPoleTrack(noise_variance=0.0, steps=400)


def test_cartpole_excursion_by_hand(track):
    theta = np.array([-2.5, -5.0, -30.0, -3.0])
    for t in (3.0, 150.0):
        a_d, b_d = track.system(t)
        noise = track.process_noise(t)
        state, largest = INITIAL_STATE.copy(), abs(INITIAL_STATE[0])
        for k in range(track.steps - 1):
            u = -theta @ state
            state = a_d @ state + b_d[:, 0] * u + noise[k]
            largest = max(largest, abs(state[0]))
        assert float(track.constraints(theta, t)["excursion"]) == pytest.approx(
            track.max_excursion - largest, abs=1e-12
        )


def test_cartpole_excursion_jacobian_matches_finite_differences(track):
    theta = np.array([-2.4, -4.8, -29.0, -3.1])
    values, jacobian = track._excursions_and_jacobian(theta, 150.0)
    assert np.allclose(values, track.max_excursion - np.abs(track.cart_positions(theta, 150.0)[0]))
    step = 1e-6
    for i in range(4):
        shift = np.zeros(4)
        shift[i] = step
        upper = track._excursions_and_jacobian(theta + shift, 150.0)[0]
        lower = track._excursions_and_jacobian(theta - shift, 150.0)[0]
        assert np.allclose((upper - lower) / (2 * step), jacobian[:, i], atol=1e-6)


def test_cartpole_the_drift_makes_the_free_optimum_infeasible(track):
    rng = np.random.default_rng(2)
    lower, upper = track.bounds
    sample = rng.uniform(lower, upper, size=(3000, 4))
    before = track.optimum(50.0)
    assert np.array_equal(before[0], track.unconstrained_optimum(50.0)[0])
    free_x, free_value = track.unconstrained_optimum(150.0)
    assert not bool(track.feasible(free_x, 150.0))
    x_star, f_star = track.optimum(150.0)
    assert bool(track.feasible(x_star, 150.0))
    assert float(track.f(x_star, 150.0)) == f_star
    assert f_star < free_value
    feasible = track.feasible(sample, np.full(len(sample), 150.0))
    assert 0.05 < feasible.mean() < 0.95
    assert float(track.f(sample[feasible], 150.0).max()) <= f_star + 1e-9
