"""Closed-form kernel self-convolutions (dynbo.relevancy.convolutions) against quadrature.

The reference integrals are computed here with scipy.integrate from kernel formulas
written out independently of dynbo.kernels (one test checks that both agree):

* spatial, d = 1: the convolution integral itself on R;
* spatial, d >= 2: for radial f, g and x = r e_1, with u = rho * (cos phi, sin phi w)
  and s = |x - u| (so cos phi = (rho^2 + r^2 - s^2) / (2 rho r)),

      (f * g)(r) = |S^{d-2}| int_0^inf rho^(d-1) f(rho)
                   int_{|rho-r|}^{rho+r} g(s) s sin(phi)^(d-3) / (rho r) ds drho,

  sin(phi) = sqrt((rho+r-s)(rho+r+s)(s-|rho-r|)(s+|rho-r|)) / (2 rho r); the endpoint
  factors (s - |rho-r|)^((d-3)/2) (rho+r-s)^((d-3)/2) go to QUADPACK's algebraic weight;
  at r = 0 it is |S^{d-1}| int rho^(d-1) f(rho)^2 drho;
* temporal: int_{t0}^inf k(|t - t_i|) k(|t - t_j|) dt with breakpoints at the t_i > t0.
"""

import math

import numpy as np
import pytest
import scipy.special as sp
import torch
from scipy import integrate

from dynbo.kernels import correlation
from dynbo.relevancy import convolutions as conv
from dynbo.relevancy import (
    spatial_convolution_matrix,
    spatial_self_convolution,
    temporal_convolution_matrix,
    temporal_self_convolution,
    unit_spatial_self_convolution,
)

FAMILIES = ["se", "matern12", "matern32", "matern52"]
NU = {"matern12": 0.5, "matern32": 1.5, "matern52": 2.5}
SQ3, SQ5 = math.sqrt(3.0), math.sqrt(5.0)
QUAD = dict(epsabs=0.0, epsrel=1e-12, limit=400)


def k(family, r):
    """Unit-lengthscale correlation at r >= 0 (written out, not taken from dynbo)."""
    if family == "se":
        return math.exp(-0.5 * r * r)
    if family == "matern12":
        return math.exp(-r)
    if family == "matern32":
        return (1.0 + SQ3 * r) * math.exp(-SQ3 * r)
    return (1.0 + SQ5 * r + 5.0 * r * r / 3.0) * math.exp(-SQ5 * r)


def sphere(m):
    """Surface of the unit sphere S^(m-1) in R^m."""
    return 2.0 * math.pi ** (m / 2.0) / math.gamma(m / 2.0)


def quad_spatial(family, r, l, d):
    kk = lambda s: k(family, s / l)  # noqa: E731
    top = r + 60.0 * l
    if d == 1:
        f = lambda u: kk(abs(u)) * kk(abs(r - u))  # noqa: E731
        return integrate.quad(f, -60.0 * l, top, points=sorted({0.0, r}), **QUAD)[0]
    if r == 0.0:
        f = lambda rho: rho ** (d - 1) * kk(rho) ** 2  # noqa: E731
        return sphere(d) * integrate.quad(f, 0.0, top, points=[l], **QUAD)[0]
    e = (d - 3) / 2.0

    def inner(rho):
        lo, hi = abs(rho - r), rho + r
        g = lambda s: kk(s) * s * ((rho + r + s) * (s + lo)) ** e  # noqa: E731
        if e == 0.0:
            return integrate.quad(g, lo, hi, **QUAD)[0]
        return integrate.quad(g, lo, hi, weight="alg", wvar=(e, e), **QUAD)[0]

    def outer(rho):
        if rho == 0.0:
            return 0.0
        return rho ** (d - 1) * kk(rho) * inner(rho) * (2 * rho * r) ** (3 - d) / (rho * r)

    return sphere(d - 1) * integrate.quad(outer, 0.0, top, points=sorted({r, l}), **QUAD)[0]


