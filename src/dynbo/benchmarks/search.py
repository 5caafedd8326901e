"""Global maximization of a benchmark slice ``x -> f(x, t)`` at one fixed time.

The regret of a query is ``max_x f(x, t) - f(x_t, t)``; a maximum that is too low makes
regrets negative. These helpers find the maximum to (near) machine precision, fast enough
to be called once per iteration of a run:

* :func:`maximize_box`, for ``d >= 1``: a scrambled Sobol sample of the box (the same
  sample for every call, so results do not depend on a random state), the best points of
  it plus caller-given starts (warm starts, known bump centres) polished together by one
  L-BFGS-B run on the sum of the independent start objectives (block-diagonal Hessian,
  so all starts move at once with one vectorized gradient call per step), then the best
  few results polished again one by one with tight tolerances.
* :func:`maximize_interval`, for ``d = 1``: a dense grid, then a vectorized
  golden-section refinement of the best grid-local maxima. It needs no derivative, so it
  also converges onto cusps (the Eggholder function has some).

All points are in the original units of the box; the L-BFGS-B runs work in the unit cube
so that boxes such as ``[-600, 600]^d`` are as well conditioned as ``[0, 1]^d``.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.optimize
from scipy.stats import qmc

__all__ = [
    "BoxSearchSettings",
    "OptimumCache",
    "maximize_box",
    "maximize_constrained",
    "maximize_interval",
    "polish",
    "sobol_unit_sample",
]

ValueAndGradient = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
Values = Callable[[np.ndarray], np.ndarray]

_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


class OptimumCache:
    """The maximizers a benchmark found, per time stamp (bounded: cleared when full).

    ``optimum(t)`` is asked once per query of a run, at increasing times; a search at a
    new time starts from the maximizers of the nearest cached times (:meth:`nearest`).

    Args:
        size: entries kept before the cache restarts empty.
    """

    def __init__(self, size: int = 65_536) -> None:
        self.size = size
        self._entries: dict[float, tuple[np.ndarray, float]] = {}
        self._times: list[float] = []  # sorted

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, t: float) -> tuple[np.ndarray, float] | None:
        """``(x, value)`` stored at exactly ``t``, or ``None``."""
        return self._entries.get(float(t))

    def put(self, t: float, x: np.ndarray, value: float) -> None:
        """Store ``(x, value)`` for time ``t``."""
        key = float(t)
        if len(self._entries) >= self.size:
            self.clear()
        if key not in self._entries:
            bisect.insort(self._times, key)
        self._entries[key] = (x, value)

    def clear(self) -> None:
        """Forget every entry."""
        self._entries.clear()
        self._times.clear()

    def nearest(self, t: float, count: int) -> list[tuple[float, np.ndarray]]:
        """Up to ``count`` ``(time, x)`` of the cached times nearest to ``t``, nearest first."""
        position = bisect.bisect_left(self._times, t)
        around = self._times[max(0, position - count) : position + count]
        around = sorted(around, key=lambda other: abs(other - t))[:count]
        return [(other, self._entries[other][0]) for other in around]


@dataclass(frozen=True)
class BoxSearchSettings:
    """Settings of :func:`maximize_box`.

    Attributes:
        raw_samples: size of the scrambled Sobol sample (a power of two).
        restarts: how many of the best sample points start the batched polish.
        final_polishes: how many of the best batched results are polished again alone.
        max_iterations: L-BFGS-B iteration cap of each run.
        sobol_seed: scrambling seed of the (cached, reused) Sobol sample.
    """

    raw_samples: int = 2**14
    restarts: int = 10
    final_polishes: int = 3
    max_iterations: int = 500
    sobol_seed: int = 0


@functools.lru_cache(maxsize=64)
def sobol_unit_sample(dim: int, samples: int, seed: int) -> np.ndarray:
    """``(samples, dim)`` scrambled Sobol points in ``[0, 1)^dim`` (cached, read-only)."""
    exponent = max(0, math.ceil(math.log2(max(samples, 1))))
    points = qmc.Sobol(dim, scramble=True, seed=seed).random_base2(exponent)[:samples]
    points.setflags(write=False)
    return points


def _unit_objective(
    value_and_gradient: ValueAndGradient, lower: np.ndarray, width: np.ndarray, dim: int
) -> Callable[[np.ndarray], tuple[float, np.ndarray]]:
    """The summed negated objective of ``k`` stacked unit-cube points, for L-BFGS-B."""

    def objective(flat_u: np.ndarray) -> tuple[float, np.ndarray]:
        u = np.clip(flat_u.reshape(-1, dim), 0.0, 1.0)
        values, gradients = value_and_gradient(lower + u * width)
        return -float(np.sum(values)), -(gradients * width).ravel()

    return objective


def polish(
    value_and_gradient: ValueAndGradient,
    starts: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    *,
    max_iterations: int = 500,
    tight: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Gradient ascent (L-BFGS-B within the box) from several starts at once.

    Args:
        value_and_gradient: maps ``(m, d)`` points to ``(m,)`` values to maximize and their
            ``(m, d)`` gradients (original units).
        starts: ``(k, d)`` starting points (clipped to the box first).
        lower, upper: ``(d,)`` corners of the box.
        max_iterations: L-BFGS-B iteration cap.
        tight: stop only when the projected gradient is at round-off level (for the final
            polish of a single start).

    Returns:
        ``(points, values)``: ``(k, d)`` polished points inside the box and their values.
    """
    lower = np.asarray(lower, dtype=float)
    upper = np.asarray(upper, dtype=float)
    width = upper - lower
    dim = lower.size
    starts = np.clip(np.atleast_2d(np.asarray(starts, dtype=float)), lower, upper)
    u0 = ((starts - lower) / width).ravel()
    objective = _unit_objective(value_and_gradient, lower, width, dim)
    # ftol 0 and a tiny gtol let L-BFGS-B run until its line search cannot improve any
    # more, which is where the objective is flat to round-off.
    options = {"maxiter": max_iterations, "ftol": 0.0, "gtol": 1e-14 if tight else 1e-11}
    result = scipy.optimize.minimize(
        objective,
        u0,
        jac=True,
        method="L-BFGS-B",
        bounds=[(0.0, 1.0)] * u0.size,
        options=options,
    )
    u = np.clip(result.x.reshape(-1, dim), 0.0, 1.0)
    points = np.clip(lower + u * width, lower, upper)
    values, _ = value_and_gradient(points)
    # A batched run may stop while one start is still worse than where it began.
    start_values, _ = value_and_gradient(starts)
    worse = start_values > values
    points[worse] = starts[worse]
    values = np.where(worse, start_values, values)
    return points, values


