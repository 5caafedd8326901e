"""BOLT's regret bounds (Bardou & Thiran 2025, Theorem 3.6 and 3.8) and its theory figures."""

import math

import numpy as np
import pytest
import scipy.integrate
import scipy.stats

from dynbo.kernels import correlation_np, spectral_density
from dynbo.theory import (
    ResponseTimeModel,
    log_lower_bound_slope,
    log_spectral_tail,
    lower_bound_slope,
    spectral_tail,
    upper_bound_beta,
    upper_bound_regret,
)

FAMILIES = ["se", "matern12", "matern32", "matern52"]
NU = {"matern12": 0.5, "matern32": 1.5, "matern52": 2.5}


def quadrature_tail(family, lengthscale, x):
    """``2 int_x^inf S_T(z) dz`` by adaptive quadrature of the spectral density."""
    value, _ = scipy.integrate.quad(
        lambda z: spectral_density(family, z, lengthscale),
        x,
        np.inf,
        epsabs=0.0,
        epsrel=1e-13,
        limit=200,
    )
    return 2.0 * value


# ------------------------------------------------------------------------ spectral tail


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("lengthscale", [0.3, 1.0, 5.0])
@pytest.mark.parametrize("x", [0.0, 0.01, 0.2, 1.0, 3.0])
def test_spectral_tail_matches_quadrature(family, lengthscale, x):
    expected = quadrature_tail(family, lengthscale, x)
    assert spectral_tail(family, lengthscale, x) == pytest.approx(expected, rel=1e-8, abs=0)
    assert math.exp(log_spectral_tail(family, lengthscale, x)) == pytest.approx(
        expected, rel=1e-8, abs=0
    )


@pytest.mark.parametrize("family", FAMILIES)
def test_spectral_tail_is_one_at_zero_and_vectorized(family):
    f = np.array([[0.0, 0.1], [1.0, 2.0]])
    tail = spectral_tail(family, 1.0, f)
    assert tail.shape == (2, 2) and tail[0, 0] == pytest.approx(1.0, abs=1e-15)
    assert np.all(np.diff(tail.ravel()) < 0)
    np.testing.assert_allclose(np.exp(log_spectral_tail(family, 1.0, f)), tail, rtol=1e-12)
    assert isinstance(spectral_tail(family, 1.0, 0.5), float)


def test_the_tail_keeps_its_relative_accuracy_where_one_minus_f_would_cancel():
    # SE at x = 1 with l = 5: the tail is about 1e-216, far below the resolution of 1 - F
    se = quadrature_tail("se", 5.0, 1.0)
    assert se < 1e-200
    assert spectral_tail("se", 5.0, 1.0) == pytest.approx(se, rel=1e-8)


def mp_tail(family, lengthscale, x):
    mp = pytest.importorskip("mpmath")
    x, l = mp.mpf(x), mp.mpf(lengthscale)
    if family == "se":
        return mp.erfc(mp.sqrt(2) * mp.pi * l * x)
    nu = mp.mpf(NU[family])
    a = mp.sqrt(2 * nu) / l
    u = 2 * mp.pi * x
    return mp.betainc(nu, mp.mpf(1) / 2, 0, a**2 / (a**2 + u**2), regularized=True)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("x", [1e-8, 1e-3, 10.0, 1e3, 1e7, 1e50])
def test_log_spectral_tail_far_beyond_underflow(family, x):
    mp = pytest.importorskip("mpmath")
    with mp.workdps(60):
        expected = float(mp.log(mp_tail(family, 1.0, x)))
    got = log_spectral_tail(family, 1.0, x)
    assert got == pytest.approx(expected, rel=1e-12, abs=0)
    if expected < -745:
        assert spectral_tail(family, 1.0, x) == 0.0  # the plain tail underflows


# ---------------------------------------------------------------- lower-bound slope


