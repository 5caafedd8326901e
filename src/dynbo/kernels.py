"""Correlation families shared by the GP, the relevancy criterion and the theory module.

Every stationary correlation used in dynbo is one of four families, written as a
function of the *scaled* distance ``r = |tau| / l >= 0`` with ``k(0) = 1``:

==============  ===========================================  ==========
family          k(r)                                         nu
==============  ===========================================  ==========
``se``          exp(-r^2 / 2)                                inf
``matern12``    exp(-r)                                      1/2
``matern32``    (1 + sqrt(3) r) exp(-sqrt(3) r)              3/2
``matern52``    (1 + sqrt(5) r + 5 r^2 / 3) exp(-sqrt(5) r)  5/2
==============  ===========================================  ==========

(W-DBO Table 1; Rasmussen & Williams eq. 4.16-4.17.) This module is the one place
where these formulas live: the GP kernels (``dynbo.models``), the kernel
self-convolutions (``dynbo.relevancy``) and the lower bound (``dynbo.theory``) all
call it.

Half-integer Matern correlations are ``exp(-a tau) P(tau)`` with ``a = sqrt(2 nu) / l``
and ``P`` a polynomial of degree ``p = nu - 1/2``; :func:`matern_polynomial` returns
its coefficients, which the closed-form temporal convolutions integrate exactly.
"""

from __future__ import annotations

import math
from enum import Enum

import numpy as np
import torch

__all__ = [
    "Family",
    "FamilyLike",
    "as_family",
    "correlation",
    "correlation_np",
    "correlation_and_radial_derivative",
    "correlation_and_scale_derivative",
    "correlation_and_scale_derivatives",
    "matern_polynomial",
    "spectral_density",
    "smoothness",
]


class Family(str, Enum):
    """A stationary correlation family (see the module docstring for the formulas)."""

    SE = "se"
    MATERN12 = "matern12"
    MATERN32 = "matern32"
    MATERN52 = "matern52"


FamilyLike = Family | str

_ALIASES = {
    "se": Family.SE,
    "rbf": Family.SE,
    "squared_exponential": Family.SE,
    "matern12": Family.MATERN12,
    "matern-1/2": Family.MATERN12,
    "matern1/2": Family.MATERN12,
    "exponential": Family.MATERN12,
    "matern32": Family.MATERN32,
    "matern-3/2": Family.MATERN32,
    "matern3/2": Family.MATERN32,
    "matern52": Family.MATERN52,
    "matern-5/2": Family.MATERN52,
    "matern5/2": Family.MATERN52,
}


def as_family(family: FamilyLike) -> Family:
    """Parse a family name (``"se"``, ``"matern52"``, ``"matern-3/2"``, ...) into a :class:`Family`.

    Raises:
        ValueError: if the name is not one of the four supported families.
    """
    if isinstance(family, Family):
        return family
    key = str(family).strip().lower().replace("_", "").replace(" ", "")
    key = {"squaredexponential": "squared_exponential"}.get(key, key)
    if key in _ALIASES:
        return _ALIASES[key]
    raise ValueError(
        f"unknown correlation family {family!r}; expected one of "
        "'se', 'matern12', 'matern32', 'matern52'"
    )


def smoothness(family: FamilyLike) -> float:
    """The Matern smoothness nu of a family (``inf`` for SE)."""
    return {
        Family.SE: math.inf,
        Family.MATERN12: 0.5,
        Family.MATERN32: 1.5,
        Family.MATERN52: 2.5,
    }[as_family(family)]


def correlation(family: FamilyLike, r: torch.Tensor) -> torch.Tensor:
    """Correlation ``k(r)`` at scaled distances ``r = |tau| / l`` (any shape, ``r >= 0``).

    Differentiable with torch autograd; follows the dtype and device of ``r``.
    """
    fam = as_family(family)
    if fam is Family.SE:
        return torch.exp(-0.5 * r * r)
    if fam is Family.MATERN12:
        return torch.exp(-r)
    if fam is Family.MATERN32:
        s = math.sqrt(3.0) * r
        return (1.0 + s) * torch.exp(-s)
    s = math.sqrt(5.0) * r
    return (1.0 + s + s * s / 3.0) * torch.exp(-s)