def _distinct_best(points: np.ndarray, values: np.ndarray, count: int, radius: float) -> np.ndarray:
    """Indices of up to ``count`` best points, no two closer than ``radius`` (unit scale)."""
    order = np.argsort(-values)
    chosen: list[int] = []
    for index in order:
        if all(np.max(np.abs(points[index] - points[j])) > radius for j in chosen):
            chosen.append(int(index))
            if len(chosen) == count:
                break
    return np.asarray(chosen, dtype=int)


def maximize_box(
    value_and_gradient: ValueAndGradient,
    lower: np.ndarray,
    upper: np.ndarray,
    *,
    settings: BoxSearchSettings = BoxSearchSettings(),
    extra_starts: np.ndarray | None = None,
    values: Values | None = None,
) -> tuple[np.ndarray, float]:
    """Maximize a smooth function over the box ``[lower, upper]``.

    Args:
        value_and_gradient: maps ``(m, d)`` points to ``(m,)`` values and ``(m, d)``
            gradients, in original units.
        lower, upper: ``(d,)`` corners of the box.
        settings: sample size, number of starts, iteration caps.
        extra_starts: ``(k, d)`` further starts (previous maximizers, known bump centres),
            always polished whatever their value.
        values: the same function without its gradient, ``(m, d)`` to ``(m,)``: a cheaper
            way to evaluate the large Sobol sample (optional).

    Returns:
        ``(x, value)``: the best point ``(d,)``, inside the box, and its value.
    """
    lower = np.asarray(lower, dtype=float)
    upper = np.asarray(upper, dtype=float)
    width = upper - lower
    dim = lower.size
    unit = sobol_unit_sample(dim, settings.raw_samples, settings.sobol_seed)
    raw = lower + unit * width
    raw_values = values(raw) if values is not None else value_and_gradient(raw)[0]
    # Spread the starts over distinct basins: the best sample points tend to cluster
    # around the tallest peak, which would leave a nearly as tall peak unpolished.
    spacing = settings.raw_samples ** (-1.0 / dim)
    best = _distinct_best(unit, raw_values, settings.restarts, 2.0 * spacing)
    starts = raw[best]
    if extra_starts is not None and len(extra_starts):
        extra = np.clip(np.asarray(extra_starts, dtype=float).reshape(-1, dim), lower, upper)
        starts = np.vstack([starts, extra])
    points, values = polish(
        value_and_gradient, starts, lower, upper, max_iterations=settings.max_iterations
    )
    best_index = int(np.argmax(raw_values))
    candidates_x = [raw[best_index][None, :]]
    candidates_v = [np.array([raw_values[best_index]])]
    unit_points = (points - lower) / width
    for index in _distinct_best(unit_points, values, settings.final_polishes, 1e-6):
        x, v = polish(
            value_and_gradient,
            points[index][None, :],
            lower,
            upper,
            max_iterations=settings.max_iterations,
            tight=True,
        )
        candidates_x.append(x)
        candidates_v.append(v)
    all_x = np.vstack(candidates_x)
    all_v = np.concatenate(candidates_v)
    winner = int(np.argmax(all_v))
    return all_x[winner].copy(), float(all_v[winner])


