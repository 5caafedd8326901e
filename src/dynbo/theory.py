"""Results of the papers that need no GP: BOLT's regret bounds and maximal useful dataset
size (Bardou & Thiran 2025) and R-GP-UCB's block size (Bogunovic, Scarlett & Cevher 2016).

Theorem 3.6 bounds the expected regret of *any* TVBO algorithm from below by ``eps_c T``
(:func:`lower_bound_slope`, :func:`log_lower_bound_slope`), where ``eps_c`` depends on the
tail ``1 - F_T(1 / (2c))`` of the power spectral distribution of ``k_T``
(:func:`spectral_tail`) at half the fastest sampling frequency ``1/c``.

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
import scipy.special

from dynbo.kernels import Family, FamilyLike, as_family, correlation_np, smoothness
from dynbo.validation import positive_int, positive_number

__all__ = [
    "ResponseTimeModel",
    "dataset_utility",
    "fit_cubic",
    "log_lower_bound_slope",
    "log_spectral_tail",
    "lower_bound_slope",
    "max_dataset_size",
    "reset_interval",
    "spectral_tail",
    "upper_bound_beta",
    "upper_bound_regret",
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
    where the forward difference changes sign (BOLT Sec. 3.3). If the ascent has not
    settled after ``max_steps`` steps (a far initial guess, or an ``n*`` at the cap), the
    search gallops from where it is (steps 1, 2, 4, ... in the direction the difference
    points to) until the difference changes sign, then bisects: O(log n_max) more
    evaluations of ``u`` (each O(n)) instead of a search of every size. Either way the
    answer is a local maximum (the difference is positive just below it and not at it),
    the maximum where ``u`` is unimodal. When ``R`` grows too slowly for ``u`` to turn
    down before ``n_max`` (e.g. a constant ``R``), ``n_max`` is returned: the cap.

    Args:
        response_time: ``R(n)``, non-negative and non-decreasing.
        temporal_kernel: family of ``k_T``.
        lengthscale_time: ``l_T`` (same time unit as ``R``).
        initial: starting guess (e.g. the previous ``n*``); default 1.
        n_max: largest size considered.
        max_steps: single ascent steps before the search gallops.

    Returns:
        ``n*`` in ``[1, n_max]``.
    """
    if not lengthscale_time > 0:
        raise ValueError(f"lengthscale_time must be positive, got {lengthscale_time!r}")
    if n_max < 1:
        raise ValueError(f"n_max must be >= 1, got {n_max!r}")
    cache: dict[int, float] = {}

    def u(n: int) -> float:
        if n not in cache:
            cache[n] = dataset_utility(n, response_time, temporal_kernel, lengthscale_time)
        return cache[n]

    def rises(n: int) -> bool:
        """Whether ``u(n + 1) > u(n)``: ``n`` is below ``n*`` (size 0 always is)."""
        if n < 1:
            return True
        return n < n_max and u(n + 1) - u(n) > 0

    n = int(min(max(initial or 1, 1), n_max))
    for _ in range(max_steps):
        if rises(n):
            n += 1
        elif not rises(n - 1):
            n -= 1
        else:
            return n
    return _gallop_and_bisect(rises, n, n_max)


def _gallop_and_bisect(rises: Callable[[int], bool], n: int, n_max: int) -> int:
    """The first size from which ``rises`` is false, found from ``n`` in O(log n_max) calls
    (for a ``rises`` that is true below some size and false from it on)."""
    step = 1
    if rises(n):  # bracket it: rises(below) and not rises(above)
        below, above = n, min(n + step, n_max)
        while rises(above):
            below, step = above, 2 * step
            above = min(below + step, n_max)
    else:
        above, below = n, n - step
        while not rises(below):
            above, step = below, 2 * step
            below = max(above - step, 0)
    while above - below > 1:
        middle = (below + above) // 2
        if rises(middle):
            below = middle
        else:
            above = middle
    return above


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


# --------------------------------------------------------------------------------------
# BOLT's regret bounds (Bardou & Thiran 2025, Theorem 3.6 and Theorem 3.8)
# --------------------------------------------------------------------------------------

#: below this argument of the regularized incomplete beta the Matern log-tail uses its
#: leading hypergeometric term instead of ``log(betainc(...))`` (which would underflow)
_BETA_SERIES_BELOW = 1e-12
#: from this ``A = L sqrt(d) / sigma_c`` on, ``1 - A M(A)`` uses its asymptotic series
_MILLS_SERIES_FROM = 10.0
_MILLS_SERIES_TERMS = 40
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def _parse_family(family: FamilyLike, name: str) -> Family:
    try:
        return as_family(family)
    except ValueError as err:
        raise ValueError(f"{name}: {err}") from None