def mp_log_slope(cost, family, *, lengthscale_time=1.0, spatial="matern52", lam=1.0, lip=1.0, d=4):
    """``log(eps_c)`` of eq. 4-5 in high precision, with the plain formula (no rewriting)."""
    mp = pytest.importorskip("mpmath")
    with mp.workdps(60):
        k_s = mp.mpf(float(correlation_np(spatial, math.sqrt(d))))
        tail = mp_tail(family, lengthscale_time, mp.mpf(1) / (2 * mp.mpf(cost)))
        sigma = mp.sqrt(2 * mp.mpf(lam) * (1 + k_s) * tail)
        scale = mp.mpf(lip) * mp.sqrt(d)
        a = scale / sigma
        # the difference cancels to about 1/A^2 of its terms: enough digits for that
        with mp.workdps(60 + int(4 * mp.log10(a + 1))):
            eps = sigma * mp.npdf(-a) - scale * mp.ncdf(-a)
            return float(mp.log(eps)), float(a)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("frequency", [0.01, 0.1, 0.5, 1.0, 3.0])
def test_lower_bound_slope_matches_high_precision(family, frequency):
    expected, _ = mp_log_slope(1.0 / frequency, family)
    got = log_lower_bound_slope(1.0 / frequency, temporal=family, lengthscale_time=1.0, dim=4)
    # 1e-8 relative on eps_c is 1e-8 absolute on log(eps_c); once |log eps_c| is large
    # the inputs' own rounding (relative 1e-16 on sigma_c, amplified by A^2) dominates
    assert got == pytest.approx(expected, abs=1e-8, rel=1e-13)
    if expected > -700:
        eps = lower_bound_slope(1.0 / frequency, temporal=family, lengthscale_time=1.0, dim=4)
        assert eps == pytest.approx(math.exp(expected), rel=1e-8)


def outputscale_for(a_target, family, cost=1.0, d=4):
    """``lambda`` that makes ``A = L sqrt(d) / sigma_c`` equal ``a_target`` (L = 1)."""
    k_s = float(correlation_np("matern52", math.sqrt(d)))
    tail = spectral_tail(family, 1.0, 0.5 / cost)
    return (math.sqrt(d) / a_target) ** 2 / (2.0 * (1.0 + k_s) * tail)


@pytest.mark.parametrize(
    "a_target", [0.05, 1.0, 5.0, 9.999, 10.001, 20.0, 37.0, 38.5, 100.0, 1e3, 1e6]
)
def test_slope_across_the_cancellation_regimes(a_target):
    # phi(A) - A Phi(-A) cancels to ~1/A^2 of its terms: direct form below A = 10, the
    # asymptotic series above; at A = 37 eps_c is ~1e-301, at 38.5 subnormal, beyond
    # that only its log is a double
    lam = outputscale_for(a_target, "matern32")
    expected, a = mp_log_slope(1.0, "matern32", lam=lam)
    assert a == pytest.approx(a_target, rel=1e-12)
    got = log_lower_bound_slope(
        1.0, temporal="matern32", lengthscale_time=1.0, outputscale=lam, dim=4
    )
    assert got == pytest.approx(expected, abs=1e-8, rel=1e-12)
    eps = lower_bound_slope(1.0, temporal="matern32", lengthscale_time=1.0, outputscale=lam, dim=4)
    if expected > math.log(np.finfo(float).tiny):
        assert eps == pytest.approx(math.exp(expected), rel=1e-8)
    elif expected > math.log(5e-324):
        assert eps > 0.0  # subnormal, but not flushed to zero


def test_naive_formula_agrees_where_it_does_not_cancel_and_fails_where_it_does():
    def naive(lam):
        k_s = float(correlation_np("matern52", 2.0))
        sigma = math.sqrt(2 * lam * (1 + k_s) * spectral_tail("se", 1.0, 0.5))
        a = 2.0 / sigma
        return sigma * scipy.stats.norm.pdf(-a) - 2.0 * scipy.stats.norm.cdf(-a)

    for lam in (0.3, 1.0, 30.0):  # A between 0.04 and 2: no cancellation
        got = lower_bound_slope(1.0, temporal="se", lengthscale_time=1.0, outputscale=lam, dim=4)
        assert got == pytest.approx(naive(lam), rel=1e-12)
    lam = outputscale_for(1e3, "se")
    assert naive(lam) <= 0.0  # underflow and cancellation: 0 - 0
    assert np.isfinite(
        log_lower_bound_slope(1.0, temporal="se", lengthscale_time=1.0, outputscale=lam, dim=4)
    )


