"""The O(n^3) Wasserstein relevancy criterion against the naive Theorem 4.1, and its updates."""

import numpy as np
import pytest
import torch

from dynbo.models import Hyperparameters, KernelSpec, SpatioTemporalGP
from dynbo.relevancy import (
    PAPER_NOISE_FLOOR,
    WassersteinRelevancy,
    convolution_matrix,
    spatial_convolution_matrix,
    temporal_convolution_matrix,
    wasserstein_relevancies,
    wasserstein_terms,
)
from dynbo.relevancy.reference import naive_relevancies, naive_wasserstein_terms

KERNELS = [
    ("matern52", "matern32"),
    ("se", "se"),
    ("matern12", "matern12"),
    ("matern32", "matern52"),
    ("se", "matern12"),
]
# 80-bit long double on x86: the naive evaluation is then accurate on every criterion.
EXTENDED = np.finfo(np.longdouble).eps < 1e-18


def make_gp(
    n,
    d=2,
    spatial="matern52",
    temporal="matern32",
    *,
    seed=0,
    noise=1e-2,
    ard=False,
    span=10.0,
    dtype=torch.float64,
):
    rng = np.random.default_rng(seed)
    kernel = KernelSpec(dim=d, spatial=spatial, temporal=temporal, ard=ard)
    ls = tuple(rng.uniform(0.15, 0.5, d)) if ard else (0.3,)
    hyper = Hyperparameters(
        outputscale=1.7, lengthscale_space=ls, lengthscale_time=2.0, noise=noise
    )
    gp = SpatioTemporalGP(kernel, hyper, dtype=dtype)
    x = rng.random((n, d))
    t = np.sort(rng.uniform(0, span, n))
    y = np.sin(3 * x.sum(1)) + np.cos(t) + 0.1 * rng.standard_normal(n)
    gp.set_data(torch.tensor(np.c_[x, t], dtype=dtype), torch.tensor(y, dtype=dtype))
    return gp


def dense_delta(gp):
    z = gp.inputs
    n = gp.n
    eye = torch.eye(n, dtype=z.dtype)
    return (gp.covariance(z, z) + torch.diag(gp.noise_variances) + gp.jitter * eye).numpy()


def naive(gp, rel, dtype=np.float64):
    return naive_wasserstein_terms(
        dense_delta(gp),
        gp.standardized_targets.numpy(),
        rel.convolutions.numpy(),
        gp.hyperparameters.outputscale,
        dtype=dtype,
    )