def _frequencies(frequency: float | np.ndarray) -> np.ndarray:
    try:
        f = np.asarray(frequency, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"frequency must be finite and >= 0, got {frequency!r}") from None
    if not (np.isfinite(f).all() and (f >= 0).all()):
        raise ValueError(f"frequency must be finite and >= 0, got {frequency!r}")
    return f


def _scalar_or_array(value: np.ndarray) -> float | np.ndarray:
    return float(value) if value.ndim == 0 else value


def _matern_beta_argument(nu: float, lengthscale: float, f: np.ndarray) -> np.ndarray:
    """``r = U / a`` with ``U = 2 pi f`` and ``a = sqrt(2 nu) / l`` (dimensionless)."""
    return 2.0 * math.pi * f * lengthscale / math.sqrt(2.0 * nu)


def spectral_tail(
    family: FamilyLike, lengthscale: float, frequency: float | np.ndarray
) -> float | np.ndarray:
    """Tail ``1 - F_T(x)`` of the power spectral distribution ``F_T(x) = 2 int_0^x S_T(z) dz``.

    ``S_T`` is :func:`dynbo.kernels.spectral_density` (``s`` in cycles per time unit, so
    ``F_T(inf) = 1``). The tail is computed directly, never as ``1 - F_T``, so it keeps its
    relative accuracy far in the tail:

    * SE: ``1 - F_T(x) = erfc(sqrt(2) pi l x)``;
    * Matern-nu: ``1 - F_T(x) = I_{a^2 / (a^2 + U^2)}(nu, 1/2)``, the regularized incomplete
      beta function, with ``U = 2 pi x`` and ``a = sqrt(2 nu) / l``.

    Values below the smallest double underflow to 0; :func:`log_spectral_tail` does not.

    Args:
        family: correlation family of ``k_T`` (``se``, ``matern12``, ``matern32``,
            ``matern52``).
        lengthscale: ``l > 0`` (time unit).
        frequency: ``x >= 0`` in cycles per time unit (Hz when time is in seconds); any
            shape.

    Returns:
        ``1 - F_T(x)`` in ``[0, 1]``, a float for a scalar ``frequency``, else an array of
        its shape.

    Raises:
        ValueError: unknown ``family``, non-positive ``lengthscale``, negative or
            non-finite ``frequency``.
    """
    fam = _parse_family(family, "family")
    l = positive_number("lengthscale", lengthscale)
    f = _frequencies(frequency)
    if fam is Family.SE:
        return _scalar_or_array(scipy.special.erfc(math.sqrt(2.0) * math.pi * l * f))
    nu = smoothness(fam)
    r = _matern_beta_argument(nu, l, f)
    with np.errstate(over="ignore"):
        x = 1.0 / (1.0 + r * r)
    return _scalar_or_array(scipy.special.betainc(nu, 0.5, x))


def log_spectral_tail(
    family: FamilyLike, lengthscale: float, frequency: float | np.ndarray
) -> float | np.ndarray:
    """``log(1 - F_T(x))``, finite wherever :func:`spectral_tail` underflows to 0.

    SE: ``log erfcx(z) - z^2`` with ``z = sqrt(2) pi l x``. Matern-nu: ``log I_w(nu, 1/2)``
    with ``log w = -log(1 + (U/a)^2)`` computed without overflow; once ``w < 1e-12`` the
    leading term of ``I_w(nu, 1/2) = w^nu (1 - w)^(1/2) / (nu B(nu, 1/2))
    2F1(nu + 1/2, 1; nu + 1; w)`` (relative error ``O(w^2)``) replaces ``betainc``. Near
    ``x = 0``, where the tail is close to 1, both use ``log1p(-F_T(x))``.

    Args and errors: as :func:`spectral_tail`.

    Returns:
        ``log(1 - F_T(x)) <= 0`` (natural log), a float or an array of ``frequency``'s shape.
    """
    fam = _parse_family(family, "family")
    l = positive_number("lengthscale", lengthscale)
    f = _frequencies(frequency)
    if fam is Family.SE:
        z = math.sqrt(2.0) * math.pi * l * f
        with np.errstate(over="ignore", divide="ignore"):
            far = np.log(scipy.special.erfcx(z)) - z * z
        near = np.log1p(-scipy.special.erf(np.minimum(z, 0.5)))  # tail close to 1
        return _scalar_or_array(np.where(z < 0.5, near, far))
    nu = smoothness(fam)
    r = _matern_beta_argument(nu, l, f)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        big = r > 1.0
        safe = np.where(big, r, 1.0)
        log_w = np.where(
            big,
            -2.0 * np.log(safe) - np.log1p(1.0 / (safe * safe)),
            -np.log1p(np.where(big, 0.0, r) ** 2),
        )
        w = np.exp(log_w)
        direct = np.log(scipy.special.betainc(nu, 0.5, w))
        leading = (
            nu * log_w
            + 0.5 * np.log1p(-w)
            - math.log(nu)
            - scipy.special.betaln(nu, 0.5)
            + np.log1p((nu + 0.5) / (nu + 1.0) * w)
        )
        # tail close to 1 (w close to 1): log1p of minus the distribution itself
        near = np.log1p(-scipy.special.betainc(0.5, nu, np.exp(np.log(r * r) - np.log1p(r * r))))
    out = np.where(w < _BETA_SERIES_BELOW, leading, direct)
    return _scalar_or_array(np.where(w > 0.5, near, out))


