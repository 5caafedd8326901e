"""The WLAN power-control benchmark: physics by hand, seeding, mobility, the optimum."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dynbo.benchmarks.wlan import POWER_MAX_MW, POWER_MIN_MW, WLAN, WLANConstants, ap_grid


@pytest.fixture(scope="module")
def bolt() -> WLAN:
    """The BOLT size (6 APs, 27 users), seed 0; optimum results stay cached across tests."""
    return WLAN()


def _hand_rate() -> float:
    """The summed rate of 2 APs, 3 users, P = (10, 100) mW, written out by hand (Mbit/s).

    APs at (15, 20) and (45, 20) m (the 1 x 2 grid on the 60 m x 40 m floor). Gain at
    distance d >= 1 m: free space at 1 m, (lambda / 4 pi)^2 with lambda = c / 2.4 GHz, times
    d^-4; noise -174 dBm/Hz + 60 dB (1 MHz) + 7 dB = -107 dBm; W = 1 MHz.
    """
    wavelength = 299_792_458.0 / 2.4e9  # 0.1249 m
    g0 = (wavelength / (4.0 * math.pi)) ** 2  # 9.88e-5, i.e. a 40.05 dB loss at 1 m
    noise = 10.0 ** (-10.7)  # -107 dBm in mW
    p1, p2 = 10.0, 100.0
    # User A at (20, 20): 5 m from AP 1, 25 m from AP 2. Received 10/5^4 = 0.016 g0 from
    # AP 1 against 100/25^4 = 0.000256 g0 from AP 2: served by AP 1.
    a_from_1 = p1 * g0 / 5.0**4
    a_from_2 = p2 * g0 / 25.0**4
    sinr_a = a_from_1 / (noise + a_from_2)
    # User B at (28, 20): 13 m from AP 1 but 17 m from AP 2. Received 10/13^4 = 3.50e-4 g0
    # against 100/17^4 = 1.20e-3 g0: served by the farther AP 2, which transmits louder.
    b_from_1 = p1 * g0 / 13.0**4
    b_from_2 = p2 * g0 / 17.0**4
    sinr_b = b_from_2 / (noise + b_from_1)
    # User C at (45, 20.5): 0.5 m from AP 2, clamped to the 1 m minimum distance.
    c_from_1 = p1 * g0 / (30.0**2 + 0.5**2) ** 2
    c_from_2 = p2 * g0 / 1.0**4
    sinr_c = c_from_2 / (noise + c_from_1)
    return sum(1.0 * math.log2(1.0 + sinr) for sinr in (sinr_a, sinr_b, sinr_c))


HAND_POSITIONS = np.array([[20.0, 20.0], [28.0, 20.0], [45.0, 20.5]])
HAND_POWERS = np.array([10.0, 100.0])


def test_rate_matches_hand_computation() -> None:
    bench = WLAN(access_points=2, users=3)
    np.testing.assert_allclose(bench.ap_positions, [[15.0, 20.0], [45.0, 20.0]])
    assert bench.association_at(HAND_POSITIONS, HAND_POWERS).tolist() == [[0, 1, 1]]
    expected = _hand_rate()
    assert expected > 10.0  # the three SINRs are far above 1
    np.testing.assert_allclose(bench.rate_at(HAND_POSITIONS, HAND_POWERS), [expected], rtol=1e-9)
    # The same through f: pin every user at its hand position for all times.
    bench.leg_times = [np.array([0.0, 1000.0])] * 3
    bench.leg_points = [np.array([p, p]) for p in HAND_POSITIONS]
    np.testing.assert_allclose(bench.f(HAND_POWERS, 42.0), expected, rtol=1e-9)
    assert bench.association(HAND_POWERS, 42.0).tolist() == [[0, 1, 1]]
    # At equal powers user B is served by the nearer AP 1.
    assert bench.association_at(HAND_POSITIONS, [50.0, 50.0]).tolist() == [[0, 0, 1]]


def test_f_is_vectorized_over_points_and_times(bolt: WLAN) -> None:
    rng = np.random.default_rng(3)
    x = rng.uniform(bolt.bounds[0], bolt.bounds[1], (50, bolt.dim))
    t = rng.uniform(0.0, bolt.horizon, 50)
    one_by_one = np.array([bolt.f(x[i], t[i]) for i in range(50)])
    np.testing.assert_allclose(bolt.f(x, t), one_by_one, rtol=1e-13)
    np.testing.assert_allclose(
        bolt.f(x, 77.0), [bolt.rate_at(bolt.positions(77.0), xi)[0] for xi in x], rtol=1e-13
    )
    assert bolt.f(x[0], 1.0).shape == ()
    with pytest.raises(ValueError, match="t must be"):
        bolt.f(x, t[:3])


def test_slice_gradient_matches_finite_differences(bolt: WLAN) -> None:
    values, value_and_gradient = bolt._slice_dbm(bolt.gains(bolt.positions(250.0)))
    y = np.random.default_rng(0).uniform(2.0, 24.0, (6, bolt.dim))
    value, gradient = value_and_gradient(y)
    np.testing.assert_allclose(value, values(y), rtol=1e-12)
    step = 1e-6
    numeric = np.stack(
        [(values(y + step * e) - values(y - step * e)) / (2 * step) for e in np.eye(bolt.dim)],
        axis=1,
    )
    np.testing.assert_allclose(gradient, numeric, atol=1e-5)


def test_same_seed_same_trajectories_other_seed_differs() -> None:
    first, again, other = WLAN(seed=3), WLAN(seed=3), WLAN(seed=4)
    for a, b in zip(first.leg_times + first.leg_points, again.leg_times + again.leg_points):
        np.testing.assert_array_equal(a, b)
    times = np.linspace(0.0, 600.0, 13)
    np.testing.assert_array_equal(first.positions(times), again.positions(times))
    x = np.full((13, 6), 20.0)
    np.testing.assert_array_equal(first.f(x, times), again.f(x, times))
    assert np.max(np.abs(first.positions(times) - other.positions(times))) > 1.0
    assert np.max(np.abs(first.f(x, times) - other.f(x, times))) > 1.0
    # A user's path depends neither on the number of users nor on the horizon.
    fewer = WLAN(seed=3, users=5, horizon=300.0)
    early = np.linspace(0.0, 300.0, 31)
    np.testing.assert_array_equal(fewer.positions(early), first.positions(early)[:, :5])


def test_optimal_powers_move_between_start_and_end(bolt: WLAN) -> None:
    x0, f0 = bolt.optimum(0.0)
    x_end, f_end = bolt.optimum(bolt.horizon)
    change_db = np.abs(10.0 * np.log10(x_end) - 10.0 * np.log10(x0))
    assert np.max(change_db) > 5.0
    # Keeping the powers of t = 0 loses far more than the noise standard deviation at T.
    assert f_end - float(bolt.f(x0, bolt.horizon)) > 5.0 * math.sqrt(bolt.noise_variance)


@pytest.mark.parametrize("t", [0.0, 137.5, 300.0, 455.0, 600.0])
def test_optimum_beats_random_powers(bolt: WLAN, t: float) -> None:
    x_star, f_star = bolt.optimum(t)
    assert x_star.shape == (bolt.dim,)
    assert np.all(x_star >= bolt.bounds[0]) and np.all(x_star <= bolt.bounds[1])
    assert f_star == pytest.approx(float(bolt.f(x_star, t)), rel=1e-12)
    rng = np.random.default_rng(int(t))
    uniform = rng.uniform(bolt.bounds[0], bolt.bounds[1], (20_000, bolt.dim))
    log_uniform = 10.0 ** rng.uniform(0.1, 2.5, (20_000, bolt.dim))
    corners = np.where(rng.integers(0, 2, (64, bolt.dim)), POWER_MAX_MW, POWER_MIN_MW)
    for sample in (uniform, log_uniform, corners):
        assert f_star >= float(np.max(bolt.f(sample, t))) - 1e-9
    # Cached: a second call returns the same answer, and a copy.
    again, value = bolt.optimum(t)
    np.testing.assert_array_equal(again, x_star)
    assert value == f_star


def test_attributes_follow_the_papers(bolt: WLAN) -> None:
    assert (bolt.name, bolt.time_unit, bolt.temporal_kernel) == ("wlan", "s", "matern12")
    assert (bolt.dim, bolt.noise_variance, bolt.cost, bolt.horizon) == (6, 1.5, 0.1, 600.0)
    np.testing.assert_allclose(bolt.bounds, [[10**0.1] * 6, [10**2.5] * 6])
    assert "Bardou" in bolt.reference and "This Too Shall Pass" in bolt.reference
    assert "Optimizing Through Change" in bolt.reference
    wdbo = WLAN(access_points=4, users=18)
    assert wdbo.dim == 4 and wdbo.bounds.shape == (2, 4)
    np.testing.assert_allclose(
        wdbo.ap_positions, [[15.0, 10.0], [45.0, 10.0], [15.0, 30.0], [45.0, 30.0]]
    )


@pytest.mark.parametrize(
    ("options", "name"),
    [
        ({"access_points": 0}, "access_points"),
        ({"access_points": 2.5}, "access_points"),
        ({"access_points": True}, "access_points"),
        ({"users": 0}, "users"),
        ({"users": "27"}, "users"),
        ({"seed": -1}, "seed"),
        ({"seed": 1.5}, "seed"),
        ({"noise_variance": -1.0}, "noise_variance"),
        ({"noise_variance": float("nan")}, "noise_variance"),
        ({"cost": -0.1}, "cost"),
        ({"horizon": 0.0}, "horizon"),
        ({"horizon": float("inf")}, "horizon"),
        ({"constants": {"bandwidth_mhz": 2.0}}, "constants"),
    ],
)
def test_bad_options_raise(options: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        WLAN(**options)


@pytest.mark.parametrize(
    ("options", "name"),
    [
        ({"path_loss_exponent": 0.0}, "path_loss_exponent"),
        ({"floor_width": -1.0}, "floor_width"),
        ({"bandwidth_mhz": float("nan")}, "bandwidth_mhz"),
        ({"speed_min": 0.0}, "speed_min"),
        ({"speed_min": 2.0, "speed_max": 1.0}, "speed_max"),
        ({"pause_max": -1.0}, "pause_max"),
    ],
)
def test_bad_constants_raise(options: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        WLANConstants(**options)


def test_users_stay_on_the_floor_at_allowed_speeds(bolt: WLAN) -> None:
    c = bolt.constants
    times = np.linspace(-10.0, bolt.horizon + c.margin + 10.0, 4001)
    where = bolt.positions(times)
    assert where.shape == (4001, bolt.users, 2)
    assert np.all(where >= 0.0)
    assert np.all(where[..., 0] <= c.floor_width) and np.all(where[..., 1] <= c.floor_depth)
    assert np.all(bolt.ap_positions >= 0.0) and np.all(bolt.ap_positions[:, 0] <= c.floor_width)
    moving_seen = 0
    for knots, speeds in zip(bolt.leg_times, bolt.speeds()):
        assert knots[0] == 0.0 and knots[-1] >= bolt.horizon + c.margin
        assert np.all(np.diff(knots) > 0)
        moving = speeds > 0
        moving_seen += int(np.sum(moving))
        assert np.all(speeds[moving] >= c.speed_min - 1e-12)
        assert np.all(speeds[moving] <= c.speed_max + 1e-12)
        assert np.all(np.diff(knots)[~moving] <= c.pause_max + 1e-9)
    assert moving_seen >= bolt.users  # every user walks at least once, on average
    # Positions interpolate the legs exactly: at a knot time, the knot itself.
    np.testing.assert_allclose(
        bolt.positions(bolt.leg_times[0][3])[0], bolt.leg_points[0][3], atol=1e-12
    )


def test_ap_grid_layouts() -> None:
    np.testing.assert_allclose(ap_grid(1, 60.0, 40.0), [[30.0, 20.0]])
    six = ap_grid(6, 60.0, 40.0)
    np.testing.assert_allclose(six[:3], [[10.0, 10.0], [30.0, 10.0], [50.0, 10.0]])
    np.testing.assert_allclose(six[3:], [[10.0, 30.0], [30.0, 30.0], [50.0, 30.0]])
    five = ap_grid(5, 60.0, 40.0)  # last row of two, centred
    np.testing.assert_allclose(five[3:], [[20.0, 30.0], [40.0, 30.0]])
