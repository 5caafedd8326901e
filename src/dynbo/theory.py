"""Results of the papers that need no GP: BOLT's maximal useful dataset size (Bardou &
Thiran 2025) and R-GP-UCB's block size (Bogunovic, Scarlett & Cevher 2016).

Theorem 3.8 bounds the regret of a TVBO algorithm whose dataset holds the ``n`` most
recent observations, taken every ``R(n)`` seconds; the bound is smallest when
``||u_n||^2 = sum_{i=1}^{n} k_T(i R(n))^2`` is largest (eq. 8-9): a larger dataset
carries more information, but a slower response spaces the observations further apart
in time, where the temporal correlation has decayed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.optimize

from dynbo.kernels import FamilyLike, as_family, correlation_np

__all__ = [
    "ResponseTimeModel",
    "dataset_utility",
    "fit_cubic",
    "max_dataset_size",
    "reset_interval",
]

#: smoothness nu of the Matern families
_MATERN_NU = {"matern12": 0.5, "matern32": 1.5, "matern52": 2.5}


def dataset_utility(
    n: int,
    response_time: Callable[[int], float],
    temporal_kernel: FamilyLike,
    lengthscale_time: float,
) -> float:
    """``||u_n||^2 = sum_{i=1}^{n} k_T(i R(n) / l_T)^2`` (BOLT eq. 8).

    Args:
        n: dataset size (>= 1).
        response_time: ``R(n)`` in seconds (or the time unit of ``lengthscale_time``).
        temporal_kernel: family of ``k_T``.
        lengthscale_time: ``l_T`` in the same unit as ``R``.
    """
    if n < 1:
        return 0.0
    lags = np.arange(1, n + 1, dtype=float) * float(response_time(n)) / lengthscale_time
    return float(np.sum(correlation_np(temporal_kernel, lags) ** 2))


def max_dataset_size(
    response_time: Callable[[int], float],
    temporal_kernel: FamilyLike,
    lengthscale_time: float,
    *,
    initial: int | None = None,
    n_max: int = 10_000,
    max_steps: int = 2_000,
) -> int:
    """BOLT's maximal dataset size ``n* = argmax_n sum_{i<=n} k_T(i R(n))^2`` (eq. 9).

    The relaxation ``g(x) = int_1^x k_T(s R(x))^2 ds`` has a unique maximizer, so from an
    initial guess the discrete ascent ``n <- n + sign(u(n+1) - u(n))`` stops at ``n*``
    where the forward difference changes sign (BOLT Sec. 3.3). If the ascent does not
    settle within ``max_steps`` (a far initial guess, or a response-time model for
    which ``u`` is not unimodal numerically), the maximizer is found by brute force.
    When ``R`` grows too slowly for ``u`` to turn down before ``n_max`` (e.g. a constant
    ``R``), ``n_max`` is returned: the cap on the search.

    Args:
        response_time: ``R(n)``, non-negative and non-decreasing.
        temporal_kernel: family of ``k_T``.
        lengthscale_time: ``l_T`` (same time unit as ``R``).
        initial: starting guess (e.g. the previous ``n*``); default 1.
        n_max: largest size considered.
        max_steps: cap on ascent steps before the brute-force fallback.

    Returns:
        ``n*`` in ``[1, n_max]``.
    """
    if not lengthscale_time > 0:
        raise ValueError(f"lengthscale_time must be positive, got {lengthscale_time!r}")
    if n_max < 1:
        raise ValueError(f"n_max must be >= 1, got {n_max!r}")

    def u(n: int) -> float:
        return dataset_utility(n, response_time, temporal_kernel, lengthscale_time)

    n = int(min(max(initial or 1, 1), n_max))
    cache: dict[int, float] = {}

    def cu(m: int) -> float:
        if m not in cache:
            cache[m] = u(m)
        return cache[m]

    for _ in range(max_steps):
        up = cu(n + 1) - cu(n) if n < n_max else -1.0
        if up > 0:
            n += 1
            continue
        down = cu(n) - cu(n - 1) if n > 1 else 1.0
        if down <= 0:
            n -= 1
            continue
        return n
    return _brute_force(u, n_max)


def _brute_force(u: Callable[[int], float], n_max: int) -> int:
    values = [u(n) for n in range(1, n_max + 1)]
    return int(np.argmax(values)) + 1


@dataclass(frozen=True)
class ResponseTimeModel:
    """``R(n) = c0 + c1 n + c2 n^2 + c3 n^3`` seconds, the response time at dataset size ``n``.

    Coefficients are non-negative so that ``R`` is non-negative and non-decreasing.
    """

    coefficients: tuple[float, float, float, float]

    def __post_init__(self) -> None:
        coef = tuple(float(c) for c in self.coefficients)
        if len(coef) != 4:
            raise ValueError(f"a cubic response-time model needs 4 coefficients, got {len(coef)}")
        if not all(math.isfinite(c) and c >= 0 for c in coef):
            raise ValueError(f"response-time coefficients must be finite and >= 0, got {coef}")
        object.__setattr__(self, "coefficients", coef)

    def __call__(self, n: int | float | np.ndarray) -> float | np.ndarray:
        c0, c1, c2, c3 = self.coefficients
        n = np.asarray(n, dtype=float)
        value = c0 + n * (c1 + n * (c2 + n * c3))
        return float(value) if value.ndim == 0 else value

    def as_dict(self) -> dict[str, object]:
        return {"coefficients": list(self.coefficients)}


def fit_cubic(
    sizes: Sequence[float],
    durations: Sequence[float],
    weights: Sequence[float] | None = None,
) -> ResponseTimeModel:
    """Least-squares cubic with non-negative coefficients (NNLS) through ``(n, seconds)`` pairs.

    Non-negativity keeps the fitted ``R(n)`` non-negative and increasing (BOLT needs both;
    BOLT Sec. 4).

    Args:
        sizes: ``(m,)`` dataset sizes.
        durations: ``(m,)`` response times (seconds).
        weights: ``(m,)`` positive weights of the squared residuals (default ones). With
            ``durations`` the means of ``c_j`` measurements at each size and ``weights =
            c_j``, the fit equals the unweighted fit to all measurements (the residual
            sum of squares differs by a constant), so a long run can keep one aggregate
            per size instead of every measurement.
    """
    n = np.asarray(sizes, dtype=float)
    d = np.asarray(durations, dtype=float)
    if n.shape != d.shape or n.ndim != 1 or n.size == 0:
        raise ValueError("sizes and durations must be 1-D arrays of the same non-zero length")
    if not (np.isfinite(n).all() and np.isfinite(d).all()):
        raise ValueError("sizes and durations must be finite")
    w = np.ones_like(n) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != n.shape or not (np.isfinite(w).all() and (w > 0).all()):
        raise ValueError("weights must be positive and finite, one per size")
    root = np.sqrt(w)
    design = np.stack([np.ones_like(n), n, n**2, n**3], axis=1)
    # Columns span many orders of magnitude; scaling them keeps NNLS well conditioned.
    scale = np.maximum(np.abs(design).max(axis=0), 1e-300)
    coef, _ = scipy.optimize.nnls(design / scale * root[:, None], d * root)
    return ResponseTimeModel(tuple(float(c) for c in coef / scale))  # type: ignore[arg-type]


def reset_interval(
    epsilon: float, spatial_kernel: FamilyLike, dim: int, horizon: float | None = None
) -> int:
    """R-GP-UCB's block size ``N`` (Bogunovic, Scarlett & Cevher 2016, Corollary 4.1, Sec. 5).

    With the constants the paper found by cross-validation::

        SE:      N = ceil(min(T, 12 eps^(-1/4)))
        Matern:  N = ceil(min(T, 24 eps^(-1/(4 - c)))),  c = d (d + 1) / (2 nu + d (d + 1))

    Args:
        epsilon: rate of change in (0, 1).
        spatial_kernel: family of ``k_S`` (``nu`` of a Matern family enters ``c``).
        dim: spatial dimension ``d``.
        horizon: ``T`` in steps (``None``: unbounded, the continuous-time variant).

    Returns:
        ``N >= 1``.
    """
    if not 0.0 < epsilon < 1.0:
        raise ValueError(f"epsilon must be in (0, 1), got {epsilon!r}")
    family = as_family(spatial_kernel).value
    if family == "se":
        size = 12.0 * epsilon ** (-0.25)
    else:
        c = dim * (dim + 1) / (2.0 * _MATERN_NU[family] + dim * (dim + 1))
        size = 24.0 * epsilon ** (-1.0 / (4.0 - c))
    if horizon is not None:
        size = min(size, float(horizon))
    return max(1, math.ceil(size))