def _log_expected_shortfall(a: np.ndarray) -> np.ndarray:
    """``log(phi(A) - A Phi(-A))`` for ``A >= 0`` (``E[(Z - A)^+]``, ``Z ~ N(0, 1)``).

    Written ``phi(A) q(A)`` with ``q(A) = 1 - A M(A)`` and ``M(A) = Phi(-A) / phi(A) =
    sqrt(pi/2) erfcx(A / sqrt(2))`` the Mills ratio. ``q`` cancels for large ``A``
    (``q ~ 1/A^2``), so from ``A = 10`` on it is summed from its asymptotic series
    ``q(A) = sum_{k>=1} (-1)^(k+1) (2k-1)!! / A^(2k)``, whose terms still decrease at the
    40th for every ``A >= 10`` (truncation error below 1e-19 relative).
    """
    a = np.asarray(a, dtype=float)
    small = a < _MILLS_SERIES_FROM
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        a_small = np.where(small, a, 0.0)
        direct = 1.0 - a_small * math.sqrt(math.pi / 2.0) * scipy.special.erfcx(
            a_small / math.sqrt(2.0)
        )
        inv = 1.0 / np.where(small, _MILLS_SERIES_FROM, a) ** 2
        term = inv.copy()
        series = inv.copy()
        for k in range(2, _MILLS_SERIES_TERMS + 1):
            term = term * (-(2.0 * k - 1.0) * inv)
            series = series + term
        q = np.where(small, direct, series)
        return -0.5 * a * a - _LOG_SQRT_2PI + np.log(q)


