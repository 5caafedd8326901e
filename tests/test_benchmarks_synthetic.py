"""Synthetic time-varying benchmarks: literature optima, time mapping, sign, regret >= 0."""

import math

import numpy as np
import pytest
import scipy.optimize

import dynbo.benchmarks as benchmarks
from dynbo.benchmarks.synthetic import SYNTHETIC_BENCHMARKS

SYNTHETIC = sorted(SYNTHETIC_BENCHMARKS)

# Literature global minima of the static (d+1)-dimensional functions, before any time
# mapping: (registry name, minimizer z* in d+1 dims, g(z*), tolerance on g, tolerance on
# x*). Sources: Surjanovic & Bingham's Virtual Library of Simulation Experiments, Jamil &
# Yang (2013), Molga & Smutnicki (2005); Six-Hump Camel on W-DBO App. G.4's [-2, 2]^2.
LITERATURE_MINIMA = [
    ("ackley", [0.0] * 4, 0.0, 1e-12, 1e-12),
    ("griewank", [0.0] * 6, 0.0, 1e-12, 1e-12),
    ("schwefel", [420.9687] * 4, 0.0, 1e-4, 1e-3),
    ("rastrigin", [0.0] * 5, 0.0, 1e-12, 1e-12),
    # Often quoted as -39.16599 d; the minimum per coordinate is -39.166166.
    ("styblinski-tang", [-2.903534] * 4, -39.16617 * 4, 1e-4, 1e-5),
    ("rosenbrock", [1.0] * 3, 0.0, 1e-12, 1e-6),
    ("powell", [0.0] * 4, 0.0, 1e-12, 2e-2),
    # Quoted at (4, 4, 4, 4); the exact minimizer is within 1e-3 of it.
    ("shekel", [4.0] * 4, -10.5364, 2e-4, 1e-3),
    ("hartmann3", [0.114614, 0.555649, 0.852547], -3.86278, 1e-5, 1e-4),
    (
        "hartmann6",
        [0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573],
        -3.32237,
        1e-5,
        1e-4,
    ),
    ("eggholder", [512.0, 404.2319], -959.6407, 1e-4, 1e-6),
    ("six-hump-camel", [0.0898, -0.7126], -1.0316, 1e-4, 1e-3),
    ("piecewise-six-hump-camel", [0.0898, -0.7126], -1.0316, 1e-4, 1e-3),
    ("piecewise-six-hump-camel", [-0.7126, 0.0898], -1.0316, 1e-4, 1e-3),
]


def time_of(bench, s):
    """Wall time at which the time coordinate equals ``s``."""
    lo, hi = bench.interval
    return bench.horizon * (s - lo) / (hi - lo)


def value_range(bench, rng):
    x = rng.uniform(bench.bounds[0], bench.bounds[1], size=(20_000, bench.dim))
    t = rng.uniform(0.0, bench.horizon, size=20_000)
    values = bench.f(x, t)
    return float(values.max() - values.min())


@pytest.mark.parametrize(("name", "z_star", "g_star", "g_tol", "x_tol"), LITERATURE_MINIMA)
def test_literature_minimum_value_location_and_optimum(name, z_star, g_star, g_tol, x_tol):
    bench = benchmarks.get(name)
    z_star = np.array(z_star)
    assert bench.dim + 1 == z_star.size
    # The static function at the literature minimizer has the literature minimum.
    assert bench.g(z_star[None, :])[0] == pytest.approx(g_star, abs=g_tol)
    # At the time whose coordinate is the minimizer's, optimum() finds that point.
    x_opt, f_opt = bench.optimum(time_of(bench, z_star[-1]))
    assert f_opt == pytest.approx(-g_star, abs=g_tol)
    assert f_opt >= -bench.g(z_star[None, :])[0] - 1e-12
    np.testing.assert_allclose(x_opt, z_star[:-1], atol=x_tol)


@pytest.mark.parametrize("name", SYNTHETIC)
def test_time_maps_linearly_onto_the_last_coordinate(name):
    bench = benchmarks.get(name, horizon=300.0)
    lo, hi = bench.interval
    assert bench.time_coordinate(0.0) == pytest.approx(lo)
    assert bench.time_coordinate(300.0) == pytest.approx(hi)
    assert bench.time_coordinate(150.0) == pytest.approx((lo + hi) / 2)
    np.testing.assert_allclose(bench.bounds, [[lo] * bench.dim, [hi] * bench.dim])
    x = np.random.default_rng(0).uniform(lo, hi, size=(5, bench.dim))
    for t, s in ((0.0, lo), (300.0, hi)):
        np.testing.assert_allclose(bench.f(x, t), -bench.g(np.column_stack([x, np.full(5, s)])))


