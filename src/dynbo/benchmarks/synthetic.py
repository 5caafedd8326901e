"""Synthetic time-varying benchmarks: classic test functions with time as their last input.

A ``(d+1)``-dimensional test function ``g(z)``, ``z = (x_1, ..., x_d, z_{d+1})``, written
for minimization as in the literature, becomes a time-varying maximization problem

    f(x, t) = -g(x, s(t)),     s(t) = lo + (hi - lo) t / T,

where ``[lo, hi]`` is the interval every coordinate of ``g`` lives in (the time coordinate
spans the same interval as the spatial ones, e.g. ``[-32, 32]`` for Ackley) and ``t`` is
wall time in seconds, ``t in [0, T]``, ``T = 600 s`` by default (BOLT Sec. 5 and App. F,
W-DBO App. G.2). Times outside ``[0, T]`` extrapolate the same linear map.

``optimum(t)`` is exact where the structure of ``g`` gives the minimizer in closed form
(Ackley, Rastrigin, Schwefel, Styblinski-Tang, Griewank; see each class), and otherwise a
global search (:mod:`dynbo.benchmarks.search`) warm-started from the maximizers already
found at the nearest cached times. Results are cached per time stamp.
"""

from __future__ import annotations

import math
from abc import abstractmethod

import numpy as np
import scipy.optimize

from dynbo.benchmarks.base import Benchmark
from dynbo.benchmarks.search import (
    BoxSearchSettings,
    OptimumCache,
    maximize_box,
    maximize_interval,
)
from dynbo.validation import MAX_BOX_DIM

__all__ = [
    "Ackley",
    "Eggholder",
    "Griewank",
    "Hartmann3",
    "Hartmann6",
    "PiecewiseSixHumpCamel",
    "Powell",
    "Rastrigin",
    "Rosenbrock",
    "Schwefel",
    "Shekel",
    "SixHumpCamel",
    "StyblinskiTang",
    "TimeAsInputBenchmark",
    "SYNTHETIC_BENCHMARKS",
]

BOLT_REF = "Bardou & Thiran, Optimizing Through Change (BOLT), App. F and Table 2"
WDBO_REF = "Bardou, Thiran & Ranieri, This Too Shall Pass (W-DBO), App. G.2"

#: Default noise of the benchmarks BOLT's Table 2 does not list: this fraction of the
#: signal variance (W-DBO App. G.1).
RELATIVE_NOISE_DEFAULT = 0.05
#: Default cost ``c`` (s) of the benchmarks BOLT's Table 2 does not list (protocol).
COST_DEFAULT = 0.1

_SIGNAL_VARIANCE_CACHE: dict[tuple[str, int], float] = {}
_OPTIMUM_CACHE_SIZE = 65_536
_WARM_STARTS = 4


def _points(x: np.ndarray, dim: int) -> tuple[np.ndarray, bool]:
    """``(m, dim)`` float view of ``x`` and whether ``x`` was a single ``(dim,)`` point."""
    array = np.asarray(x, dtype=float)
    single = array.ndim == 1
    array = array.reshape(1, dim) if single else array.reshape(-1, dim)
    return array, single


