"""Closed-form self-convolutions of the correlation families (W-DBO Tables 3 and 4).

The Wasserstein relevancy criterion integrates products of kernel columns over the
future domain ``S x [t0, inf)``. W-DBO bounds the spatial integral by one over ``R^d``
and is left with two kinds of integrals, both computed here in closed form:

* the spatial self-convolution over ``R^d`` of an isotropic correlation with
  lengthscale ``l`` (W-DBO Lemmas D.2 and D.3, eq. 61 and 65/68)::

      (k * k)(x) = int_{R^d} k(||u|| / l) k(||x - u|| / l) du = l^d (k_1 * k_1)(||x|| / l)

  with ``k_1`` the unit-lengthscale correlation; with one lengthscale per dimension
  (ARD) the same change of variables gives ``(prod_j l_j) (k_1 * k_1)(||x / l||)``.
  Units: a volume of the unit box (``l`` in unit-box units);
* the temporal self-convolution restricted to the future (Lemmas D.4 and D.5)::

      I(t_i, t_j; t0) = int_{t0}^{inf} k_T(|t - t_i| / l) k_T(|t - t_j| / l) dt

  in the time unit of ``t`` and ``l``.

Closed forms (all checked against numerical quadrature by the test suite):

* spatial SE: ``pi^(d/2) exp(-rho^2 / 4)`` at unit lengthscale (``rho = ||x|| / l``);
* spatial Matern-nu: with ``z = sqrt(2 nu) rho`` and ``v = 2 nu + d/2``,
  ``A (2 nu)^(-d/2) z^v K_v(z)``, ``A = 2^(d/2 - 2 nu + 1) pi^(d/2) Gamma(nu + d/2)^2 /
  (Gamma(nu)^2 Gamma(2 nu + d))`` (eq. 68 rewritten in ``z``). ``v`` is a half-integer
  for odd ``d``: then ``exp(z) z^v K_v(z)`` is a polynomial, evaluated directly. It is
  an integer for even ``d``: then ``exp(z) z^m K_m(z)`` follows from the scaled
  ``K_0``, ``K_1`` by the recurrence ``h_(j+1) = z^2 h_(j-1) + 2 j h_j``
  (``h_j = exp(z) z^j K_j(z)``, all terms positive); since torch's ``K_0``, ``K_1``
  cost ~50 ns per value on a CPU core, this function is tabulated once per order in
  ``u = sqrt(z)`` and interpolated by cubic Hermite polynomials with exact
  derivatives (relative error < 1e-12, tested). Both forms are exponentially scaled,
  so nothing overflows, and at ``z = 0`` they give the limit ``2^(v-1) Gamma(v)``;
* temporal SE: ``(sqrt(pi) l / 2) exp(-(t_i - t_j)^2 / (4 l^2)) erfc(s)`` with
  ``s = (2 t0 - t_i - t_j) / (2 l)``, valid for any ``t0`` (the SE integrand has no
  absolute value to resolve). ``erfc`` itself (never ``1 - erf``, which cancels to 0
  or noise for ``s > 6``), so with both factors at most 1 (resp. 2) the product
  underflows only where the true value does; for ``s > 25``, where ``erfc`` nears the
  underflow threshold, ``erfcx(s) exp(-(t_i - t_j)^2 / (4 l^2) - s^2)`` keeps the last
  digits;
* temporal Matern ``nu = p + 1/2``: write ``k_T(tau) = exp(-a tau) P(tau)`` with
  ``a = sqrt(2 nu) / l`` (:func:`dynbo.kernels.matern_polynomial`) and, in scaled time
  ``z = a tau``, ``k_T = exp(-z) Q(z)``. For ``t0 >= t_i, t_j`` and scaled offsets
  ``x = a (t0 - t_i)``, ``y = a (t0 - t_j)``::

      I = (1 / a) exp(-(x + y)) sum_{m, n} D_m(x) D_n(y) (m + n)! / 2^(m + n + 1),
      D_m(x) = Q^(m)(x) / m!

  (Taylor-expand ``Q(u + x) Q(u + y)`` in ``u`` and use ``int_0^inf u^k e^(-2u) du =
  k! / 2^(k+1)``). This is a sum of ``(p + 1)^2`` products of one function of ``t_i``
  and one of ``t_j``, so the ``(n, n)`` matrix costs one ``(n, p+1) x (p+1, n)``
  product.

Observations after the present time (``t_i > t0``) are supported exactly: there the
integrand has a kink at ``t_i`` and the formula above no longer applies, so the
integral is split at the observation times. With ``lo <= hi`` the two times and
``delta = a (hi - lo)``:

* ``t0 >= hi``: the formula above;
* ``lo <= t0 < hi``: ``F(0, delta) + exp(-delta) int_{a (t0 - lo)}^{delta} Q(v) Q(delta - v) dv``
  (past ``hi`` plus the stretch between the two observations, a polynomial integral);
* ``t0 < lo``: the whole-line convolution minus the mirrored part before ``t0``,
  ``2 F(0, delta) + exp(-delta) int_0^delta Q(v) Q(delta - v) dv - F(a (lo - t0), a (hi - t0))``,

where ``F(x, y)`` is the bracket of the formula above (times ``1 / a``).

``paper_compat=True`` reproduces the authors' package (see ``docs/relevancy.md``):
the temporal SE convolution with ``exp(-(t_i - t_j)^2 / (2 l^2))`` as printed in W-DBO
Table 4 / eq. (70), which is WRONG (quadrature gives ``4 l^2``), and the spatial
convolution capped at 1 element by element. The package's third quirk, a noise floor of
:data:`PAPER_NOISE_FLOOR`, concerns the GP and is applied by
:meth:`dynbo.relevancy.WassersteinRelevancy.from_gp`.

All functions take and return torch tensors and follow their dtype and device.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from dynbo.kernels import Family, FamilyLike, as_family, matern_polynomial, smoothness

__all__ = [
    "PAPER_NOISE_FLOOR",
    "unit_spatial_self_convolution",
    "spatial_self_convolution",
    "spatial_convolution_matrix",
    "temporal_self_convolution",
    "temporal_convolution_matrix",
]

PAPER_NOISE_FLOOR = 1e-5
"""Smallest noise variance the authors' package accepts (``paper_compat`` only)."""


