"""GP Markov-chain functions (Bogunovic eqs. 3-4) and W-SparQ's drifting RKHS function."""

import functools
import math

import numpy as np
import pytest

import dynbo.benchmarks as benchmarks
from dynbo.benchmarks.markov import BLOCK_STEPS, MarkovChainGP, grid_points
from dynbo.kernels import correlation_np

# ---------------------------------------------------------------------- Markov chain


@functools.lru_cache(maxsize=8)
def _seeds_matrix(kernel, epsilon, seeds, steps, points, grid_size):
    out = np.empty((seeds, steps, len(points)))
    for seed in range(seeds):
        bench = MarkovChainGP(kernel, epsilon=epsilon, seed=seed, grid_size=grid_size)
        for step in range(steps):
            out[seed, step] = bench.grid_values(step)[list(points)]
    out.setflags(write=False)
    return out


def seeds_matrix(kernel, epsilon, seeds, steps, points, grid_size=10):
    """``(seeds, steps, len(points))`` values of many realizations on a small grid (cached
    across tests: each realization costs a block of draws)."""
    return _seeds_matrix(kernel, epsilon, seeds, steps, tuple(points), grid_size)


# Four grid points of a 10 x 10 grid, far apart (corners): nearly independent samples.
CORNERS = [0, 9, 90, 99]


@pytest.mark.parametrize("kernel", ["se", "matern52"])
def test_markov_marginal_variance_is_one_at_every_step(kernel):
    values = seeds_matrix(kernel, 0.05, seeds=1500, steps=40, points=CORNERS)
    variances = values.var(axis=0).mean(axis=1)  # over seeds, pooled over the corners
    # 6000 nearly independent draws per step: the estimate's sd is about 0.02.
    np.testing.assert_allclose(variances, 1.0, atol=0.1)
    assert abs(values.mean()) < 0.05


@pytest.mark.parametrize("gap", [1, 5, 20, 39])
def test_markov_correlation_between_steps(gap):
    epsilon = 0.05
    values = seeds_matrix("se", epsilon, seeds=1500, steps=40, points=CORNERS)
    first, later = values[:, 0, :].ravel(), values[:, gap, :].ravel()
    correlation = np.corrcoef(first, later)[0, 1]
    assert correlation == pytest.approx((1 - epsilon) ** (gap / 2), abs=0.04)


def test_markov_spatial_correlation_is_the_kernel():
    # Points (0, 0) and (0, 2/9) of the 10 x 10 grid: distance 0.222, l = 0.2.
    for kernel in ("se", "matern52"):
        values = seeds_matrix(kernel, 0.03, seeds=1500, steps=1, points=[0, 2])[:, 0, :]
        expected = float(correlation_np(kernel, np.array((2 / 9) / 0.2)))
        assert np.corrcoef(values[:, 0], values[:, 1])[0, 1] == pytest.approx(expected, abs=0.05)


def test_markov_same_seed_same_function_whatever_the_access_order():
    a = MarkovChainGP("matern52", epsilon=0.01, seed=7, grid_size=12)
    b = MarkovChainGP("matern52", epsilon=0.01, seed=7, grid_size=12)
    late = 3 * BLOCK_STEPS + 5
    first_a = a.grid_values(late)
    early_b = b.grid_values(2)
    np.testing.assert_array_equal(first_a, b.grid_values(late))
    np.testing.assert_array_equal(early_b, a.grid_values(2))
    other = MarkovChainGP("matern52", epsilon=0.01, seed=8, grid_size=12)
    assert not np.allclose(other.grid_values(2), early_b)


def test_markov_recursion_extremes():
    frozen = MarkovChainGP("se", epsilon=0.0, seed=1, grid_size=8)
    np.testing.assert_allclose(frozen.grid_values(0), frozen.grid_values(50))
    fresh = seeds_matrix("se", 1.0, seeds=800, steps=2, points=CORNERS)
    assert abs(np.corrcoef(fresh[:, 0].ravel(), fresh[:, 1].ravel())[0, 1]) < 0.06


def test_markov_full_grid_benchmark():
    bench = benchmarks.get("markov", kernel="se", epsilon=0.03, seed=3)
    assert bench.time_unit == "step" and bench.horizon == 200 and bench.noise_variance == 0.01
    assert bench.candidates.shape == (2500, 2)
    np.testing.assert_allclose(bench.candidates, grid_points(50))
    rng = np.random.default_rng(0)
    values = np.array([bench.grid_values(t) for t in range(0, 200, 10)])
    # Spatial and temporal average of f^2: a loose check of the unit variance.
    assert np.mean(values**2) == pytest.approx(1.0, abs=0.45)
    for t in (0, 17.9, 199):
        x_star, f_star = bench.optimum(t)
        grid = bench.grid_values(t)
        assert f_star == grid.max()
        assert bench.f(x_star, t) == f_star
        x = rng.uniform(0, 1, size=(1000, 2))
        assert np.all(f_star - bench.f(x, t) >= 0.0)