def test_slope_is_vectorized_and_decreases_with_the_sampling_frequency():
    f = np.logspace(-2, 2, 50)
    for family in FAMILIES:
        log_eps = log_lower_bound_slope(1.0 / f, temporal=family, lengthscale_time=1.0, dim=4)
        assert log_eps.shape == f.shape
        finite = np.isfinite(log_eps)
        assert finite[:20].all() and np.all(np.diff(log_eps[finite]) < 0)
    # smoother kernels fall faster (BOLT Fig. 1)
    at = [
        log_lower_bound_slope(0.5, temporal=fam, lengthscale_time=1.0, dim=4)
        for fam in ("matern12", "matern32", "matern52", "se")
    ]
    assert at == sorted(at, reverse=True)


# ------------------------------------------------------------------------ upper bound


def test_upper_bound_matches_a_hand_computation():
    # T = 4, n = 2, R(2) = 1 s, SE k_T with l_T = 1: u = (e^-1/2, e^-2), ||u||^2 = e^-1 + e^-4
    # k_S = Matern-1/2 with l_S = 1, d = 1: k_S(1) = e^-1; lambda = 1, sigma_0^2 = 1
    utility = math.exp(-1) + math.exp(-4)
    inner = 4 - 1 * math.exp(-2) / (1 + 1) * utility
    expected = 2 + math.sqrt(4 * 1 * 2.0 * 4 * inner)
    got = upper_bound_regret(
        4,
        2,
        lambda n: 1.0,
        temporal="se",
        lengthscale_time=1.0,
        spatial="matern12",
        noise_variance=1.0,
        dim=1,
        beta=2.0,
    )
    assert got == pytest.approx(expected, rel=1e-14)


def test_upper_bound_default_beta_is_eq_63_at_the_horizon():
    beta = upper_bound_beta(50, dim=2, lipschitz=3.0, delta=0.1)
    assert beta == pytest.approx(2 * 2 * math.log(3 * 2 * 50**2 / 0.6) + 4 * math.log(math.pi * 50))
    model = ResponseTimeModel((0.05, 0.0, 0.0, 2e-7))
    common = dict(
        temporal="matern32",
        lengthscale_time=60.0,
        noise_variance=0.01,
        outputscale=2.0,
        lipschitz=3.0,
        dim=2,
        delta=0.1,
    )
    assert upper_bound_regret(50, 20, model, **common) == pytest.approx(
        upper_bound_regret(50, 20, model, beta=beta, **common), rel=1e-14
    )
    # a larger useful dataset tightens the bound, never beyond the trivial sqrt(4 l b T^2)
    bound = upper_bound_regret(50, 20, model, **common)
    assert bound < 2 + math.sqrt(4 * 2.0 * beta * 50 * 50)