def maximize_interval(
    values: Values,
    lower: float,
    upper: float,
    *,
    grid_points: int = 16_385,
    refine: int = 8,
    extra_points: np.ndarray | None = None,
    iterations: int = 64,
) -> tuple[float, float]:
    """Maximize a continuous function of one variable over ``[lower, upper]``.

    The ``refine`` best grid-local maxima are each refined by golden-section search on the
    two grid cells around them (all brackets at once, one vectorized call per step). The
    refinement needs no derivative, so a maximum on a cusp is found as well as a smooth
    one. Grid points, end points and ``extra_points`` (e.g. known kinks) all compete.

    Args:
        values: maps ``(m,)`` points to ``(m,)`` values.
        lower, upper: the interval.
        grid_points: size of the initial uniform grid (end points included).
        refine: number of grid-local maxima refined.
        extra_points: further candidate points (clipped to the interval).
        iterations: golden-section steps (each shrinks a bracket by 0.618).

    Returns:
        ``(x, value)``: the best point found and its value.
    """
    grid = np.linspace(lower, upper, grid_points)
    grid_values = values(grid)
    # A grid point is a local maximum when no neighbour beats it (ends count once).
    padded = np.concatenate([[-np.inf], grid_values, [-np.inf]])
    local = np.flatnonzero((padded[1:-1] >= padded[:-2]) & (padded[1:-1] >= padded[2:]))
    top = local[np.argsort(-grid_values[local])[:refine]]
    left = grid[np.maximum(top - 1, 0)]
    right = grid[np.minimum(top + 1, grid_points - 1)]
    inner_left = right - _GOLDEN * (right - left)
    inner_right = left + _GOLDEN * (right - left)
    value_left = values(inner_left)
    value_right = values(inner_right)
    for _ in range(iterations):
        keep_left = value_left >= value_right
        # Bracket [left, inner_right] when the left probe is higher, else [inner_left, right].
        right = np.where(keep_left, inner_right, right)
        left = np.where(keep_left, left, inner_left)
        new_inner_left = right - _GOLDEN * (right - left)
        new_inner_right = left + _GOLDEN * (right - left)
        inner_left, inner_right = new_inner_left, new_inner_right
        value_left = values(inner_left)
        value_right = values(inner_right)
    candidates = [grid[top], inner_left, inner_right, np.array([lower, upper])]
    if extra_points is not None:
        candidates.append(np.clip(np.asarray(extra_points, dtype=float).ravel(), lower, upper))
    points = np.concatenate(candidates)
    point_values = values(points)
    best = int(np.argmax(point_values))
    return float(points[best]), float(point_values[best])