def test_markov_time_and_off_grid_conventions():
    bench = MarkovChainGP("se", epsilon=0.03, seed=2, grid_size=11)
    x = np.array([[0.31, 0.69], [0.04, 0.96]])
    # floor(t) selects the version.
    np.testing.assert_array_equal(bench.f(x, 3.7), bench.f(x, 3.0))
    assert not np.allclose(bench.f(x, 3.0), bench.f(x, 4.0))
    # Off-grid points take the value of the nearest grid point (spacing 0.1).
    np.testing.assert_array_equal(bench.f(x, 5), bench.f(np.array([[0.3, 0.7], [0.0, 1.0]]), 5))
    np.testing.assert_array_equal(
        bench.f(x, np.array([2, 9])), [bench.f(x[0], 2), bench.f(x[1], 9)]
    )
    with pytest.raises(ValueError, match=">= 0"):
        bench.f(x, -1.0)
    with pytest.raises(ValueError, match="kernel"):
        MarkovChainGP("matern32")
    with pytest.raises(ValueError, match="epsilon"):
        MarkovChainGP("se", epsilon=1.5)


# ---------------------------------------------------------------------- RKHS


def test_rkhs_definition_matches_the_paper():
    bench = benchmarks.get("rkhs")
    assert (bench.dim, bench.horizon, bench.time_unit) == (1, 500, "step")
    np.testing.assert_allclose(bench.bounds, [[-50.0], [50.0]])
    np.testing.assert_allclose(
        bench.kernel(np.array([1.0]), np.array([1.0, 4.0])), [[0.5, 0.5 * math.exp(-0.5)]]
    )
    x = np.linspace(-50, 50, 7)[:, None]
    for t in (0, 1, 37, 500):
        a = bench.coefficients(t)
        by_hand = [
            sum(a[i] * 0.5 * math.exp(-((p - c) ** 2) / 18) for i, c in enumerate(bench.centres))
            for p in x[:, 0]
        ]
        np.testing.assert_allclose(bench.f(x, t), by_hand, rtol=1e-12)
        u = np.sin(0.3 * t + np.arange(1, 21))
        np.testing.assert_allclose(a / np.linalg.norm(a), u / np.linalg.norm(u), rtol=1e-12)


def test_rkhs_normalizations():
    exact = benchmarks.get("rkhs")
    literal = benchmarks.get("rkhs", normalization="literal")
    for t in range(0, 500, 23):
        assert exact.rkhs_norm(t) == pytest.approx(5.0, rel=1e-12)
        u = np.sin(0.3 * t + np.arange(1, 21))
        np.testing.assert_allclose(
            literal.coefficients(t), 5.0 / literal.lambda_max * u / np.linalg.norm(u)
        )
        assert literal.rkhs_norm(t) <= 5.0 / math.sqrt(literal.lambda_max) + 1e-12
    # With 20 centres lambda_max < 1, so the literal construction exceeds the norm 5.
    assert literal.lambda_max < 1.0
    assert max(literal.rkhs_norm(t) for t in range(50)) > 5.0
    with pytest.raises(ValueError, match="normalization"):
        benchmarks.get("rkhs", normalization="unit")


def test_rkhs_optimum_against_a_dense_grid_and_random_queries():
    bench = benchmarks.get("rkhs", n_centres=12)
    rng = np.random.default_rng(0)
    grid = np.linspace(-50, 50, 100_001)[:, None]
    for t in [0, 1, 250, 499] + list(rng.integers(0, 500, size=6)):
        x_star, f_star = bench.optimum(t)
        assert bench.f(x_star, t) == pytest.approx(f_star, abs=1e-14)
        assert f_star >= np.max(bench.f(grid, np.full(len(grid), t))) - 1e-12
        x = rng.uniform(-50, 50, size=(1000, 1))
        assert np.all(f_star - bench.f(x, t) >= -1e-12)


def test_rkhs_grid_option_is_the_feasible_set_and_its_best_point_the_optimum():
    from dynbo.benchmarks.rkhs import DriftingRKHS

    bench = DriftingRKHS(grid_points=101)
    assert bench.candidates.shape == (101, 1)
    assert bench.candidates[0, 0] == -50.0 and bench.candidates[-1, 0] == 50.0
    for t in (1.0, 17.0, 250.0):
        x, value = bench.optimum(t)
        values = bench.f(bench.candidates, t)
        assert value == pytest.approx(values.max(), abs=1e-12)
        assert x[0] in bench.candidates[:, 0]
        # the interval's optimum is at least as high
        assert DriftingRKHS().optimum(t)[1] >= value - 1e-12
    for bad in (1, 2.5, True):
        with pytest.raises(ValueError, match="grid_points"):
            DriftingRKHS(grid_points=bad)