def rel_err(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.abs(a - b) / np.abs(b)


# ----------------------------------------------------------------------------- vs Theorem 4.1
@pytest.mark.parametrize("spatial,temporal", KERNELS)
@pytest.mark.parametrize("n", [2, 9, 33])
def test_fast_criterion_equals_naive_theorem_float64(spatial, temporal, n):
    gp = make_gp(n, 2, spatial, temporal, seed=n)
    rel = WassersteinRelevancy.from_gp(gp, 10.5)
    squared = rel.squared_distances().numpy()
    naive_squared, naive_norm = naive(gp, rel)
    # The naive eq. (10) sums three nearly cancelling terms, so in float64 it is
    # accurate to 1e-10 relative only where W_i^2 is not tiny; elsewhere compare on
    # the scale of the largest W_i^2.
    big = naive_squared > 1e-3 * naive_squared.max()
    assert rel_err(squared[big], naive_squared[big]).max() < 1e-10
    assert np.abs(squared - naive_squared).max() < 1e-12 * naive_squared.max()
    assert float(rel.squared_normalizer()) == pytest.approx(float(naive_norm), rel=1e-12)
    naive_r = naive_relevancies(
        dense_delta(gp), gp.standardized_targets.numpy(), rel.convolutions.numpy(), 1.7
    )
    assert rel_err(rel.relevancies().numpy()[big], naive_r[big]).max() < 1e-10


@pytest.mark.parametrize("spatial,temporal", KERNELS[:4])
def test_fast_criterion_equals_naive_theorem_elementwise(spatial, temporal):
    # n = 60 over 10 temporal lengthscales, with extended precision on the naive side.
    # The fast float64 values carry an absolute error of ~1e-15 of the largest W_i^2 on
    # the largest ones and ~1e-18 on the smallest (measured), hence 1e-10 relative down
    # to W_i^2 = 1e-7 max (R_i = 3e-4 R_max).
    gp = make_gp(60, 2, spatial, temporal, seed=7, span=20.0)
    rel = WassersteinRelevancy.from_gp(gp, 20.5)
    naive_squared, naive_norm = naive(gp, rel, dtype=np.longdouble)
    squared = rel.squared_distances().numpy()
    top = float(naive_squared.max())
    assert squared.min() < 1e-8 * top  # the dataset has stale observations
    assert float(rel.squared_normalizer()) == pytest.approx(float(naive_norm), rel=1e-12)
    if EXTENDED:
        big = naive_squared > 1e-7 * top
        assert rel_err(squared[big], naive_squared[big]).max() < 1e-10
        assert float(np.abs(squared - naive_squared).max()) < 1e-14 * top
        naive_r = np.sqrt(naive_squared / naive_norm)
        assert rel_err(rel.relevancies().numpy()[big], naive_r[big]).max() < 1e-10
    else:  # long double is double here: only the float64 cancellation-limited check
        assert float(np.abs(squared - naive_squared).max()) < 1e-12 * top


def test_ard_kernel_and_three_dimensions():
    gp = make_gp(25, 3, "matern52", "se", seed=3, ard=True)
    rel = WassersteinRelevancy.from_gp(gp, 11.0)
    naive_squared, naive_norm = naive(gp, rel, dtype=np.longdouble)
    tol = 1e-10 if EXTENDED else 1e-6
    assert rel_err(rel.squared_distances().numpy(), naive_squared).max() < tol
    # C uses the ARD lengthscales.
    ls = list(gp.hyperparameters.lengthscale_space)
    z = gp.inputs
    expected = spatial_convolution_matrix("matern52", z[:, :3], z[:, :3], ls) * (
        temporal_convolution_matrix("se", z[:, 3], 2.0, 11.0)
    )
    torch.testing.assert_close(rel.convolutions, expected, rtol=1e-14, atol=0)


def test_observation_after_the_present_time():
    # A look-ahead policy may hold observations later than t0: C is the exact integral
    # over [t0, inf) and the criterion stays the Theorem 4.1 value.
    gp = make_gp(20, 2, "matern52", "matern32", seed=4)
    t0 = float(gp.inputs[-3, 2])  # the last two observations are after t0
    rel = WassersteinRelevancy.from_gp(gp, t0)
    r = rel.relevancies()
    assert torch.isfinite(r).all() and (r >= 0).all()
    naive_squared, _ = naive(gp, rel, dtype=np.longdouble)
    tol = 1e-10 if EXTENDED else 1e-6
    assert rel_err(rel.squared_distances().numpy(), naive_squared).max() < tol


def test_normalized_criterion_definition_and_small_cases():
    gp = make_gp(12, 2, seed=5)
    rel = WassersteinRelevancy.from_gp(gp, 10.0)
    r = rel.relevancies()
    expected = (rel.squared_distances() / rel.squared_normalizer()).sqrt()
    torch.testing.assert_close(r, expected, rtol=1e-15, atol=0)
    i, value = rel.least_relevant()
    assert i == int(torch.argmin(rel.squared_distances())) and value == float(r.min())
    # One observation: removing it is removing everything, R = 1.
    one = make_gp(1, 2, seed=6)
    torch.testing.assert_close(
        wasserstein_relevancies(one, 10.0), torch.ones(1, dtype=torch.float64)
    )
    empty = torch.zeros(0, 0, dtype=torch.float64)
    squared, normalizer = wasserstein_terms(empty, torch.zeros(0, dtype=torch.float64), empty, 1.0)
    assert squared.shape == (0,) and float(normalizer) == 0.0


def test_functional_api_matches_class():
    gp = make_gp(15, 2, "matern32", "matern12", seed=8)
    rel = WassersteinRelevancy.from_gp(gp, 10.2)
    conv = convolution_matrix(
        gp.inputs,
        spatial="matern32",
        temporal="matern12",
        lengthscale_space=[0.3],
        lengthscale_time=2.0,
        present_time=10.2,
    )
    torch.testing.assert_close(conv, rel.convolutions, rtol=0, atol=0)
    precision = torch.cholesky_inverse(gp.cholesky_factor)
    squared, normalizer = wasserstein_terms(precision, gp.alpha, conv, 1.7)
    torch.testing.assert_close(squared, rel.squared_distances(), rtol=1e-12, atol=0)
    torch.testing.assert_close(normalizer, rel.squared_normalizer(), rtol=1e-13, atol=0)
    explicit = WassersteinRelevancy(precision, gp.alpha, conv, 1.7)
    torch.testing.assert_close(explicit.relevancies(), rel.relevancies(), rtol=1e-12, atol=0)
    torch.testing.assert_close(rel.precision, precision, rtol=1e-15, atol=0)


# ----------------------------------------------------------------------------- removals
def assert_matches_fresh(rel, fresh, tol=1e-10):
    for name in ("precision", "alpha", "convolutions", "product"):
        a, b = getattr(rel, name), getattr(fresh, name)
        assert float((a - b).abs().max() / b.abs().max()) < tol, name
    torch.testing.assert_close(rel.relevancies(), fresh.relevancies(), rtol=tol, atol=0)
    torch.testing.assert_close(
        rel.squared_normalizer(), fresh.squared_normalizer(), rtol=tol, atol=0
    )


@pytest.mark.parametrize("spatial,temporal", KERNELS[:3])
def test_rank_one_removals_equal_fresh_computation(spatial, temporal):
    gp = make_gp(50, 2, spatial, temporal, seed=9)
    t0 = 10.3
    rel = WassersteinRelevancy.from_gp(gp, t0)
    rng = np.random.default_rng(10)
    kept = list(range(50))
    for step in range(30):  # past half of the storage: the compaction path runs too
        if step % 3 == 0:
            i, _ = rel.least_relevant()
        elif step % 3 == 1:
            i = int(rng.integers(rel.n))
        else:
            i = 0 if step % 2 else rel.n - 1
        rel.remove(i)
        gp.remove(i)
        del kept[i]
        if step in (0, 1, 9, 24, 29):
            assert_matches_fresh(rel, WassersteinRelevancy.from_gp(gp, t0))
    assert rel.n == gp.n == 20
    assert rel.indices.tolist() == kept


def test_removal_down_to_one_observation():
    gp = make_gp(6, 2, seed=11)
    rel = WassersteinRelevancy.from_gp(gp, 10.0)
    while rel.n > 1:
        i, _ = rel.least_relevant()
        rel.remove(i)
        gp.remove(i)
    torch.testing.assert_close(rel.relevancies(), torch.ones(1, dtype=torch.float64))
    rel.remove(0)
    assert rel.n == 0 and rel.relevancies().numel() == 0
    with pytest.raises(IndexError):
        rel.remove(0)


def test_removal_keeps_standardized_targets():
    # alpha after removals is Delta_{D'}^{-1} y_std with the original standardization.
    gp = make_gp(30, 2, seed=12)
    rel = WassersteinRelevancy.from_gp(gp, 10.0)
    y = gp.standardized_targets
    for i in (4, 17, 0):
        rel.remove(i)
        y = torch.cat([y[:i], y[i + 1 :]])
    expected = torch.linalg.solve(torch.linalg.inv(rel.precision), y)
    torch.testing.assert_close(rel.alpha, expected, rtol=1e-10, atol=1e-12)


# ----------------------------------------------------------------------------- paper_compat
def test_paper_compat_noise_floor_and_convolution_quirks():
    gp = make_gp(20, 1, "se", "se", seed=13, noise=1e-8)
    rel = WassersteinRelevancy.from_gp(gp, 10.0, paper_compat=True)
    z = gp.inputs
    delta = gp.covariance(z, z) + PAPER_NOISE_FLOOR * torch.eye(gp.n, dtype=z.dtype)
    torch.testing.assert_close(rel.precision, torch.linalg.inv(delta), rtol=1e-9, atol=1e-9)
    conv = convolution_matrix(
        z,
        spatial="se",
        temporal="se",
        lengthscale_space=[0.3],
        lengthscale_time=2.0,
        present_time=10.0,
        paper_compat=True,
    )
    torch.testing.assert_close(rel.convolutions, conv, rtol=0, atol=0)
    correct = WassersteinRelevancy.from_gp(gp, 10.0)
    assert float((rel.relevancies() - correct.relevancies()).abs().max()) > 1e-3


# ----------------------------------------------------------------------------- misc
def test_float32_gp():
    gp64 = make_gp(20, 2, seed=14)
    gp32 = make_gp(20, 2, seed=14, dtype=torch.float32)
    r32 = WassersteinRelevancy.from_gp(gp32, 10.0).relevancies()
    r64 = WassersteinRelevancy.from_gp(gp64, 10.0).relevancies()
    assert r32.dtype == torch.float32
    big = r64 > 1e-2 * r64.max()
    torch.testing.assert_close(r32.double()[big], r64[big], rtol=1e-3, atol=0)


def test_needs_a_temporal_kernel_and_valid_indices():
    gp = SpatioTemporalGP(KernelSpec(dim=2, temporal=None), Hyperparameters())
    gp.set_data(torch.rand(4, 2, dtype=torch.float64), torch.rand(4, dtype=torch.float64))
    with pytest.raises(ValueError):
        WassersteinRelevancy.from_gp(gp, 1.0)
    rel = WassersteinRelevancy.from_gp(make_gp(5, 2), 10.0)
    for bad in (-1, 5, True, 1.0):
        with pytest.raises(IndexError):
            rel.remove(bad)
    with pytest.raises(ValueError):
        WassersteinRelevancy(torch.eye(3), torch.zeros(2), torch.eye(3), 1.0)