def quad_temporal(family, ti, tj, l, t0):
    f = lambda t: k(family, abs(t - ti) / l) * k(family, abs(t - tj) / l)  # noqa: E731
    top = max(t0, ti, tj) + 80.0 * l
    points = sorted({p for p in (ti, tj) if p > t0}) or None
    return integrate.quad(f, t0, top, points=points, **QUAD)[0]


def scalar(x):
    return torch.tensor(float(x), dtype=torch.float64)


# ----------------------------------------------------------------------------- space
@pytest.mark.parametrize("family", FAMILIES)
def test_reference_kernels_are_dynbo_kernels(family):
    r = np.array([0.0, 0.3, 1.0, 2.7])
    ours = correlation(family, torch.tensor(r)).numpy()
    np.testing.assert_allclose(ours, [k(family, v) for v in r], rtol=1e-14)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("d", [1, 2, 3])
def test_spatial_self_convolution_equals_quadrature(family, d):
    # (offset, lengthscale): offset 0, below, at and beyond a lengthscale.
    for r, l in [(0.0, 0.7), (0.13, 0.2), (0.9, 1.0), (3.0, 2.5), (2.0, 0.3)]:
        exact = quad_spatial(family, r, l, d)
        got = float(spatial_self_convolution(family, scalar(r), l, d))
        assert got == pytest.approx(exact, rel=1e-8, abs=0.0), (family, d, r, l)


@pytest.mark.parametrize("family", ["matern12", "matern52"])
def test_spatial_self_convolution_in_four_dimensions(family):
    # d = 4 exercises integer Bessel orders above those of d = 2.
    for r, l in [(0.0, 0.5), (0.4, 0.5), (1.5, 0.8)]:
        exact = quad_spatial(family, r, l, 4)
        got = float(spatial_self_convolution(family, scalar(r), l, 4))
        assert got == pytest.approx(exact, rel=1e-8, abs=0.0)


@pytest.mark.parametrize("family", ["matern12", "matern32", "matern52"])
@pytest.mark.parametrize("d", [1, 2, 3, 4, 5])
def test_matern_closed_form_is_eq_68(family, d):
    # Eq. (68) of W-DBO evaluated with SciPy's Bessel K, and its r -> 0 limit.
    nu = NU[family]
    v = 2 * nu + d / 2
    a = (
        2 ** (d / 2 - 2 * nu + 1)
        * math.pi ** (d / 2)
        * math.gamma(nu + d / 2) ** 2
        / (math.gamma(nu) ** 2 * math.gamma(2 * nu + d))
    )
    l = 0.37
    r = np.array([1e-6, 0.01, 0.2, 1.0, 4.0, 30.0])
    z = r * math.sqrt(2 * nu) / l
    expected = a * (math.sqrt(2 * nu) / l) ** (2 * nu - d / 2) * r ** (2 * nu + d / 2) * sp.kv(v, z)
    got = spatial_self_convolution(family, torch.tensor(r), l, d).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    limit = a * (l / math.sqrt(2 * nu)) ** d * 2 ** (v - 1) * math.gamma(v)
    assert float(spatial_self_convolution(family, scalar(0.0), l, d)) == pytest.approx(
        limit, rel=1e-13
    )