# ---------------------------------------------------------------------------- helpers
def _like(value: torch.Tensor | float, ref: torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(value, dtype=ref.dtype, device=ref.device)


def _float_tensor(value: torch.Tensor | float) -> torch.Tensor:
    t = torch.as_tensor(value)
    return t if t.is_floating_point() else t.to(torch.get_default_dtype())


def _exp_cutoff(dtype: torch.dtype) -> float:
    # Beyond this z, exp(-z) is exactly 0 in `dtype`; clamping z there keeps the
    # polynomial factors finite so that 0 * finite stays 0 instead of 0 * inf = NaN.
    return 2.0 * -math.log(torch.finfo(dtype).tiny)


def _polyval(coefficients: Sequence[float], x: torch.Tensor) -> torch.Tensor:
    """``sum_k coefficients[k] x^k`` by Horner's rule."""
    out = torch.full_like(x, coefficients[-1])
    for c in reversed(coefficients[:-1]):
        out = out * x + c
    return out


# ---------------------------------------------------------------------------- space
def _scaled_zv_kv(order2: int, z: torch.Tensor) -> torch.Tensor:
    """``exp(z) z^v K_v(z)`` for ``v = order2 / 2 >= 1/2`` and ``z >= 0``, evaluated directly.

    Finite everywhere, including ``z = 0`` where it equals ``2^(v-1) Gamma(v)``.
    """
    if order2 % 2 == 1:
        # Half-integer order: exp(z) z^(m+1/2) K_(m+1/2)(z) is sqrt(pi/2) times a
        # polynomial of degree m (Abramowitz & Stegun 10.2.15).
        return _polyval(_half_integer_coefficients((order2 - 1) // 2), z)
    m = order2 // 2
    # Integer order: h_j = exp(z) z^j K_j(z) from K_0, K_1. The clamp keeps z K_1(z)
    # finite at z = 0 (its limit 1 is reached to rounding long before the clamp).
    zs = z.clamp_min(math.sqrt(torch.finfo(z.dtype).tiny))
    if m == 0:
        return torch.special.scaled_modified_bessel_k0(zs)
    z2 = zs * zs
    h_prev = z2 * torch.special.scaled_modified_bessel_k0(zs)  # z^2 h_0, 0 at z = 0
    h = zs * torch.special.scaled_modified_bessel_k1(zs)  # h_1
    # h_(j+1) = z^2 h_(j-1) + 2 j h_j: only positive terms, so no cancellation.
    for j in range(1, m):
        h_prev, h = h, (h_prev if j == 1 else z2 * h_prev) + 2.0 * j * h
    return h


def _half_integer_coefficients(m: int) -> list[float]:
    """Coefficients (increasing degree) of ``exp(z) z^(m+1/2) K_(m+1/2)(z)``."""
    # sqrt(pi/2) sum_k (m+k)! / (k! (m-k)!) 2^-k z^(m-k); the z^j term is k = m - j.
    return [
        math.sqrt(math.pi / 2.0)
        * math.factorial(2 * m - j)
        / (math.factorial(m - j) * math.factorial(j) * 2.0 ** (m - j))
        for j in range(m + 1)
    ]


# Integer orders (even d) need K_0 and K_1, whose torch kernels cost ~50 ns per value on
# a CPU core, 20 times the rest of the criterion. Their scaled combination
# G(u) = exp(z) z^m K_m(z), z = u^2, is smooth in u (the z^(2m) log z term of K_m at 0
# becomes u^(4m) log u), so it is tabulated once per order on a uniform grid in u and
# interpolated by cubic Hermite polynomials with exact derivatives:
# dG/du = 2 u (h_m - z h_(m-1)), from d/dz [z^m K_m] = -z^m K_(m-1).
# Relative interpolation error < 1e-12 (checked by the tests).
_TABLE_STEP = 1.0 / 1024.0
_TABLES: dict[tuple[int, torch.dtype, str], torch.Tensor] = {}


def _hermite_table(m: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``(4, N)`` cubic coefficients of ``G`` on the cells ``[k h, (k+1) h]``.

    Row ``j`` holds ``c_j`` with ``G = sum_j c_j f^j`` at ``u = (k + f) h``.
    """
    key = (m, dtype, str(device))
    table = _TABLES.get(key)
    if table is None:
        count = math.ceil(math.sqrt(_exp_cutoff(dtype)) / _TABLE_STEP) + 1
        u = torch.arange(count + 1, dtype=torch.float64) * _TABLE_STEP
        z = u * u
        hm = _scaled_zv_kv(2 * m, z)
        hm1 = _scaled_zv_kv(2 * m - 2, z)
        dy = _TABLE_STEP * 2.0 * u * (hm - z * hm1)  # dG/du times the cell width
        y0, y1, d0, d1 = hm[:-1], hm[1:], dy[:-1], dy[1:]
        table = torch.stack(
            [y0, d0, 3.0 * (y1 - y0) - 2.0 * d0 - d1, 2.0 * (y0 - y1) + d0 + d1]
        ).to(dtype=dtype, device=device)
        _TABLES[key] = table
    return table


def _tabulated_zv_kv(m: int, pos: torch.Tensor) -> torch.Tensor:
    """``exp(z) z^m K_m(z)`` for an integer ``m >= 2`` by table lookup.

    ``pos = sqrt(z) / h`` (the position in cells, overwritten) must be finite; it is
    clamped to the table, beyond which ``exp(-z)`` is 0 in its dtype anyway.
    """
    table = _hermite_table(m, pos.dtype, pos.device)
    pos = pos.clamp_(max=float(table.shape[1] - 1))
    idx = pos.to(torch.long).reshape(-1)
    frac = pos.frac_()
    # index_select on a 1-D table row is the fastest gather torch has on a CPU; all
    # gathers reuse one buffer.
    out = table[3].index_select(0, idx).view_as(frac)
    gathered = torch.empty_like(out)
    flat = gathered.view(-1)
    for k in (2, 1, 0):
        torch.index_select(table[k], 0, idx, out=flat)
        torch.addcmul(gathered, out, frac, out=out)
    return out


def _matern_log_constant(nu: float, dim: int) -> float:
    # log of A (2 nu)^(-d/2): eq. (68) written in z = sqrt(2 nu) rho.
    return (
        (dim / 2.0 - 2.0 * nu + 1.0) * math.log(2.0)
        + (dim / 2.0) * math.log(math.pi)
        + 2.0 * math.lgamma(nu + dim / 2.0)
        - 2.0 * math.lgamma(nu)
        - math.lgamma(2.0 * nu + dim)
        - (dim / 2.0) * math.log(2.0 * nu)
    )


def _horner_(out: torch.Tensor, coefficients: Sequence[float], x: torch.Tensor) -> torch.Tensor:
    """``out <- sum_k coefficients[k] x^k``, one fused pass per degree (``out`` is overwritten)."""
    out.fill_(coefficients[-1])
    for c in reversed(coefficients[:-1]):
        torch.addcmul(torch.tensor(c, dtype=x.dtype, device=x.device), out, x, out=out)
    return out


def _distance_factor(fam: Family, dim: int) -> float:
    """``c`` such that :func:`_from_scaled` takes ``w = c rho`` (``rho`` = scaled distance)."""
    if fam is Family.SE:
        return 0.5  # exp(-rho^2 / 4) = exp(-w^2)
    nu = smoothness(fam)
    if (int(round(4 * nu)) + dim) % 2 == 1:
        return math.sqrt(2.0 * nu)  # w = z
    return math.sqrt(2.0 * nu) / _TABLE_STEP**2  # w = z / h^2, so sqrt(w) = sqrt(z) / h


def _from_scaled(fam: Family, w: torch.Tensor, dim: int, scale: float) -> torch.Tensor:
    """``scale * (k_1 * k_1)(rho)`` from ``w = c rho`` (:func:`_distance_factor`).

    ``w`` is a buffer this function consumes. Every step works in place on it or on one
    more buffer of its size: on an (n, n) matrix this elementwise work is bound by the
    passes over memory, so constant factors are folded into ``w`` and the coefficients.
    """
    if fam is Family.SE:
        return w.mul_(w).neg_().exp_().mul_(scale * math.pi ** (dim / 2.0))
    nu = smoothness(fam)
    order2 = int(round(4 * nu)) + dim  # 2 v = 4 nu + d
    factor = scale * math.exp(_matern_log_constant(nu, dim))
    if order2 % 2 == 1:
        z = w.clamp_(max=_exp_cutoff(w.dtype))
        coeffs = [factor * c for c in _half_integer_coefficients((order2 - 1) // 2)]
        return _horner_(torch.empty_like(z), coeffs, z).mul_(z.neg_().exp_())
    out = _tabulated_zv_kv(order2 // 2, torch.sqrt(w))
    # factor * exp(-z) = exp(log(factor) - h^2 w) in one pass.
    log_factor = torch.tensor(math.log(factor), dtype=w.dtype, device=w.device)
    return out.mul_(torch.sub(log_factor, w, alpha=_TABLE_STEP**2, out=w).exp_())


def unit_spatial_self_convolution(
    family: FamilyLike, scaled_distance: torch.Tensor, dim: int
) -> torch.Tensor:
    """Self-convolution over ``R^dim`` of the unit-lengthscale correlation.

    Args:
        family: correlation family of ``k_S`` (SE or Matern 1/2, 3/2, 5/2).
        scaled_distance: ``rho = ||x|| / l >= 0``, any shape (dimensionless).
        dim: spatial dimension ``d >= 1``.

    Returns:
        ``(k_1 * k_1)(rho)``, same shape, dtype and device as ``scaled_distance``
        (a volume of ``R^d`` in lengthscale units). Finite and non-negative for every
        ``rho >= 0``, infinite included.
    """
    fam = as_family(family)
    _check_dim(dim)
    w = _float_tensor(scaled_distance) * _distance_factor(fam, dim)
    return _from_scaled(fam, w, dim, 1.0)


def spatial_self_convolution(
    family: FamilyLike,
    distance: torch.Tensor,
    lengthscale: float,
    dim: int,
) -> torch.Tensor:
    """Isotropic spatial self-convolution ``(k_S * k_S)(x)`` over ``R^dim`` (Table 3).

    Args:
        family: correlation family of ``k_S``.
        distance: ``||x|| >= 0``, any shape, unit-box units.
        lengthscale: ``l > 0``, unit-box units.
        dim: spatial dimension ``d``.

    Returns:
        ``l^d (k_1 * k_1)(||x|| / l)``: same shape as ``distance``, in unit-box volume.
    """
    fam = as_family(family)
    _check_dim(dim)
    l = float(lengthscale)
    w = _float_tensor(distance) * (_distance_factor(fam, dim) / l)
    return _from_scaled(fam, w, dim, l**dim)


def spatial_convolution_matrix(
    family: FamilyLike,
    x1: torch.Tensor,
    x2: torch.Tensor,
    lengthscale: torch.Tensor | Sequence[float] | float,
    *,
    paper_compat: bool = False,
) -> torch.Tensor:
    """Matrix of spatial self-convolutions ``(k_S * k_S)(x2_j - x1_i)``, isotropic or ARD.

    Args:
        family: correlation family of ``k_S``.
        x1: ``(n1, d)`` points in the unit box.
        x2: ``(n2, d)`` points in the unit box.
        lengthscale: 1 (isotropic) or d (ARD) lengthscales, unit-box units.
        paper_compat: cap every entry at 1, as the authors' package does.

    Returns:
        ``(n1, n2)`` tensor, ``(prod_j l_j) (k_1 * k_1)(||(x1_i - x2_j) / l||)``.
    """
    fam = as_family(family)
    if x1.ndim != 2 or x2.ndim != 2 or x1.shape[1] != x2.shape[1]:
        raise ValueError(
            f"x1 and x2 must be (n1, d) and (n2, d), got {tuple(x1.shape)} and {tuple(x2.shape)}"
        )
    d = x1.shape[1]
    ls = torch.as_tensor(lengthscale, dtype=torch.float64).reshape(-1).tolist()
    if len(ls) == 1:
        ls = ls * d
    if len(ls) != d:
        raise ValueError(f"need 1 or {d} lengthscales, got {len(ls)}")
    scale = _like([_distance_factor(fam, d) / v for v in ls], x1)
    # Exact differences (never the |a|^2 + |b|^2 - 2 a.b expansion, which loses the
    # digits of nearby points), fused in one kernel.
    w = torch.cdist(x1 * scale, x2 * scale, compute_mode="donot_use_mm_for_euclid_dist")
    out = _from_scaled(fam, w, d, math.prod(ls))
    if paper_compat:
        out.clamp_(max=1.0)
    return out


def _check_dim(dim: int) -> None:
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise ValueError(f"dim must be a positive integer, got {dim!r}")


# ---------------------------------------------------------------------------- time
def _matern_q(family: Family) -> list[float]:
    """Coefficients of ``Q`` with ``k_T(tau) = exp(-z) Q(z)``, ``z = a tau``."""
    # At unit lengthscale a = sqrt(2 nu); dividing c_m by a^m turns P(tau) into Q(z).
    a, c = matern_polynomial(family, 1.0)
    return [float(cm) / a**m for m, cm in enumerate(c)]


def _derivative_table(q: list[float]) -> list[list[float]]:
    """Coefficients (in x) of ``D_m(x) = Q^(m)(x) / m!`` for ``m = 0..deg``."""
    deg = len(q) - 1
    return [[math.comb(m + j, m) * q[m + j] for j in range(deg - m + 1)] for m in range(deg + 1)]


def _future_part(q: list[float], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``exp(-(x+y)) int_0^inf exp(-2u) Q(u + x) Q(u + y) du`` for ``x, y >= 0`` (scaled)."""
    table = _derivative_table(q)
    dx = [_polyval(c, x) for c in table]
    dy = [_polyval(c, y) for c in table]
    total = torch.zeros_like(x + y)
    for m, dxm in enumerate(dx):
        for n, dyn in enumerate(dy):
            total = total + (math.factorial(m + n) / 2.0 ** (m + n + 1)) * dxm * dyn
    return torch.exp(-(x + y)) * total


def _middle_part(q: list[float], z0: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
    """``exp(-delta) int_{z0}^{delta} Q(v) Q(delta - v) dv`` for ``0 <= z0 <= delta`` (scaled)."""
    table = _derivative_table(q)
    # Q(delta - v) = sum_n D_n(delta) (-v)^n, so the integrand is a polynomial in v.
    total = torch.zeros_like(z0 + delta)
    for n, coeffs in enumerate(table):
        dn = _polyval(coeffs, delta) * (-1.0) ** n
        for m, qm in enumerate(q):
            k = m + n + 1
            total = total + (qm / k) * dn * (delta**k - z0**k)
    return torch.exp(-delta) * total


# erfc(s) underflows for s > ~26.5 (float64). Past this point the erfcx form is used.
_ERFC_SAFE = 25.0


def _se_temporal(
    t_i: torch.Tensor, t_j: torch.Tensor, l: torch.Tensor, t0: torch.Tensor, paper_compat: bool
) -> torch.Tensor:
    # s = (2 t0 - t_i - t_j) / (2 l); both factors are at most 1 (resp. 2), so the
    # product of exp(-gap) and erfc(s) underflows only when the true value does.
    s = torch.add(t0 - t_i, t0 - t_j).div_(2.0 * l)
    gap = torch.sub(t_i, t_j)
    # The correct exponent is -(t_i - t_j)^2 / (4 l^2); the paper prints 2 l^2.
    gap.mul_(gap).div_((2.0 if paper_compat else 4.0) * l * l)
    far = s > _ERFC_SAFE
    tail = None
    if bool(far.any()):
        # Deep tail: erfc(s) = erfcx(s) exp(-s^2), combined in one exponent so that the
        # result keeps its digits down to the smallest normal numbers.
        sf = s[far]
        tail = torch.special.erfcx(sf) * torch.exp(-(gap[far] + sf * sf))
    out = torch.special.erfc(s).mul_(gap.neg_().exp_())
    if tail is not None:
        out[far] = tail
    return out.mul_(0.5 * math.sqrt(math.pi) * l)


def temporal_self_convolution(
    family: FamilyLike,
    t_i: torch.Tensor,
    t_j: torch.Tensor,
    lengthscale: torch.Tensor | float,
    present_time: torch.Tensor | float,
    *,
    paper_compat: bool = False,
) -> torch.Tensor:
    """Future-restricted temporal self-convolution ``int_{t0}^inf k_T(t - t_i) k_T(t - t_j) dt``.

    Element by element with broadcasting; exact for every ``t0``, including
    observations after ``t0`` (see the module docstring).

    Args:
        family: correlation family of ``k_T``.
        t_i: observation times, any shape broadcastable with ``t_j`` (time unit).
        t_j: observation times (time unit).
        lengthscale: ``l_T > 0`` (time unit).
        present_time: ``t0`` (time unit).
        paper_compat: use the paper's printed (wrong) SE formula; no effect on Matern.

    Returns:
        The broadcast tensor of integrals, in the time unit; finite and non-negative.
    """
    fam = as_family(family)
    t_i = _float_tensor(t_i)
    t_j = _like(t_j, t_i)
    l = _like(lengthscale, t_i)
    t0 = _like(present_time, t_i)
    if fam is Family.SE:
        return _se_temporal(t_i, t_j, l, t0, paper_compat)
    a = math.sqrt(2.0 * smoothness(fam)) / l
    q = _matern_q(fam)
    cut = _exp_cutoff(t_i.dtype)
    x = a * (t0 - t_i)
    y = a * (t0 - t_j)
    lo, hi = torch.minimum(x, y), torch.maximum(x, y)
    past = _future_part(q, x.clamp(0.0, cut), y.clamp(0.0, cut))
    if not bool((lo < 0).any()):
        return past / a
    # Some observation lies after t0 (a look-ahead policy): split at the observations.
    delta = (hi - lo).clamp(max=cut)
    zero = torch.zeros_like(delta)
    after_hi = _future_part(q, zero, delta)
    straddle = after_hi + _middle_part(q, hi.clamp(min=0.0).clamp(max=delta), delta)
    whole_line = 2.0 * after_hi + _middle_part(q, zero, delta)
    before = whole_line - _future_part(q, (-hi).clamp(0.0, cut), (-lo).clamp(0.0, cut))
    out = torch.where(lo >= 0, past, torch.where(hi >= 0, straddle, before))
    return out.clamp_min(0.0) / a


def temporal_convolution_matrix(
    family: FamilyLike,
    times: torch.Tensor,
    lengthscale: torch.Tensor | float,
    present_time: torch.Tensor | float,
    *,
    paper_compat: bool = False,
) -> torch.Tensor:
    """``(n, n)`` matrix ``I(t_i, t_j; t0)`` of future-restricted temporal self-convolutions.

    When every ``t_i <= t0`` a Matern matrix is built as ``U W U^T`` with ``U`` of shape
    ``(n, p + 1)`` (the separable form in the module docstring), otherwise it falls back
    to :func:`temporal_self_convolution`.

    Args:
        family: correlation family of ``k_T``.
        times: ``(n,)`` observation times (time unit).
        lengthscale: ``l_T > 0`` (time unit).
        present_time: ``t0`` (time unit).
        paper_compat: use the paper's printed (wrong) SE formula.

    Returns:
        ``(n, n)`` symmetric tensor in the time unit.
    """
    fam = as_family(family)
    times = _float_tensor(times).reshape(-1)
    t0 = _like(present_time, times)
    if fam is Family.SE or times.numel() == 0 or bool((times > t0).any()):
        return temporal_self_convolution(
            fam, times[:, None], times[None, :], lengthscale, t0, paper_compat=paper_compat
        )
    l = _like(lengthscale, times)
    a = math.sqrt(2.0 * smoothness(fam)) / l
    q = _matern_q(fam)
    x = (a * (t0 - times)).clamp(max=_exp_cutoff(times.dtype))
    table = _derivative_table(q)
    scale = torch.exp(-x)
    u = torch.stack([scale * _polyval(c, x) for c in table], dim=1)  # (n, p + 1)
    k = len(table)
    w = torch.tensor(
        [[math.factorial(m + n) / 2.0 ** (m + n + 1) for n in range(k)] for m in range(k)],
        dtype=times.dtype,
        device=times.device,
    )
    return (u @ (w / a)) @ u.T