class TimeAsInputBenchmark(Benchmark):
    """A ``(d+1)``-dimensional minimization test function ``g`` with time as last input.

    Subclasses give ``g`` (and its gradient when the optimum is searched for in ``d >= 2``)
    and, where known, the minimizer of a time slice in closed form.

    Args:
        dim: spatial dimension ``d`` (the test function has ``d + 1`` inputs); ``None``
            takes the size the papers use.
        horizon: ``T`` in seconds; ``[0, T]`` maps linearly onto ``[lo, hi]``.
        noise_variance: ``sigma_0^2``; ``None`` takes BOLT Table 2's value, or 5 % of the
            signal variance for functions that table does not list.
        cost: ``c`` in seconds per evaluation; ``None`` takes BOLT Table 2's value, or 0.1 s.

    Class attributes:
        interval: ``(lo, hi)``, the domain of every coordinate of ``g`` (time included).
        default_dim: ``d`` used by the papers.
        bolt_noise_variance, bolt_cost: BOLT Table 2 values (``None`` if not listed).
    """

    interval: tuple[float, float]
    default_dim: int
    bolt_noise_variance: float | None = None
    bolt_cost: float | None = None
    search_settings = BoxSearchSettings()

    def __init__(
        self,
        dim: int | None = None,
        *,
        horizon: float = 600.0,
        noise_variance: float | None = None,
        cost: float | None = None,
    ) -> None:
        dim = self.default_dim if dim is None else dim
        if isinstance(dim, bool) or int(dim) != dim or dim < 1:
            raise ValueError(f"{self.name}: dim must be a positive integer, got {dim!r}")
        if dim > MAX_BOX_DIM:
            # its optimum search and the policies' box searches sample Sobol sequences
            raise ValueError(f"{self.name}: dim must be at most {MAX_BOX_DIM}, got {dim!r}")
        self.dim = int(dim)
        self._check_dim(self.dim)
        if not horizon > 0:
            raise ValueError(f"{self.name}: horizon must be positive, got {horizon!r}")
        self.horizon = float(horizon)
        self.time_unit = "s"
        lo, hi = self.interval
        self.bounds = np.array([[lo] * self.dim, [hi] * self.dim], dtype=float)
        if cost is None:
            cost = self.bolt_cost if self.bolt_cost is not None else COST_DEFAULT
        if cost < 0:
            raise ValueError(f"{self.name}: cost must be >= 0, got {cost!r}")
        self.cost = float(cost)
        self._optima = OptimumCache(_OPTIMUM_CACHE_SIZE)
        if noise_variance is None:
            if self.bolt_noise_variance is not None:
                noise_variance = self.bolt_noise_variance
            else:
                noise_variance = RELATIVE_NOISE_DEFAULT * self._cached_signal_variance()
        if noise_variance < 0:
            raise ValueError(f"{self.name}: noise_variance must be >= 0, got {noise_variance!r}")
        self.noise_variance = float(noise_variance)

    # ------------------------------------------------------------------ definition
    def _check_dim(self, dim: int) -> None:
        """Raise ``ValueError`` when the family has no member with ``d = dim``."""

    @abstractmethod
    def g(self, z: np.ndarray) -> np.ndarray:
        """The test function in its literature (minimization) form.

        Args:
            z: ``(m, d + 1)`` points; the last column is the time coordinate ``s``.

        Returns:
            ``(m,)`` values.
        """

    def g_and_gradient(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``g(z)`` ``(m,)`` and its gradient ``(m, d + 1)`` with respect to ``z``."""
        raise NotImplementedError(f"{self.name} has no analytic gradient")

    def time_coordinate(self, t: float | np.ndarray) -> np.ndarray:
        """``s(t) = lo + (hi - lo) t / T``: the input of ``g`` that wall time ``t`` (s) sets."""
        lo, hi = self.interval
        return lo + (hi - lo) * np.asarray(t, dtype=float) / self.horizon

    def f(self, x: np.ndarray, t: float | np.ndarray) -> np.ndarray:
        """``f(x, t) = -g(x, s(t))``.

        Args:
            x: ``(m, d)`` points (or one ``(d,)`` point) in the original domain.
            t: a time or ``(m,)`` times, in seconds.

        Returns:
            ``(m,)`` values (0-d for a ``(d,)`` point).
        """
        x, t = self.checked_input(x, t)
        points, single = _points(x, self.dim)
        s = np.broadcast_to(self.time_coordinate(t), (points.shape[0],))
        values = -self.g(np.column_stack([points, s]))
        return values.reshape(()) if single else values

    # ------------------------------------------------------------------ optimum
    def optimum(self, t: float) -> tuple[np.ndarray, float]:
        """``(x*, f*)`` at time ``t`` (s): a global maximizer ``(d,)`` and the maximum.

        Cached per time stamp; a search is warm-started from the maximizers of the nearest
        cached times.
        """
        t = self.checked_time(t)
        key = float(t)
        hit = self._optima.get(key)
        if hit is None:
            s = float(self.time_coordinate(key))
            x, g_min = self._minimize_slice(s, self._warm_starts(key))
            hit = (np.clip(np.asarray(x, dtype=float), self.bounds[0], self.bounds[1]), g_min)
            self._optima.put(key, *hit)
        return hit[0].copy(), -hit[1]

    def clear_cache(self) -> None:
        """Forget every cached optimum (for timing a cold call)."""
        self._optima.clear()

    def _warm_starts(self, t: float) -> np.ndarray | None:
        """Maximizers ``(k, d)`` already found at the cached times nearest to ``t``."""
        neighbours = self._optima.nearest(t, _WARM_STARTS)
        return np.array([x for _, x in neighbours]) if neighbours else None

    def _structural_starts(self, s: float) -> np.ndarray | None:
        """Starts the structure of ``g`` suggests (e.g. bump centres), ``(k, d)`` or None."""
        return None

    def _slice_kinks(self, s: float) -> np.ndarray | None:
        """For ``d = 1``: points where ``g(., s)`` is not differentiable, or None."""
        return None

    def _minimize_slice(self, s: float, warm_starts: np.ndarray | None) -> tuple[np.ndarray, float]:
        """``(x*, g*)``: a global minimizer of ``x -> g(x, s)`` over the box and the minimum.

        The default is a global search; subclasses with a closed form override it.
        """
        lo, hi = self.interval
        if self.dim == 1:
            extra = [a for a in (self._slice_kinks(s), warm_starts) if a is not None]
            x, value = maximize_interval(
                lambda u: -self.g(np.column_stack([u, np.full_like(u, s)])),
                lo,
                hi,
                extra_points=np.concatenate([np.ravel(a) for a in extra]) if extra else None,
            )
            return np.array([x]), -value

        def value_and_gradient(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            z = np.column_stack([x, np.full(x.shape[0], s)])
            values, gradients = self.g_and_gradient(z)
            return -values, -gradients[:, : self.dim]

        starts = [a for a in (self._structural_starts(s), warm_starts) if a is not None]
        x, value = maximize_box(
            value_and_gradient,
            self.bounds[0],
            self.bounds[1],
            settings=self.search_settings,
            extra_starts=np.vstack(starts) if starts else None,
            values=lambda x: -self.g(np.column_stack([x, np.full(x.shape[0], s)])),
        )
        return x, -value

    def _cached_signal_variance(self) -> float:
        """Signal variance over ``S x [0, T]`` (1e5 samples, seed 0), cached per ``(name, d)``.

        It does not depend on ``T``: uniform ``t`` gives a uniform time coordinate.
        """
        key = (self.name, self.dim)
        if key not in _SIGNAL_VARIANCE_CACHE:
            _SIGNAL_VARIANCE_CACHE[key] = self.signal_variance(samples=100_000, seed=0)
        return _SIGNAL_VARIANCE_CACHE[key]


def _separable_minimizer(term, lower: float, upper: float) -> float:
    """Global minimizer of a 1-D function on ``[lower, upper]`` (grid + golden section)."""
    x, _ = maximize_interval(lambda u: -term(u), lower, upper, grid_points=200_001)
    return x


# ---------------------------------------------------------------------- families
class Ackley(TimeAsInputBenchmark):
    """Ackley: ``g(z) = -a exp(-b sqrt(mean z_i^2)) - exp(mean cos(c z_i)) + a + e``.

    ``a = 20, b = 0.2, c = 2 pi``, every coordinate in ``[-32, 32]``; Ackley(4) in the
    papers (``d = 3``). Exact optimum: for any time coordinate ``s`` the first term
    increases with every ``|x_i|`` and the second is smallest when every ``cos(c x_i) = 1``;
    ``x = 0`` achieves both, so ``x* = 0``.
    """

    name = "ackley"
    reference = f"{BOLT_REF} (Ackley(4)); {WDBO_REF}"
    interval = (-32.0, 32.0)
    default_dim = 3
    bolt_noise_variance = 0.05
    bolt_cost = 0.05
    a, b, c = 20.0, 0.2, 2.0 * math.pi

    def g(self, z: np.ndarray) -> np.ndarray:
        return self.g_and_gradient(z)[0]

    def g_and_gradient(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = z.shape[1]
        radius = np.sqrt(np.mean(z * z, axis=1))
        decay = np.exp(-self.b * radius)
        wave = np.exp(np.mean(np.cos(self.c * z), axis=1))
        values = -self.a * decay - wave + self.a + math.e
        # The radial term has a cone at z = 0; its subgradient 0 is used there.
        safe_radius = np.where(radius > 0, radius, 1.0)
        radial = np.where(radius > 0, self.a * self.b * decay / (n * safe_radius), 0.0)
        gradients = radial[:, None] * z + (wave[:, None] * self.c / n) * np.sin(self.c * z)
        return values, gradients

    def _minimize_slice(self, s: float, warm_starts: np.ndarray | None) -> tuple[np.ndarray, float]:
        x = np.zeros(self.dim)
        return x, float(self.g(np.append(x, s)[None, :])[0])


class Griewank(TimeAsInputBenchmark):
    """Griewank: ``g(z) = sum z_i^2 / 4000 - prod cos(z_i / sqrt(i)) + 1``, ``[-600, 600]``.

    Griewank(6) in BOLT (``d = 5``). Exact optimum of a slice: with
    ``c = cos(s / sqrt(d + 1))`` the slice is ``sum x_i^2/4000 - c P(x) + const``,
    ``P(x) = prod_{i<=d} cos(x_i / sqrt(i))``.

    * ``c >= 0``: ``P <= 1`` and the quadratic is ``>= 0``, so ``x* = 0``.
    * ``c < 0``: the slice is ``sum x_i^2/4000 + |c| P``. Any ``x`` is matched or beaten by
      a point ``y e_1``: if ``P < 0`` take ``y = x_j / sqrt(j)`` for a coordinate with
      ``cos < 0`` (then ``cos y <= P`` and ``y^2 <= |x|^2``); if ``P >= 0`` take
      ``y = arccos P``, which is at most ``sqrt(sum (x_i/sqrt(i))^2) <= |x|`` (spherical
      Pythagoras: ``arccos(cos a cos b) <= sqrt(a^2 + b^2)`` on ``[0, pi/2]``). So
      ``x* = y* e_1`` with ``y*`` minimizing ``y^2/4000 + |c| cos y``: ``y* = 0`` when
      ``|c| <= 1/2000``, else the root of ``y / (2000 |c|) = sin y`` in ``(0, pi)``.
    """

    name = "griewank"
    reference = f"{BOLT_REF} (Griewank(6))"
    interval = (-600.0, 600.0)
    default_dim = 5
    bolt_noise_variance = 0.30
    bolt_cost = 0.05

    def g(self, z: np.ndarray) -> np.ndarray:
        scale = np.sqrt(np.arange(1, z.shape[1] + 1))
        return np.sum(z * z, axis=1) / 4000.0 - np.prod(np.cos(z / scale), axis=1) + 1.0

    def g_and_gradient(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        scale = np.sqrt(np.arange(1, z.shape[1] + 1))
        cosines = np.cos(z / scale)
        # Products of all cosines but one, without dividing by a cosine that may be 0.
        ones = np.ones((z.shape[0], 1))
        before = np.cumprod(np.hstack([ones, cosines[:, :-1]]), axis=1)
        after = np.cumprod(np.hstack([ones, cosines[:, :0:-1]]), axis=1)[:, ::-1]
        others = before * after
        values = np.sum(z * z, axis=1) / 4000.0 - np.prod(cosines, axis=1) + 1.0
        gradients = z / 2000.0 + others * np.sin(z / scale) / scale
        return values, gradients

    def _minimize_slice(self, s: float, warm_starts: np.ndarray | None) -> tuple[np.ndarray, float]:
        c = math.cos(s / math.sqrt(self.dim + 1))
        x = np.zeros(self.dim)
        if c < -1.0 / 2000.0:
            magnitude = -c
            x[0] = scipy.optimize.brentq(
                lambda y: y / (2000.0 * magnitude) - math.sin(y), 1e-9, math.pi, xtol=1e-15
            )
            # The root is the minimizer (y = 0 is then a local maximum); keep it only if it
            # is no worse, which also guards against round-off at the threshold.
            if self.g(np.append(x, s)[None, :])[0] > self.g(np.append(0.0 * x, s)[None, :])[0]:
                x[0] = 0.0
        return x, float(self.g(np.append(x, s)[None, :])[0])


class Schwefel(TimeAsInputBenchmark):
    """Schwefel: ``g(z) = 418.9829 (d+1) - sum z_i sin(sqrt|z_i|)`` on ``[-500, 500]``.

    Schwefel(4) in the papers (``d = 3``). Separable and the time coordinate enters as its
    own term, so the minimizer is the same for every time: every ``x_i`` at the 1-D
    minimizer ``420.9687...`` of ``-u sin(sqrt|u|)`` (computed once, to round-off).
    """

    name = "schwefel"
    reference = f"{BOLT_REF} (Schwefel(4)); {WDBO_REF}"
    interval = (-500.0, 500.0)
    default_dim = 3
    bolt_noise_variance = 0.25
    bolt_cost = 0.05
    _minimizer: float | None = None

    def g(self, z: np.ndarray) -> np.ndarray:
        return 418.9829 * z.shape[1] - np.sum(z * np.sin(np.sqrt(np.abs(z))), axis=1)

    def g_and_gradient(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        root = np.sqrt(np.abs(z))
        gradients = -(np.sin(root) + 0.5 * root * np.cos(root))
        return self.g(z), gradients

    @classmethod
    def coordinate_minimizer(cls) -> float:
        """The minimizer ``420.9687...`` of ``-u sin(sqrt|u|)`` on ``[-500, 500]``."""
        if cls._minimizer is None:
            cls._minimizer = _separable_minimizer(
                lambda u: -u * np.sin(np.sqrt(np.abs(u))), *cls.interval
            )
        return cls._minimizer

    def _minimize_slice(self, s: float, warm_starts: np.ndarray | None) -> tuple[np.ndarray, float]:
        x = np.full(self.dim, self.coordinate_minimizer())
        return x, float(self.g(np.append(x, s)[None, :])[0])


class Rastrigin(TimeAsInputBenchmark):
    """Rastrigin: ``g(z) = a (d+1) + sum (z_i^2 - a cos(2 pi z_i))``, ``a = 10``, ``[-4, 4]``.

    Rastrigin(5) in W-DBO (``d = 4``). Separable, each term smallest at 0: ``x* = 0``.
    """

    name = "rastrigin"
    reference = f"{WDBO_REF} (Rastrigin(5))"
    interval = (-4.0, 4.0)
    default_dim = 4
    a = 10.0

    def g(self, z: np.ndarray) -> np.ndarray:
        return self.a * z.shape[1] + np.sum(z * z - self.a * np.cos(2 * math.pi * z), axis=1)

    def g_and_gradient(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        gradients = 2.0 * z + 2.0 * math.pi * self.a * np.sin(2 * math.pi * z)
        return self.g(z), gradients

    def _minimize_slice(self, s: float, warm_starts: np.ndarray | None) -> tuple[np.ndarray, float]:
        x = np.zeros(self.dim)
        return x, float(self.g(np.append(x, s)[None, :])[0])


class StyblinskiTang(TimeAsInputBenchmark):
    """Styblinski-Tang: ``g(z) = 1/2 sum (z_i^4 - 16 z_i^2 + 5 z_i)`` on ``[-5, 5]``.

    Styblinski-Tang(4) in W-DBO (``d = 3``). Separable: every ``x*_i = -2.903534...``, the
    smaller real root of ``4u^3 - 32u + 5 = 0``.
    """

    name = "styblinski-tang"
    reference = f"{WDBO_REF} (Styblinski-Tang(4))"
    interval = (-5.0, 5.0)
    default_dim = 3

    def g(self, z: np.ndarray) -> np.ndarray:
        return 0.5 * np.sum(z**4 - 16.0 * z**2 + 5.0 * z, axis=1)

    def g_and_gradient(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.g(z), 0.5 * (4.0 * z**3 - 32.0 * z + 5.0)

    @staticmethod
    def coordinate_minimizer() -> float:
        """``-2.903534...``: the global minimizer of ``u^4 - 16u^2 + 5u``."""
        roots = np.roots([4.0, 0.0, -32.0, 5.0])
        real = roots[np.abs(roots.imag) < 1e-9].real
        return float(real[np.argmin(real**4 - 16.0 * real**2 + 5.0 * real)])

    def _minimize_slice(self, s: float, warm_starts: np.ndarray | None) -> tuple[np.ndarray, float]:
        x = np.full(self.dim, self.coordinate_minimizer())
        return x, float(self.g(np.append(x, s)[None, :])[0])


class Rosenbrock(TimeAsInputBenchmark):
    """Rosenbrock: ``g(z) = sum_{i<=d} 100 (z_{i+1} - z_i^2)^2 + (z_i - 1)^2`` on ``[-1, 1.5]``.

    Rosenbrock(3) in W-DBO (``d = 2``). Optimum by global search.
    """

    name = "rosenbrock"
    reference = f"{WDBO_REF} (Rosenbrock(3))"
    interval = (-1.0, 1.5)
    default_dim = 2

    def g(self, z: np.ndarray) -> np.ndarray:
        head, tail = z[:, :-1], z[:, 1:]
        return np.sum(100.0 * (tail - head**2) ** 2 + (head - 1.0) ** 2, axis=1)

    def g_and_gradient(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        head, tail = z[:, :-1], z[:, 1:]
        valley = tail - head**2
        gradients = np.zeros_like(z)
        gradients[:, :-1] += -400.0 * valley * head + 2.0 * (head - 1.0)
        gradients[:, 1:] += 200.0 * valley
        return self.g(z), gradients


class Powell(TimeAsInputBenchmark):
    """Powell: sum over groups of four of
    ``(z1 + 10 z2)^2 + 5 (z3 - z4)^2 + (z2 - 2 z3)^4 + 10 (z1 - z4)^4`` on ``[-4, 5]``.

    ``d + 1`` must be a multiple of 4; Powell(4) in the papers (``d = 3``). Every slice is
    convex (a sum of convex functions of affine maps), so any local minimum is global;
    found by the box search.
    """

    name = "powell"
    reference = f"{BOLT_REF} (Powell(4)); {WDBO_REF}"
    interval = (-4.0, 5.0)
    default_dim = 3
    bolt_noise_variance = 2.50
    bolt_cost = 1.00

    def _check_dim(self, dim: int) -> None:
        if (dim + 1) % 4:
            raise ValueError(f"powell: d + 1 must be a multiple of 4, got d = {dim}")

    def g(self, z: np.ndarray) -> np.ndarray:
        a, b, c, e = (z[:, k::4] for k in range(4))
        terms = (a + 10.0 * b) ** 2 + 5.0 * (c - e) ** 2 + (b - 2.0 * c) ** 4 + 10.0 * (a - e) ** 4
        return np.sum(terms, axis=1)

    def g_and_gradient(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a, b, c, e = (z[:, k::4] for k in range(4))
        p, q, r, w = a + 10.0 * b, c - e, b - 2.0 * c, a - e
        values = np.sum(p**2 + 5.0 * q**2 + r**4 + 10.0 * w**4, axis=1)
        gradients = np.empty_like(z)
        gradients[:, 0::4] = 2.0 * p + 40.0 * w**3
        gradients[:, 1::4] = 20.0 * p + 4.0 * r**3
        gradients[:, 2::4] = 10.0 * q - 8.0 * r**3
        gradients[:, 3::4] = -10.0 * q - 40.0 * w**3
        return values, gradients


class Shekel(TimeAsInputBenchmark):
    """Shekel (m = 10): ``g(z) = -sum_i (sum_j (z_j - C_ji)^2 + beta_i)^(-1)`` on ``[0, 10]^4``.

    Shekel(4), time is the 4th coordinate (``d = 3``). Optimum by global search, with the
    spatial parts of the ten centres ``C_.i`` as extra starts.
    """

    name = "shekel"
    reference = f"{BOLT_REF} (Shekel(4)); {WDBO_REF}"
    interval = (0.0, 10.0)
    default_dim = 3
    bolt_noise_variance = 0.02
    bolt_cost = 0.50
    beta = 0.1 * np.array([1, 2, 2, 4, 4, 6, 3, 7, 5, 5], dtype=float)
    centres = np.array(
        [
            [4, 1, 8, 6, 3, 2, 5, 8, 6, 7],
            [4, 1, 8, 6, 7, 9, 3, 1, 2, 3.6],
            [4, 1, 8, 6, 3, 2, 5, 8, 6, 7],
            [4, 1, 8, 6, 7, 9, 3, 1, 2, 3.6],
        ],
        dtype=float,
    )

    def _check_dim(self, dim: int) -> None:
        if dim != 3:
            raise ValueError(f"shekel is 4-dimensional (d = 3 plus time), got d = {dim}")

    def g(self, z: np.ndarray) -> np.ndarray:
        # One centre at a time: large batches (the search's Sobol sample) then need no
        # (m, 4, 10) temporaries.
        total = np.zeros(z.shape[0])
        for centre, beta in zip(self.centres.T, self.beta):
            total += 1.0 / (np.sum((z - centre) ** 2, axis=1) + beta)
        return -total

    def g_and_gradient(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        offsets = z[:, :, None] - self.centres[None, :, :]
        inverse = 1.0 / (np.sum(offsets**2, axis=1) + self.beta)
        gradients = np.sum(2.0 * offsets * (inverse**2)[:, None, :], axis=2)
        return -np.sum(inverse, axis=1), gradients

    def _structural_starts(self, s: float) -> np.ndarray:
        return self.centres[: self.dim].T.copy()


class _Hartmann(TimeAsInputBenchmark):
    """Hartmann: ``g(z) = -sum_{i=1}^4 alpha_i exp(-sum_j A_ij (z_j - P_ij)^2)`` on ``[0, 1]``."""

    interval = (0.0, 1.0)
    alpha = np.array([1.0, 1.2, 3.0, 3.2])
    A: np.ndarray
    P: np.ndarray

    def _check_dim(self, dim: int) -> None:
        if dim != self.default_dim:
            raise ValueError(
                f"{self.name} is {self.default_dim + 1}-dimensional "
                f"(d = {self.default_dim} plus time), got d = {dim}"
            )

    def g(self, z: np.ndarray) -> np.ndarray:
        offsets = z[:, None, :] - self.P[None, :, :]
        return -np.exp(-np.sum(self.A * offsets**2, axis=2)) @ self.alpha

    def g_and_gradient(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        offsets = z[:, None, :] - self.P[None, :, :]
        bumps = self.alpha * np.exp(-np.sum(self.A * offsets**2, axis=2))
        gradients = np.sum(2.0 * self.A * offsets * bumps[:, :, None], axis=1)
        return -np.sum(bumps, axis=1), gradients

    def _structural_starts(self, s: float) -> np.ndarray:
        return self.P[:, : self.dim].copy()


class Hartmann3(_Hartmann):
    """Hartmann-3 (time is the 3rd coordinate, ``d = 2``). Optimum by global search, with
    the spatial parts of the rows of ``P`` as extra starts."""

    name = "hartmann3"
    reference = f"{BOLT_REF} (Hartmann(3)); {WDBO_REF}"
    default_dim = 2
    bolt_noise_variance = 0.05
    bolt_cost = 1.00
    A = np.array([[3.0, 10, 30], [0.1, 10, 35], [3.0, 10, 30], [0.1, 10, 35]])
    P = 1e-4 * np.array(
        [[3689, 1170, 2673], [4699, 4387, 7470], [1091, 8732, 5547], [381, 5743, 8828]],
        dtype=float,
    )


class Hartmann6(_Hartmann):
    """Hartmann-6 (time is the 6th coordinate, ``d = 5``). Optimum by global search, with
    the spatial parts of the rows of ``P`` as extra starts."""

    name = "hartmann6"
    reference = f"{BOLT_REF} (Hartmann(6)); {WDBO_REF}"
    default_dim = 5
    bolt_noise_variance = 0.05
    bolt_cost = 0.10
    A = np.array(
        [
            [10, 3, 17, 3.50, 1.7, 8],
            [0.05, 10, 17, 0.1, 8, 14],
            [3, 3.5, 1.7, 10, 17, 8],
            [17, 8, 0.05, 10, 0.1, 14],
        ],
        dtype=float,
    )
    P = 1e-4 * np.array(
        [
            [1312, 1696, 5569, 124, 8283, 5886],
            [2329, 4135, 8307, 3736, 1004, 9991],
            [2348, 1451, 3522, 2883, 3047, 6650],
            [4047, 8828, 8732, 5743, 1091, 381],
        ],
        dtype=float,
    )


class Eggholder(TimeAsInputBenchmark):
    """Eggholder: ``g(z) = -(z2 + 47) sin(sqrt|z2 + z1/2 + 47|) - z1 sin(sqrt|z1 - z2 - 47|)``.

    ``[-512, 512]^2``, time is ``z2`` (``d = 1``). The slice has cusps where a square-root
    argument vanishes (``x = -2 (s + 47)`` and ``x = s + 47``), which can be maxima of
    ``f``; the 1-D search (grid + golden section) handles them and tries them explicitly.
    """

    name = "eggholder"
    reference = f"{BOLT_REF} (Eggholder(2)); {WDBO_REF}"
    interval = (-512.0, 512.0)
    default_dim = 1
    bolt_noise_variance = 0.10
    bolt_cost = 0.05

    def _check_dim(self, dim: int) -> None:
        if dim != 1:
            raise ValueError(f"eggholder is 2-dimensional (d = 1 plus time), got d = {dim}")

    def g(self, z: np.ndarray) -> np.ndarray:
        z1, z2 = z[:, 0], z[:, 1]
        return -(z2 + 47.0) * np.sin(np.sqrt(np.abs(z2 + z1 / 2.0 + 47.0))) - z1 * np.sin(
            np.sqrt(np.abs(z1 - z2 - 47.0))
        )

    def _slice_kinks(self, s: float) -> np.ndarray:
        return np.array([-2.0 * (s + 47.0), s + 47.0])


def _six_hump_camel(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``SHC(u, v) = (4 - 2.1 u^2 + u^4/3) u^2 + u v + (-4 + 4 v^2) v^2``."""
    return (4.0 - 2.1 * u**2 + u**4 / 3.0) * u**2 + u * v + (-4.0 + 4.0 * v**2) * v**2


def _real_roots(coefficients: list[float]) -> np.ndarray:
    """Real parts of all polynomial roots (near-real pairs included; they are candidates)."""
    return np.roots(coefficients).real


class SixHumpCamel(TimeAsInputBenchmark):
    """Six-Hump Camel ``SHC(x, s)`` (W-DBO App. G.4) on ``[-2, 2]^2``, time is ``s`` (``d = 1``).

    Exact optimum: the stationary points of the slice are the real roots of
    ``2x^5 - 8.4x^3 + 8x + s``, compared with the end points (and a grid search).
    """

    name = "six-hump-camel"
    reference = "Bardou, Thiran & Ranieri, This Too Shall Pass (W-DBO), App. G.4"
    interval = (-2.0, 2.0)
    default_dim = 1

    def _check_dim(self, dim: int) -> None:
        if dim != 1:
            raise ValueError(f"{self.name} is 2-dimensional (d = 1 plus time), got d = {dim}")

    def g(self, z: np.ndarray) -> np.ndarray:
        return _six_hump_camel(z[:, 0], z[:, 1])

    def _slice_kinks(self, s: float) -> np.ndarray:
        # Not kinks: the exact stationary points, added as candidates.
        return _real_roots([2.0, 0.0, -8.4, 0.0, 8.0, s])


class PiecewiseSixHumpCamel(SixHumpCamel):
    """W-DBO App. G.4's abrupt change: ``SHC(x, s)`` if ``s < -1/2``, else ``SHC(s, x)``.

    ``[-2, 2]^2``, time is ``s`` (``d = 1``); the objective jumps at ``s = -1/2``, i.e. at
    ``t = 3T/8``. Exact optimum from the real roots of the slice's derivative
    (``2x^5 - 8.4x^3 + 8x + s`` before the switch, ``16x^3 - 8x + s`` after).
    """

    name = "piecewise-six-hump-camel"

    def g(self, z: np.ndarray) -> np.ndarray:
        x, s = z[:, 0], z[:, 1]
        return np.where(s < -0.5, _six_hump_camel(x, s), _six_hump_camel(s, x))

    def _slice_kinks(self, s: float) -> np.ndarray:
        if s < -0.5:
            return _real_roots([2.0, 0.0, -8.4, 0.0, 8.0, s])
        return _real_roots([16.0, 0.0, -8.0, s])


#: Every synthetic benchmark class by registry name.
SYNTHETIC_BENCHMARKS: dict[str, type[TimeAsInputBenchmark]] = {
    cls.name: cls
    for cls in (
        Schwefel,
        Eggholder,
        Ackley,
        Shekel,
        Griewank,
        Hartmann3,
        Hartmann6,
        Powell,
        Rastrigin,
        StyblinskiTang,
        Rosenbrock,
        SixHumpCamel,
        PiecewiseSixHumpCamel,
    )
}