def correlation_and_scale_derivative(
    family: FamilyLike, r: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``k(r)`` and ``-r k'(r)``, the derivative of ``k(|tau| / l)`` with respect to ``log l``.

    Used by the analytic marginal-likelihood gradient. ``-r k'(r)`` is
    ``r^2 exp(-r^2/2)`` (SE), ``r exp(-r)`` (Matern-1/2), ``3 r^2 exp(-sqrt(3) r)``
    (Matern-3/2) and ``(5/3) r^2 (1 + sqrt(5) r) exp(-sqrt(5) r)`` (Matern-5/2).
    Written with in-place operations: on (n, n) matrices this runs once per likelihood
    evaluation, and every fresh n^2 buffer costs more than the arithmetic. A NumPy array
    ``r`` (the fit's evaluations of small datasets on a CPU) gets NumPy arrays back.
    """
    fam = as_family(family)
    # the same in-place operators for torch tensors and NumPy arrays; the exponential
    # in place through ``out=``, which both accept
    exp = np.exp if isinstance(r, np.ndarray) else torch.exp
    if fam is Family.SE:
        half_square = r * r
        half_square *= 0.5
        value = -half_square
        exp(value, out=value)
        half_square *= 2.0
        half_square *= value
        return value, half_square
    if fam is Family.MATERN12:
        value = -r
        exp(value, out=value)
        return value, r * value
    s = r * (math.sqrt(3.0) if fam is Family.MATERN32 else math.sqrt(5.0))
    e = -s
    exp(e, out=e)
    if fam is Family.MATERN32:
        value = s + 1.0
        value *= e
        s *= s
        s *= e
        return value, s
    square_third = s * s
    square_third *= 1.0 / 3.0
    value = square_third + s
    value += 1.0
    value *= e
    derivative = square_third
    derivative *= e
    if isinstance(derivative, torch.Tensor):
        # torch's fused d + d s, kept: its rounding is that of every fit made before
        return value, derivative.addcmul_(derivative, s)
    derivative += derivative * s
    return value, derivative


def correlation_and_scale_derivatives(
    family: FamilyLike, r: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``k(r)``, ``g(r) = -r k'(r)`` and ``-r g'(r)``: ``k(|tau| / l)`` and its first two
    derivatives with respect to ``log l``, at scaled distances ``r >= 0`` (any shape).

    The second derivative is what the marginal likelihood's analytic Hessian needs:
    ``(r^2 - 2) g`` (SE), ``(r - 1) g`` (Matern-1/2), ``(s - 2) g`` with ``s = sqrt(3) r``
    (Matern-3/2) and ``(s^2 - 2 s - 2) g / (1 + s)`` with ``s = sqrt(5) r`` (Matern-5/2),
    ``g`` being the first (see :func:`correlation_and_scale_derivative`). NumPy arrays
    ``r`` get NumPy arrays back.
    """
    fam = as_family(family)
    value, first = correlation_and_scale_derivative(fam, r)
    # in-place operators: the same for torch tensors and NumPy arrays
    if fam is Family.SE:
        second = r * r
        second -= 2.0
    elif fam is Family.MATERN12:
        second = r - 1.0
    elif fam is Family.MATERN32:
        second = r * math.sqrt(3.0)
        second -= 2.0
    else:
        s = r * math.sqrt(5.0)
        second = s * s
        second -= 2.0 * s
        second -= 2.0
        second *= first
        s += 1.0
        second /= s
        return value, first, second
    second *= first
    return value, first, second


def correlation_and_radial_derivative(
    family: FamilyLike, r: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``k(r)`` and ``k'(r) / r`` at scaled distances ``r >= 0`` (any shape).

    The gradient of ``k(||x - x'|| / l)`` in ``x`` is ``(k'(r) / r) (x - x') / l^2``, so
    this pair gives closed-form acquisition gradients without autograd. ``k'(r) / r`` is
    ``-exp(-r^2/2)`` (SE), ``-3 exp(-sqrt(3) r)`` (Matern-3/2) and
    ``-(5/3) (1 + sqrt(5) r) exp(-sqrt(5) r)`` (Matern-5/2): finite at ``r = 0``, where
    the kernels are differentiable.

    Raises:
        ValueError: for Matern-1/2, which is not differentiable at ``r = 0``.
    """
    fam = as_family(family)
    if fam is Family.MATERN12:
        raise ValueError("the Matern-1/2 correlation is not differentiable at zero distance")
    if fam is Family.SE:
        value = (r * r).mul_(-0.5).exp_()
        return value, -value
    if fam is Family.MATERN32:
        s = r * math.sqrt(3.0)
        e = s.neg().exp_()
        return (s + 1.0).mul_(e), e.mul(-3.0)
    # few operations: on the small matrices of the acquisition's inner loop each one
    # costs its dispatch, not its arithmetic
    s = r * math.sqrt(5.0)
    e = s.neg().exp_()
    linear = s + 1.0
    value = torch.addcmul(linear, s, s, value=1.0 / 3.0).mul_(e)
    return value, linear.mul_(e).mul_(-5.0 / 3.0)


def correlation_np(family: FamilyLike, r: np.ndarray | float) -> np.ndarray:
    """NumPy twin of :func:`correlation` for code that never needs gradients."""
    return correlation(family, torch.as_tensor(np.asarray(r, dtype=float))).numpy()


def matern_polynomial(family: FamilyLike, lengthscale: float) -> tuple[float, np.ndarray]:
    """Write a half-integer Matern correlation as ``k(tau) = exp(-a tau) * sum_m c[m] tau^m``.

    Args:
        family: ``matern12``, ``matern32`` or ``matern52``.
        lengthscale: ``l > 0`` (same unit as ``tau``).

    Returns:
        ``(a, c)`` with ``a = sqrt(2 nu) / l`` (1/time unit) and ``c`` the polynomial
        coefficients in increasing degree (``c[0] = 1``).
    """
    fam = as_family(family)
    if fam is Family.SE:
        raise ValueError("the SE correlation is not of the form exp(-a tau) P(tau)")
    nu = smoothness(fam)
    a = math.sqrt(2.0 * nu) / lengthscale
    if fam is Family.MATERN12:
        return a, np.array([1.0])
    if fam is Family.MATERN32:
        return a, np.array([1.0, a])
    return a, np.array([1.0, a, a * a / 3.0])


def spectral_density(family: FamilyLike, s: np.ndarray, lengthscale: float) -> np.ndarray:
    """One-dimensional spectral density ``S(s) = int k(tau) exp(-2 pi i s tau) dtau``.

    ``s`` is in cycles per time unit, so ``int_R S(s) ds = k(0) = 1``
    (W-DBO eq. 62 and 66 for one dimension).
    """
    fam = as_family(family)
    s = np.asarray(s, dtype=float)
    l = float(lengthscale)
    if fam is Family.SE:
        return math.sqrt(2.0 * math.pi) * l * np.exp(-2.0 * math.pi**2 * l**2 * s**2)
    nu = smoothness(fam)
    const = (
        2.0
        * math.sqrt(math.pi)
        * math.gamma(nu + 0.5)
        * (2.0 * nu) ** nu
        / (math.gamma(nu) * l ** (2.0 * nu))
    )
    return const * (2.0 * nu / l**2 + 4.0 * math.pi**2 * s**2) ** (-(nu + 0.5))