def log_lower_bound_slope(
    cost: float | np.ndarray,
    *,
    temporal: FamilyLike,
    lengthscale_time: float,
    spatial: FamilyLike = "matern52",
    lengthscale_space: float = 1.0,
    outputscale: float = 1.0,
    lipschitz: float = 1.0,
    dim: int,
) -> float | np.ndarray:
    """``log(eps_c)``, the log of BOLT's lower-bound regret slope (Theorem 3.6, eq. 4-5).

    ::

        sigma_c^2 = 2 lambda (1 + k_S(sqrt(d))) (1 - F_T(1 / (2c)))
        eps_c     = sigma_c phi(-L sqrt(d) / sigma_c) - L sqrt(d) Phi(-L sqrt(d) / sigma_c)
                  = sigma_c [phi(A) - A Phi(-A)],      A = L sqrt(d) / sigma_c,

    and any TVBO algorithm has ``E[R_T] in Omega(eps_c T)``. Everything is computed in log
    space (``log(1 - F_T)`` from :func:`log_spectral_tail`, ``log(phi(A) - A Phi(-A))``
    with an asymptotic series where it cancels), so the value stays finite long after
    ``eps_c`` itself has underflowed; it is ``-inf`` only where even ``log(eps_c)`` is not
    a double (``A^2`` overflows) or ``sigma_c = 0``.

    Args:
        cost: ``c > 0``, the time one evaluation of ``f`` takes (time unit of
            ``lengthscale_time``; the fastest sampling frequency is ``1/c``); any shape.
        temporal: family of ``k_T``.
        lengthscale_time: ``l_T > 0`` (time unit).
        spatial: family of ``k_S`` (default Matern-5/2, the papers' default spatial kernel).
        lengthscale_space: ``l_S > 0``; ``k_S(sqrt(d))`` is the correlation at the diameter
            of ``[0, 1]^d``, i.e. at scaled distance ``sqrt(d) / l_S``.
        outputscale: signal variance ``lambda > 0`` (units of ``f`` squared).
        lipschitz: spatial Lipschitz constant ``L > 0`` of ``f`` (units of ``f`` per unit
            of ``x``).
        dim: spatial dimension ``d >= 1``.

    Returns:
        ``log(eps_c)`` (natural log; ``eps_c`` has the units of ``f``), a float for a
        scalar ``cost``, else an array of its shape.

    Raises:
        ValueError: non-positive or non-finite ``cost``, lengthscale, ``outputscale`` or
            ``lipschitz``; ``dim < 1``; unknown ``temporal`` or ``spatial`` family.
    """
    t_family = _parse_family(temporal, "temporal")
    s_family = _parse_family(spatial, "spatial")
    l_t = positive_number("lengthscale_time", lengthscale_time)
    l_s = positive_number("lengthscale_space", lengthscale_space)
    lam = positive_number("outputscale", outputscale)
    lip = positive_number("lipschitz", lipschitz)
    d = positive_int("dim", dim)
    try:
        c = np.asarray(cost, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"cost must be positive and finite, got {cost!r}") from None
    if not (np.isfinite(c).all() and (c > 0).all()):
        raise ValueError(f"cost must be positive and finite, got {cost!r}")
    k_diameter = float(correlation_np(s_family, math.sqrt(d) / l_s))
    with np.errstate(over="ignore"):
        frequency = 0.5 / c  # overflows to inf only for subnormal costs
    if not np.isfinite(frequency).all():
        raise ValueError(f"cost is too small to take its reciprocal, got {cost!r}")
    log_tail = np.asarray(log_spectral_tail(t_family, l_t, frequency))
    log_sigma = 0.5 * (math.log(2.0 * lam) + math.log1p(k_diameter) + log_tail)
    scale = lip * math.sqrt(d)
    with np.errstate(over="ignore"):
        a = scale * np.exp(-log_sigma)
    with np.errstate(invalid="ignore"):
        out = log_sigma + _log_expected_shortfall(a)
    out = np.where(np.isnan(out), -np.inf, out)  # sigma_c = 0: -inf + -inf
    return _scalar_or_array(out)


def lower_bound_slope(
    cost: float | np.ndarray,
    *,
    temporal: FamilyLike,
    lengthscale_time: float,
    spatial: FamilyLike = "matern52",
    lengthscale_space: float = 1.0,
    outputscale: float = 1.0,
    lipschitz: float = 1.0,
    dim: int,
) -> float | np.ndarray:
    """BOLT's lower-bound regret slope ``eps_c`` (Thm 3.6, eq. 4-5): ``E[R_T] in Omega(eps_c T)``.

    ``exp`` of :func:`log_lower_bound_slope` (see there for the formula, the arguments and
    the errors): exact to a few ulps times ``|log eps_c|``, subnormal where ``eps_c`` is,
    and 0 only where ``eps_c`` is below the smallest subnormal double.

    Returns:
        ``eps_c >= 0`` (units of ``f``), a float for a scalar ``cost``, else an array of
        its shape.
    """
    log_eps = log_lower_bound_slope(
        cost,
        temporal=temporal,
        lengthscale_time=lengthscale_time,
        spatial=spatial,
        lengthscale_space=lengthscale_space,
        outputscale=outputscale,
        lipschitz=lipschitz,
        dim=dim,
    )
    return _scalar_or_array(np.exp(np.asarray(log_eps)))