@pytest.mark.parametrize("name", SYNTHETIC)
def test_objective_is_minus_the_test_function_and_vectorized(name):
    bench = benchmarks.get(name)
    rng = np.random.default_rng(1)
    x = rng.uniform(bench.bounds[0], bench.bounds[1], size=(64, bench.dim))
    t = rng.uniform(0.0, bench.horizon, size=64)
    z = np.column_stack([x, bench.time_coordinate(t)])
    values = bench.f(x, t)
    assert values.shape == (64,)
    np.testing.assert_allclose(values, -bench.g(z))
    one_by_one = [bench.f(x[i], t[i]) for i in range(64)]
    assert one_by_one[0].shape == ()
    np.testing.assert_allclose(one_by_one, values)
    np.testing.assert_allclose(bench.f(x, 42.0), bench.f(x, np.full(64, 42.0)))


@pytest.mark.parametrize("name", SYNTHETIC)
def test_random_queries_never_have_negative_regret(name):
    bench = benchmarks.get(name)
    rng = np.random.default_rng(2)
    span = value_range(bench, rng)
    times = rng.uniform(0.0, bench.horizon, size=50)
    worst = np.inf
    for t in times:
        x_star, f_star = bench.optimum(t)
        assert np.all(x_star >= bench.bounds[0]) and np.all(x_star <= bench.bounds[1])
        assert bench.f(x_star, t) == pytest.approx(f_star, abs=1e-12 * span)
        x = rng.uniform(bench.bounds[0], bench.bounds[1], size=(20, bench.dim))
        worst = min(worst, float(np.min(f_star - bench.f(x, t))))
    assert worst >= -1e-9 * span


@pytest.mark.parametrize("name", SYNTHETIC)
def test_locally_polished_queries_never_have_negative_regret(name):
    """Local maxima reached by an independent L-BFGS-B from the best of 300 random points
    (the hardest queries: near the tallest peaks) never beat optimum(), here called with
    an empty cache (no warm start) at every time."""
    bench = benchmarks.get(name)
    rng = np.random.default_rng(3)
    span = value_range(bench, rng)
    box = list(zip(bench.bounds[0], bench.bounds[1]))
    for t in rng.uniform(0.0, bench.horizon, size=15):
        bench.clear_cache()
        _, f_star = bench.optimum(t)
        x = rng.uniform(bench.bounds[0], bench.bounds[1], size=(300, bench.dim))
        for start in x[np.argsort(-bench.f(x, t))[:4]]:
            result = scipy.optimize.minimize(
                lambda x, t=t: -float(bench.f(x, t)), start, method="L-BFGS-B", bounds=box
            )
            polished = np.clip(result.x, bench.bounds[0], bench.bounds[1])
            assert f_star - bench.f(polished, t) >= -1e-9 * span


@pytest.mark.parametrize("name", [n for n in SYNTHETIC if "camel" not in n and n != "eggholder"])
def test_analytic_gradients_match_finite_differences(name):
    bench = benchmarks.get(name)
    rng = np.random.default_rng(4)
    lo, hi = bench.interval
    z = rng.uniform(lo, hi, size=(6, bench.dim + 1))
    _, gradients = bench.g_and_gradient(z)
    step = 1e-6 * (hi - lo)
    for k in range(bench.dim + 1):
        shift = np.zeros(bench.dim + 1)
        shift[k] = step
        numeric = (bench.g(z + shift) - bench.g(z - shift)) / (2 * step)
        np.testing.assert_allclose(gradients[:, k], numeric, rtol=1e-5, atol=1e-6)


def test_closed_form_maximizers():
    for t in (0.0, 123.4, 600.0):
        np.testing.assert_array_equal(benchmarks.get("rastrigin").optimum(t)[0], np.zeros(4))
        np.testing.assert_array_equal(benchmarks.get("ackley", dim=5).optimum(t)[0], np.zeros(5))
        np.testing.assert_allclose(
            benchmarks.get("styblinski-tang").optimum(t)[0], np.full(3, -2.903534), atol=1e-6
        )
        np.testing.assert_allclose(
            benchmarks.get("schwefel").optimum(t)[0], np.full(3, 420.9687), atol=1e-4
        )
    # Ackley: x = 0 for every time coordinate, including ones far from 0.
    ackley = benchmarks.get("ackley", dim=2)
    grid = np.stack(np.meshgrid(*[np.linspace(-3, 3, 601)] * 2), axis=-1).reshape(-1, 2)
    for t in (10.0, 290.0, 455.5):
        assert ackley.optimum(t)[1] >= np.max(ackley.f(grid, t)) - 1e-12


def test_griewank_closed_form_beats_a_search_near_the_origin():
    """The slice minimizer lies within |x| <= pi of 0; a dense search there cannot win."""
    bench = benchmarks.get("griewank", dim=2)
    rng = np.random.default_rng(5)
    grid = np.stack(np.meshgrid(*[np.linspace(-8, 8, 801)] * 2), axis=-1).reshape(-1, 2)
    # Times with cos(s / sqrt(3)) > 0, < 0, near 0 and near the 1/2000 threshold.
    s_values = [0.0, math.pi * math.sqrt(3), 0.5 * math.pi * math.sqrt(3) + 1e-3]
    s_values.append(math.sqrt(3) * math.acos(-1.0 / 2000.0) + 1e-4)
    s_values += list(rng.uniform(-600, 600, size=8))
    for s in s_values:
        t = time_of(bench, s)
        x_star, f_star = bench.optimum(t)
        best = int(np.argmax(bench.f(grid, t)))
        polished = scipy.optimize.minimize(
            lambda x, t=t: -float(bench.f(x, t)), grid[best], method="L-BFGS-B", tol=1e-14
        )
        assert f_star >= -polished.fun - 1e-12
        assert f_star >= np.max(bench.f(grid, t)) - 1e-12
        if math.cos(s / math.sqrt(3)) >= 0:
            np.testing.assert_array_equal(x_star, [0.0, 0.0])