@pytest.mark.parametrize("order2", range(2, 21))
def test_scaled_bessel_functions(order2):
    # exp(z) z^v K_v(z) = z^v kve(v, z), v = order2 / 2; tabulated integer orders too.
    z = np.concatenate([[0.0, 1e-300, 1e-8], np.linspace(1e-3, 3.0, 301), np.geomspace(3, 700, 60)])
    v = order2 / 2
    with np.errstate(all="ignore"):
        expected = z**v * sp.kve(v, z)
    expected[0] = expected[1] = 2 ** (v - 1) * math.gamma(v)
    direct = conv._scaled_zv_kv(order2, torch.tensor(z)).numpy()
    np.testing.assert_allclose(direct, expected, rtol=1e-13)
    if order2 % 2 == 0:
        pos = torch.tensor(z).sqrt() / conv._TABLE_STEP
        table = conv._tabulated_zv_kv(order2 // 2, pos).numpy()
        np.testing.assert_allclose(table, expected, rtol=1e-12)


def test_tabulated_bessel_on_a_dense_grid():
    # Cubic Hermite interpolation error < 1e-12 relative, including inside the cells.
    rng = np.random.default_rng(0)
    z = torch.tensor(np.concatenate([rng.uniform(0, 2, 20000), rng.uniform(2, 60, 20000)]))
    for m in (2, 3, 4, 6, 8):
        direct = conv._scaled_zv_kv(2 * m, z)
        table = conv._tabulated_zv_kv(m, z.sqrt() / conv._TABLE_STEP)
        assert float(((table - direct) / direct).abs().max()) < 1e-12


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("d", [1, 2, 3])
def test_spatial_convolution_is_finite_for_large_offsets(family, d):
    rho = torch.tensor([0.0, 1e-300, 1e3, 1e6, 1e200, math.inf], dtype=torch.float64)
    out = unit_spatial_self_convolution(family, rho, d)
    assert torch.isfinite(out).all() and (out >= 0).all()
    assert float(out[-1]) == 0.0 and float(out[-2]) == 0.0
    assert float(out[0]) == pytest.approx(float(out[1]), rel=1e-14)


@pytest.mark.parametrize("family", FAMILIES)
def test_spatial_matrix_isotropic_and_ard(family):
    rng = np.random.default_rng(1)
    x1, x2 = torch.tensor(rng.random((7, 3))), torch.tensor(rng.random((5, 3)))
    iso = spatial_convolution_matrix(family, x1, x2, [0.3])
    dist = torch.cdist(x1, x2)
    expected = spatial_self_convolution(family, dist, 0.3, 3)
    torch.testing.assert_close(iso, expected, rtol=1e-13, atol=0)
    ls = [0.2, 0.5, 1.1]
    ard = spatial_convolution_matrix(family, x1, x2, ls)
    scaled = torch.cdist(x1 / torch.tensor(ls), x2 / torch.tensor(ls))
    expected = math.prod(ls) * unit_spatial_self_convolution(family, scaled, 3)
    torch.testing.assert_close(ard, expected, rtol=1e-13, atol=0)


@pytest.mark.parametrize("family", ["se", "matern52"])
def test_ard_change_of_variables_by_quadrature(family):
    # (k * k)(x) = int_{R^2} k(|u / l|) k(|(x - u) / l|) du with l = (0.3, 0.7).
    ls = np.array([0.3, 0.7])
    x = np.array([0.25, -0.4])
    kk = lambda u: k(family, float(np.linalg.norm(u / ls)))  # noqa: E731
    f = lambda v, u: kk(np.array([u, v])) * kk(x - np.array([u, v]))  # noqa: E731
    box = 25.0 * ls
    exact = integrate.dblquad(f, -box[0], box[0], -box[1], box[1], epsabs=1e-13, epsrel=1e-11)[0]
    got = spatial_convolution_matrix(family, torch.tensor(x[None]), torch.zeros(1, 2), ls.tolist())
    assert float(got) == pytest.approx(exact, rel=1e-8)


def test_spatial_matrix_exact_for_nearby_points():
    # Explicit differences: points 1e-9 apart give the r -> 0 value, not noise.
    x = torch.tensor([[0.5, 0.5], [0.5 + 1e-9, 0.5]], dtype=torch.float64)
    out = spatial_convolution_matrix("matern12", x, x, [0.1])
    assert float(out[0, 1]) == pytest.approx(float(out[0, 0]), rel=1e-7)
    assert float(out[0, 1]) < float(out[0, 0])


# ----------------------------------------------------------------------------- time
TIME_CASES = [
    # (t_i, t_j, t0, l): t0 after, at, between and before the observations.
    (0.0, 0.0, 0.0, 1.0),
    (1.0, 2.0, 3.0, 0.7),
    (1.0, 2.0, 2.0, 0.7),
    (1.0, 2.0, 1.5, 0.7),
    (1.0, 2.0, 0.2, 0.7),
    (1.0, 2.0, -3.0, 0.7),
    (3.0, 3.0, 2.0, 1.3),
    (0.0, 5.0, 30.0, 2.0),
    (10.0, 4.0, 11.0, 25.0),
    (2.0, 2.5, 9.0, 0.3),
]


@pytest.mark.parametrize("family", FAMILIES)
def test_temporal_self_convolution_equals_quadrature(family):
    for ti, tj, t0, l in TIME_CASES:
        exact = quad_temporal(family, ti, tj, l, t0)
        got = float(temporal_self_convolution(family, scalar(ti), scalar(tj), l, t0))
        assert got == pytest.approx(exact, rel=1e-8, abs=0.0), (family, ti, tj, t0, l)
        swapped = float(temporal_self_convolution(family, scalar(tj), scalar(ti), l, t0))
        assert swapped == pytest.approx(got, rel=1e-14)


@pytest.mark.parametrize("family", FAMILIES)
def test_temporal_whole_line_limit_is_the_1d_convolution(family):
    # Present time far in the past: the restricted integral is the convolution over R.
    for gap, l in [(0.0, 1.0), (0.4, 0.5), (3.0, 2.0)]:
        whole = float(temporal_self_convolution(family, scalar(0.0), scalar(gap), l, -400.0 * l))
        line = float(spatial_self_convolution(family, scalar(gap), l, 1))
        assert whole == pytest.approx(line, rel=1e-12)


@pytest.mark.parametrize("family", FAMILIES)
def test_temporal_matrix_equals_elementwise(family):
    rng = np.random.default_rng(2)
    times = torch.tensor(np.sort(rng.uniform(0, 50, 40)))
    for t0 in (50.0, 57.0, 30.0):  # all past (fast path), and some after t0
        matrix = temporal_convolution_matrix(family, times, 4.0, t0)
        pairs = temporal_self_convolution(family, times[:, None], times[None, :], 4.0, t0)
        torch.testing.assert_close(matrix, pairs, rtol=1e-12, atol=0)
        torch.testing.assert_close(matrix, matrix.T, rtol=1e-14, atol=0)


@pytest.mark.parametrize("family", FAMILIES)
def test_temporal_convolution_large_offsets(family):
    # Observations ~1e4 lengthscales in the past (and beyond): finite, non-negative, no NaN.
    t = torch.tensor([0.0, -1e4, -1e300], dtype=torch.float64)
    out = temporal_self_convolution(family, t[:, None], t[None, :], 1.0, 0.0)
    assert torch.isfinite(out).all() and (out >= 0).all()
    assert float(out[1, 1]) == 0.0 and float(out[2, 2]) == 0.0
    future = temporal_self_convolution(family, t[:, None], t[None, :], 1.0, -1e5)
    assert torch.isfinite(future).all() and (future >= 0).all()


def test_se_temporal_tail_is_accurate():
    # Where erfc(s) approaches underflow, the value (computed in log space with SciPy's
    # log_ndtr: erfc(s) = 2 Phi(-s sqrt 2)) is kept down to the smallest normal numbers.
    ti, tj, l = 0.0, 0.2, 1.0
    for t0 in (3.0, 12.0, 25.5, 26.3, 26.6):
        s = (2 * t0 - ti - tj) / (2 * l)
        log_exact = (
            math.log(math.sqrt(math.pi) * l / 2)
            - (ti - tj) ** 2 / (4 * l * l)
            + math.log(2.0)
            + sp.log_ndtr(-s * math.sqrt(2.0))
        )
        got = float(temporal_self_convolution("se", scalar(ti), scalar(tj), l, t0))
        assert got == pytest.approx(math.exp(log_exact), rel=1e-10)


# ----------------------------------------------------------------------------- paper_compat
def test_paper_compat_reproduces_the_printed_se_formula_which_is_wrong():
    l = 0.8
    for ti, tj, t0 in [(1.0, 2.0, 3.0), (0.0, 0.5, 0.6), (2.0, 4.0, 10.0)]:
        printed = (
            math.sqrt(math.pi)
            * l
            / 2
            * math.exp(-((ti - tj) ** 2) / (2 * l * l))
            * (1 - math.erf((2 * t0 - ti - tj) / (2 * l)))
        )
        paper = float(
            temporal_self_convolution("se", scalar(ti), scalar(tj), l, t0, paper_compat=True)
        )
        assert paper == pytest.approx(printed, rel=1e-12)
        exact = quad_temporal("se", ti, tj, l, t0)
        assert abs(paper / exact - 1) > 1e-2  # the printed exponent is wrong
        correct = float(temporal_self_convolution("se", scalar(ti), scalar(tj), l, t0))
        assert correct == pytest.approx(exact, rel=1e-10)
    # Equal times: both exponents vanish and the two formulas agree.
    same = [
        float(temporal_self_convolution("se", scalar(1.0), scalar(1.0), l, 2.0, paper_compat=c))
        for c in (False, True)
    ]
    assert same[0] == pytest.approx(same[1], rel=1e-15)


@pytest.mark.parametrize("family", ["matern12", "matern32", "matern52"])
def test_paper_compat_leaves_matern_time_unchanged(family):
    times = torch.tensor([0.0, 1.0, 2.5])
    a = temporal_convolution_matrix(family, times, 1.3, 3.0)
    b = temporal_convolution_matrix(family, times, 1.3, 3.0, paper_compat=True)
    torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_paper_compat_caps_the_spatial_convolution_at_one():
    x = torch.tensor([[0.0], [0.5], [3.0]], dtype=torch.float64)
    raw = spatial_convolution_matrix("se", x, x, [1.0])  # sqrt(pi) at 0 offset
    capped = spatial_convolution_matrix("se", x, x, [1.0], paper_compat=True)
    assert float(raw.max()) > 1.0
    torch.testing.assert_close(capped, raw.clamp(max=1.0), rtol=0, atol=0)
    assert float(capped[0, 2]) == float(raw[0, 2]) < 1.0


# ----------------------------------------------------------------------------- misc
def test_float32_follows_input_dtype():
    x = torch.rand(6, 2)
    t = torch.linspace(0, 5, 6)
    for family in FAMILIES:
        s32 = spatial_convolution_matrix(family, x.float(), x.float(), [0.3])
        s64 = spatial_convolution_matrix(family, x.double(), x.double(), [0.3])
        assert s32.dtype == torch.float32
        torch.testing.assert_close(s32.double(), s64, rtol=1e-5, atol=1e-7)
        t32 = temporal_convolution_matrix(family, t.float(), 2.0, 6.0)
        t64 = temporal_convolution_matrix(family, t.double(), 2.0, 6.0)
        assert t32.dtype == torch.float32
        torch.testing.assert_close(t32.double(), t64, rtol=1e-5, atol=1e-7)


def test_invalid_arguments():
    with pytest.raises(ValueError):
        unit_spatial_self_convolution("se", torch.zeros(2), 0)
    with pytest.raises(ValueError):
        spatial_convolution_matrix("se", torch.zeros(2, 2), torch.zeros(2, 3), [1.0])
    with pytest.raises(ValueError):
        spatial_convolution_matrix("se", torch.zeros(2, 3), torch.zeros(2, 3), [1.0, 2.0])
    with pytest.raises(ValueError):
        temporal_self_convolution("cosine", torch.zeros(1), torch.zeros(1), 1.0, 0.0)