def upper_bound_beta(n: int, *, dim: int, lipschitz: float, delta: float) -> float:
    """GP-UCB's ``beta_n = 2 d log(L d n^2 / (6 delta)) + 4 log(pi n)`` (BOLT eq. 63).

    Args:
        n: iteration ``n >= 1``.
        dim: spatial dimension ``d >= 1``.
        lipschitz: spatial Lipschitz constant ``L > 0``.
        delta: failure probability in ``(0, 1)``.

    Returns:
        ``beta_n`` (dimensionless; negative when ``L d n^2 / (6 delta)`` is small).

    Raises:
        ValueError: ``n < 1``, ``dim < 1``, non-positive ``lipschitz``, ``delta`` outside
            ``(0, 1)``.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    d = positive_int("dim", dim)
    lip = positive_number("lipschitz", lipschitz)
    if not (isinstance(delta, (int, float, np.floating)) and 0.0 < float(delta) < 1.0):
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    n = int(n)
    return 2.0 * d * math.log(lip * d * n * n / (6.0 * float(delta))) + 4.0 * math.log(math.pi * n)


def upper_bound_regret(
    horizon: int,
    dataset_size: int,
    response_time: Callable[[int], float],
    *,
    temporal: FamilyLike,
    lengthscale_time: float,
    spatial: FamilyLike = "matern52",
    lengthscale_space: float = 1.0,
    outputscale: float = 1.0,
    noise_variance: float,
    lipschitz: float = 1.0,
    dim: int,
    delta: float = 0.05,
    beta: float | None = None,
) -> float:
    """BOLT's upper bound on the cumulative regret of GP-UCB with a capped dataset (Thm 3.8).

    ::

        R_T <= 2 + sqrt(4 lambda beta_T T (T - lambda k_S(sqrt(d))^2 / (lambda + sigma_0^2)
                                               * ||u_n||^2))          (eq. 7)
        u_n  = (k_T(R(n)), k_T(2 R(n)), ..., k_T(n R(n)))              (eq. 8)

    with probability at least ``1 - delta``, for an algorithm whose dataset holds at most
    ``n`` observations and answers in ``R(n)``. The proof needs ``T >= n``. ``||u_n||^2``
    is :func:`dataset_utility`.

    Args:
        horizon: number of iterations ``T >= dataset_size``.
        dataset_size: maximal dataset size ``n >= 1``.
        response_time: ``R(n)`` (time unit of ``lengthscale_time``), e.g. a
            :class:`ResponseTimeModel`.
        temporal: family of ``k_T``; ``lengthscale_time``: ``l_T > 0``.
        spatial: family of ``k_S``; ``lengthscale_space``: ``l_S > 0`` (``k_S(sqrt(d))``
            is the correlation at scaled distance ``sqrt(d) / l_S``).
        outputscale: signal variance ``lambda > 0``.
        noise_variance: observation noise variance ``sigma_0^2 >= 0``.
        lipschitz: ``L > 0`` (enters ``beta_T`` only).
        dim: spatial dimension ``d >= 1``.
        delta: failure probability in ``(0, 1)`` (enters ``beta_T`` only).
        beta: ``beta_T``; default :func:`upper_bound_beta` at ``n = T`` (eq. 63).

    Returns:
        The bound on ``R_T`` (units of ``f``).

    Raises:
        ValueError: ``horizon < dataset_size``, ``dataset_size < 1``, a negative or
            non-finite ``noise_variance``, ``beta`` or ``R(n)``, and the errors of
            :func:`upper_bound_beta` and :func:`log_lower_bound_slope`.
    """
    for name, value in (("horizon", horizon), ("dataset_size", dataset_size)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if horizon < dataset_size:
        raise ValueError(
            f"horizon must be >= dataset_size (Theorem 3.8 needs T >= n), got "
            f"horizon={horizon!r}, dataset_size={dataset_size!r}"
        )
    t_family = _parse_family(temporal, "temporal")
    s_family = _parse_family(spatial, "spatial")
    l_t = positive_number("lengthscale_time", lengthscale_time)
    l_s = positive_number("lengthscale_space", lengthscale_space)
    lam = positive_number("outputscale", outputscale)
    d = positive_int("dim", dim)
    noise = float(noise_variance)
    if not (math.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise_variance must be finite and >= 0, got {noise_variance!r}")
    if beta is None:
        beta = upper_bound_beta(int(horizon), dim=d, lipschitz=lipschitz, delta=delta)
    else:
        positive_number("lipschitz", lipschitz)
        if not (isinstance(delta, (int, float, np.floating)) and 0.0 < float(delta) < 1.0):
            raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    beta = float(beta)
    if not (math.isfinite(beta) and beta >= 0):
        raise ValueError(
            f"beta must be finite and >= 0, got {beta!r} (eq. 63 is negative when "
            "L d T^2 / (6 delta) is small; pass beta explicitly)"
        )
    r_n = float(response_time(int(dataset_size)))
    if not (math.isfinite(r_n) and r_n >= 0):
        raise ValueError(f"response_time(dataset_size) must be finite and >= 0, got {r_n!r}")
    utility = dataset_utility(int(dataset_size), lambda _: r_n, t_family, l_t)
    k_diameter = float(correlation_np(s_family, math.sqrt(d) / l_s))
    t = float(horizon)
    inner = t - lam * k_diameter**2 / (lam + noise) * utility
    return 2.0 + math.sqrt(4.0 * lam * beta * t * max(inner, 0.0))