# ---------------------------------------------------------------------- bad arguments


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: spectral_tail("cosine", 1.0, 0.1), "family"),
        (lambda: spectral_tail("se", 0.0, 0.1), "lengthscale"),
        (lambda: spectral_tail("se", -1.0, 0.1), "lengthscale"),
        (lambda: spectral_tail("se", 1.0, -0.1), "frequency"),
        (lambda: log_spectral_tail("matern32", 1.0, np.inf), "frequency"),
        (lambda: lower_bound_slope(0.0, temporal="se", lengthscale_time=1.0, dim=4), "cost"),
        (
            lambda: lower_bound_slope([1.0, -1.0], temporal="se", lengthscale_time=1.0, dim=4),
            "cost",
        ),
        (lambda: lower_bound_slope(1.0, temporal="foo", lengthscale_time=1.0, dim=4), "temporal"),
        (
            lambda: lower_bound_slope(
                1.0, temporal="se", lengthscale_time=1.0, spatial="foo", dim=4
            ),
            "spatial",
        ),
        (
            lambda: lower_bound_slope(1.0, temporal="se", lengthscale_time=0.0, dim=4),
            "lengthscale_time",
        ),
        (
            lambda: lower_bound_slope(
                1.0, temporal="se", lengthscale_time=1.0, lengthscale_space=-2, dim=4
            ),
            "lengthscale_space",
        ),
        (
            lambda: lower_bound_slope(
                1.0, temporal="se", lengthscale_time=1.0, outputscale=0, dim=4
            ),
            "outputscale",
        ),
        (
            lambda: lower_bound_slope(
                1.0, temporal="se", lengthscale_time=1.0, lipschitz=-1, dim=4
            ),
            "lipschitz",
        ),
        (lambda: lower_bound_slope(1.0, temporal="se", lengthscale_time=1.0, dim=0), "dim"),
        (lambda: log_lower_bound_slope(np.nan, temporal="se", lengthscale_time=1.0, dim=4), "cost"),
        (lambda: upper_bound_beta(0, dim=1, lipschitz=1.0, delta=0.1), "n"),
        (lambda: upper_bound_beta(5, dim=1, lipschitz=1.0, delta=1.5), "delta"),
        (
            lambda: upper_bound_regret(
                3, 5, lambda n: 1.0, temporal="se", lengthscale_time=1.0, noise_variance=0.1, dim=1
            ),
            "horizon",
        ),
        (
            lambda: upper_bound_regret(
                5, 0, lambda n: 1.0, temporal="se", lengthscale_time=1.0, noise_variance=0.1, dim=1
            ),
            "dataset_size",
        ),
        (
            lambda: upper_bound_regret(
                5, 2, lambda n: 1.0, temporal="se", lengthscale_time=1.0, noise_variance=-0.1, dim=1
            ),
            "noise_variance",
        ),
        (
            lambda: upper_bound_regret(
                5, 2, lambda n: -1.0, temporal="se", lengthscale_time=1.0, noise_variance=0.1, dim=1
            ),
            "response_time",
        ),
        (
            lambda: upper_bound_regret(
                5,
                2,
                lambda n: 1.0,
                temporal="se",
                lengthscale_time=1.0,
                noise_variance=0.1,
                dim=1,
                beta=-1.0,
            ),
            "beta",
        ),
        (
            lambda: upper_bound_regret(
                5,
                2,
                lambda n: 1.0,
                temporal="se",
                lengthscale_time=1.0,
                noise_variance=0.1,
                dim=1,
                lipschitz=1e-4,
                delta=0.9,
            ),
            "beta",
        ),
    ],
)
def test_bad_arguments_raise_value_errors_naming_them(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# -------------------------------------------------------------------------- figures


def assert_png(path, size):
    from PIL import Image

    with Image.open(path) as image:
        image.load()
        assert image.format == "PNG"
        assert image.size == size
        low, high = image.convert("L").getextrema()
    assert high - low > 100  # ink on the page


def test_both_theory_figures_render(tmp_path):
    from dynbo.report.theory_figures import DPI, FIGSIZE, lower_bound_figure, utility_figure

    size = (round(FIGSIZE[0] * DPI), round(FIGSIZE[1] * DPI))
    first = lower_bound_figure(tmp_path / "fig1.png")
    second = utility_figure(tmp_path / "sub" / "fig2.png", max_size=200)
    assert first == tmp_path / "fig1.png" and second == tmp_path / "sub" / "fig2.png"
    assert_png(first, size)
    assert_png(second, size)


def test_cli_theory_writes_both_figures(tmp_path, capsys):
    from dynbo.cli import main

    assert main(["theory", "--out", str(tmp_path / "theory")]) == 0
    printed = capsys.readouterr().out.split()
    written = sorted((tmp_path / "theory").glob("*.png"))
    assert len(written) == 2 and sorted(printed) == [str(p) for p in written]