def test_piecewise_six_hump_camel_switches_at_three_eighths_of_the_horizon():
    bench = benchmarks.get("piecewise-six-hump-camel", horizon=800.0)
    x = np.array([[0.3], [-1.2]])
    shc = benchmarks.get("six-hump-camel", horizon=800.0)
    before, after = 300.0 - 1e-9, 300.0
    np.testing.assert_allclose(bench.f(x, before), shc.f(x, before))
    s = bench.time_coordinate(after)
    swapped = -shc.g(np.column_stack([np.full(2, s), x[:, 0]]))
    np.testing.assert_allclose(bench.f(x, after), swapped)
    assert not np.allclose(bench.f(x, after), shc.f(x, after))


def test_optimum_is_cached_and_returned_as_a_copy():
    bench = benchmarks.get("hartmann3")
    x1, f1 = bench.optimum(100.0)
    x1[:] = -5.0
    x2, f2 = bench.optimum(100.0)
    assert f1 == f2
    assert np.all(x2 >= 0.0)
    bench.clear_cache()
    x3, f3 = bench.optimum(100.0)
    assert f3 == pytest.approx(f2, abs=1e-12)
    np.testing.assert_allclose(x3, x2, atol=1e-6)


def test_dimension_options():
    assert benchmarks.get("ackley", dim=5).dim == 5
    assert benchmarks.get("powell", dim=7).dim == 7
    assert benchmarks.get("rosenbrock", dim=4).bounds.shape == (2, 4)
    for name, dim in (("powell", 4), ("hartmann3", 3), ("shekel", 2), ("eggholder", 2)):
        with pytest.raises(ValueError, match=name):
            benchmarks.get(name, dim=dim)
    with pytest.raises(ValueError, match="dim"):
        benchmarks.get("ackley", dim=0)


def test_default_noise_and_cost():
    # BOLT Table 2 where it lists the function.
    assert benchmarks.get("powell").noise_variance == 2.5
    assert benchmarks.get("powell").cost == 1.0
    assert benchmarks.get("shekel").noise_variance == 0.02
    # Otherwise 5 % of the signal variance (1e5 samples, seed 0) and c = 0.1 s.
    bench = benchmarks.get("rastrigin")
    assert bench.cost == 0.1
    expected = 0.05 * bench.signal_variance(samples=100_000, seed=0)
    assert bench.noise_variance == pytest.approx(expected, rel=1e-12)


def test_observe_adds_seeded_gaussian_noise():
    bench = benchmarks.get("hartmann3", noise_variance=0.25)
    x, t = np.array([0.2, 0.7]), 33.0
    y1 = bench.observe(x, t, np.random.default_rng(9))
    y2 = bench.observe(x, t, np.random.default_rng(9))
    assert y1 == y2
    draws = np.array([bench.observe(x, t, np.random.default_rng(i)) for i in range(2000)])
    assert draws.mean() == pytest.approx(float(bench.f(x, t)), abs=0.05)
    assert draws.var() == pytest.approx(0.25, rel=0.1)


def test_optimum_cache_returns_the_nearest_times_first_and_restarts_when_full():
    from dynbo.benchmarks.search import OptimumCache

    cache = OptimumCache(size=4)
    assert cache.nearest(1.0, 2) == [] and cache.get(1.0) is None
    for t in (5.0, 1.0, 3.0):
        cache.put(t, np.array([t]), -t)
    assert [t for t, _ in cache.nearest(2.9, 2)] == [3.0, 1.0]
    assert cache.get(3.0)[1] == -3.0 and len(cache) == 3
    cache.put(3.0, np.array([0.0]), 0.0)  # overwriting keeps one entry per time
    assert len(cache) == 3 and [t for t, _ in cache.nearest(3.0, 5)] == [3.0, 1.0, 5.0]
    cache.put(7.0, np.array([7.0]), -7.0)
    cache.put(9.0, np.array([9.0]), -9.0)  # full: restarts with this entry only
    assert len(cache) == 1 and [t for t, _ in cache.nearest(0.0, 3)] == [9.0]


def test_dimensions_beyond_the_sobol_sequence_are_refused():
    from dynbo.acquisition.optimize import MAX_BOX_DIM
    from dynbo.benchmarks import registry

    with pytest.raises(ValueError, match=f"dim must be at most {MAX_BOX_DIM}"):
        registry.get("ackley", dim=30000)