#: A point one function of :func:`maximize_constrained` maps to ``(value, gradient)``:
#: ``(d,)`` to a float and a ``(d,)`` array.
PointValueAndGradient = Callable[[np.ndarray], tuple[float, np.ndarray]]
#: ``(d,)`` to ``(J,)`` constraint values (``>= 0`` feasible) and their ``(J, d)`` Jacobian.
ConstraintsAndJacobian = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


def maximize_constrained(
    value_and_gradient: PointValueAndGradient,
    constraints_and_jacobian: ConstraintsAndJacobian,
    lower: np.ndarray,
    upper: np.ndarray,
    starts: np.ndarray,
    *,
    margin: float = 1e-9,
    max_iterations: int = 200,
) -> tuple[np.ndarray, float] | None:
    """The best feasible point that SLSQP reaches from each of ``starts`` (box and constraints).

    Each start is polished by SLSQP (Kraft 1988, "A software package for sequential
    quadratic programming") in the unit cube of the box, with the constraints tightened
    to ``c >= margin`` so that a result on the boundary is feasible exactly, not up to the
    solver's tolerance. Only points whose exact constraint values are all ``>= 0`` count;
    a feasible start is its own fallback (SLSQP may end worse than it began).

    Args:
        value_and_gradient: one point ``(d,)`` (original units) to the value to maximize
            and its ``(d,)`` gradient.
        constraints_and_jacobian: one point ``(d,)`` to ``(J,)`` constraint values and
            their ``(J, d)`` Jacobian (original units); feasible is every value ``>= 0``.
        lower, upper: ``(d,)`` corners of the box.
        starts: ``(k, d)`` starting points (clipped to the box).
        margin: how far inside the constraints SLSQP is asked to stay (the constraints'
            units).
        max_iterations: SLSQP iteration cap per start.

    Returns:
        ``(x (d,), value)`` of the best feasible point found, or ``None`` when neither a
        start nor a polished point is feasible.
    """
    lower = np.asarray(lower, dtype=float)
    upper = np.asarray(upper, dtype=float)
    width = upper - lower
    best: tuple[np.ndarray, float] | None = None

    def consider(point: np.ndarray) -> None:
        nonlocal best
        values, _ = constraints_and_jacobian(point)
        if np.all(values >= 0.0):
            value = float(value_and_gradient(point)[0])
            if best is None or value > best[1]:
                best = (point.copy(), value)

    def objective(u: np.ndarray) -> tuple[float, np.ndarray]:
        value, gradient = value_and_gradient(lower + np.clip(u, 0.0, 1.0) * width)
        return -float(value), -np.asarray(gradient) * width

    last: list[Any] = [None, None]  # SLSQP asks values and Jacobian apart: computed once

    def evaluated(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if last[0] is None or not np.array_equal(last[0], u):
            last[0], last[1] = (
                u.copy(),
                constraints_and_jacobian(lower + np.clip(u, 0.0, 1.0) * width),
            )
        return last[1]

    def tightened(u: np.ndarray) -> np.ndarray:
        return evaluated(u)[0] - margin

    def jacobian(u: np.ndarray) -> np.ndarray:
        return evaluated(u)[1] * width

    for start in np.clip(np.atleast_2d(np.asarray(starts, dtype=float)), lower, upper):
        consider(start)
        result = scipy.optimize.minimize(
            objective,
            (start - lower) / width,
            jac=True,
            method="SLSQP",
            bounds=[(0.0, 1.0)] * lower.size,
            constraints=[{"type": "ineq", "fun": tightened, "jac": jacobian}],
            options={"maxiter": max_iterations, "ftol": 1e-13},
        )
        consider(np.clip(lower + np.clip(result.x, 0.0, 1.0) * width, lower, upper))
    return best
