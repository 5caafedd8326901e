"""Constrained benchmarks: black-box constraints ``c_j(x, t) >= 0``, exactly known feasible sets.

Each benchmark here declares its constraints (:attr:`Benchmark.constraint_names`), gives
their noise-free values (:meth:`Benchmark.constraints`: the feasible set is known
exactly), a noisy observation of them (:meth:`Benchmark.observe_constraints`), and its
:meth:`optimum` is the best **feasible** value at the query time: the regret of a query
is ``max {f(x, t) : c_j(x, t) >= 0 for all j} - f(x_k, t)``. A query that violates a
constraint may score above the feasible optimum (a negative regret); the harness counts
it as a violation (``docs/safety.md``).

* :class:`MovingHazard` (``moving-hazard``): a Gaussian bump on ``[0, 1]^2`` whose peak
  circles the centre while an unsafe disc circles it twice as fast; the constrained
  maximizer is in closed form (the peak, or its radial projection onto the disc's rim).
* :class:`ConstrainedWLAN` (``wlan-min-rate``): the WLAN power-control simulator
  (:mod:`dynbo.benchmarks.wlan`) with a minimum per-user Shannon rate; the optimum is
  the best of SLSQP runs with one constraint per user (exact gradients) from the best
  feasible points of a Sobol sample, the corners and the unconstrained maximizer.
* :class:`CartPoleTrack` (``cartpole-track``): the cart-pole policy search
  (:mod:`dynbo.benchmarks.cartpole`) on a track of bounded length: the cart's largest
  distance from the track's centre over the episode, ``max_k |x_k|``, must stay below
  ``max_excursion``; the optimum is the unconstrained one when it is feasible, else the
  best of SLSQP runs with one constraint per sample of the episode (exact forward
  sensitivities) from the best feasible points of a Sobol sample.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dynbo.benchmarks.base import Benchmark
from dynbo.benchmarks.cartpole import INITIAL_STATE, CartPole, _as_gains
from dynbo.benchmarks.search import OptimumCache, maximize_constrained, sobol_unit_sample
from dynbo.benchmarks.wlan import _DB_TO_LN, _LN2, WLAN, _one_blas_thread

__all__ = ["CONSTRAINED_BENCHMARKS", "CartPoleTrack", "ConstrainedWLAN", "MovingHazard"]


def _nonnegative(benchmark: str, name: str, value: Any) -> float:
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value < 0:
        raise ValueError(f"{benchmark}: {name} must be a finite number >= 0, got {value!r}")
    return float(value)


def _positive(benchmark: str, name: str, value: Any) -> float:
    if _nonnegative(benchmark, name, value) == 0:
        raise ValueError(f"{benchmark}: {name} must be positive, got {value!r}")
    return float(value)


def _no_feasible_point(benchmark: str, t: float) -> ValueError:
    return ValueError(
        f"{benchmark}: the search found no feasible point at t = {t:g}: the regret against "
        "the best feasible value is undefined there (loosen the constraint)"
    )


# ---------------------------------------------------------------------- moving hazard
class MovingHazard(Benchmark):
    """A drifting bump and an unsafe disc that moves along a known circle.

    On ``S = [0, 1]^2``, with ``s = t / T`` the fraction of the horizon and ``o = (1/2,
    1/2)`` the centre of the square:

    * objective ``f(x, t) = exp(-|x - a(t)|^2 / (2 w^2))``, ``w = 0.25``, peak
      ``a(t) = o + 0.25 (cos 2 pi s, sin 2 pi s)`` (one lap over the horizon);
    * unsafe disc of radius ``r = 0.2`` centred at ``h(t) = o + 0.2 (cos 4 pi s, sin 4 pi s)``
      (two laps): constraint ``c(x, t) = |x - h(t)|^2 - r^2`` (``hazard``), safe outside
      the open disc.

    The disc sweeps the annulus of radii ``0`` to ``0.4`` around ``o``, the peak's whole
    path among it: the peak is inside the disc when the angle ``2 pi s`` between their
    directions has ``cos > 0.625`` (``|0.25 - 0.2 e^{i phi}| < 0.2``), 28.5 % of the
    horizon, and the constraint then binds. Every point farther than ``0.4`` from ``o``
    is safe at every time: :meth:`safe_points` gives four of them, ``(0.1, 0.1)`` and its
    mirror images (``0.566`` from ``o``).

    The constrained maximizer is in closed form: ``f`` decreases with ``|x - a|``, so it
    is the feasible point nearest to ``a``: ``a`` itself when ``a`` is feasible, else the
    radial projection ``h + r (a - h) / |a - h|`` onto the rim (inside the box: the rim
    lies within ``0.4`` of ``o``), where ``f* = exp(-(r - |a - h|)^2 / (2 w^2))``
    (:meth:`optimum` returns the point ``1e-12 r`` outside the rim, exactly feasible in
    floating point).

    Args:
        horizon: ``T`` in seconds.
        noise_variance: variance of the objective's observation noise.
        constraint_noise_variance: variance of the constraint's observation noise.
        cost: seconds one evaluation takes.
    """

    name = "moving-hazard"
    dim = 2
    time_unit = "s"
    temporal_kernel = "matern52"
    constraint_names = ("hazard",)
    reference = (
        "dynbo's constrained benchmark (docs/safety.md): a Gaussian bump and an unsafe disc "
        "on circular paths, exact feasible set and constrained optimum"
    )
    #: bump width ``w``, disc radius ``r``, radii of the peak's and the disc's circles
    WIDTH = 0.25
    RADIUS = 0.2
    PEAK_ORBIT = 0.25
    HAZARD_ORBIT = 0.2
    CENTRE = np.array([0.5, 0.5])

    def __init__(
        self,
        *,
        horizon: float = 100.0,
        noise_variance: float = 1e-3,
        constraint_noise_variance: float = 1e-4,
        cost: float = 0.1,
    ) -> None:
        self.horizon = _positive(self.name, "horizon", horizon)
        self.noise_variance = _nonnegative(self.name, "noise_variance", noise_variance)
        self.constraint_noise_variance = _nonnegative(
            self.name, "constraint_noise_variance", constraint_noise_variance
        )
        self.cost = _nonnegative(self.name, "cost", cost)
        self.bounds = np.array([[0.0, 0.0], [1.0, 1.0]])

    def peak(self, t: float | np.ndarray) -> np.ndarray:
        """``a(t)``: ``(2,)`` for a scalar time, ``(m, 2)`` for ``(m,)`` times."""
        angle = 2.0 * math.pi * np.asarray(t, dtype=float) / self.horizon
        offset = np.stack([np.cos(angle), np.sin(angle)], axis=-1)
        return self.CENTRE + self.PEAK_ORBIT * offset

    def hazard_centre(self, t: float | np.ndarray) -> np.ndarray:
        """``h(t)``, the unsafe disc's centre: ``(2,)`` or ``(m, 2)`` like :meth:`peak`."""
        angle = 4.0 * math.pi * np.asarray(t, dtype=float) / self.horizon
        offset = np.stack([np.cos(angle), np.sin(angle)], axis=-1)
        return self.CENTRE + self.HAZARD_ORBIT * offset

    def f(self, x: np.ndarray, t: float | np.ndarray) -> np.ndarray:
        """``exp(-|x - a(t)|^2 / (2 w^2))``: ``(m,)`` for ``(m, 2)`` points (0-d for ``(2,)``)."""
        points, times = self.checked_input(x, t)
        single = points.ndim == 1
        diff = points.reshape(-1, 2) - self.peak(times)
        values = np.exp(-np.sum(diff * diff, axis=-1) / (2.0 * self.WIDTH**2))
        return values.reshape(()) if single else values

    def constraint_values(self, x: np.ndarray, t: float | np.ndarray) -> np.ndarray:
        """``(m, 1)``: ``|x - h(t)|^2 - r^2`` (squared domain units)."""
        diff = np.asarray(x, dtype=float).reshape(-1, 2) - self.hazard_centre(t)
        return (np.sum(diff * diff, axis=-1) - self.RADIUS**2)[:, None]

    def optimum(self, t: float) -> tuple[np.ndarray, float]:
        """``(x*, f*)``: the feasible point nearest to the peak and its value (closed form)."""
        t = self.checked_time(t)
        peak, centre = self.peak(t), self.hazard_centre(t)
        away = peak - centre
        distance = float(np.hypot(*away))
        if distance >= self.RADIUS:
            return peak, 1.0
        # the peak is inside the disc: project it radially onto the rim (the direction
        # is arbitrary only when the peak is the centre itself, a set of times of measure 0)
        direction = away / distance if distance > 0 else np.array([1.0, 0.0])
        # a hair outside the rim: the point on it may round to c = -3e-17, infeasible
        x = centre + self.RADIUS * (1.0 + 1e-12) * direction
        return x, float(self.f(x, t))

    def safe_points(self) -> np.ndarray:
        """``(4, 2)``: ``(0.1, 0.1)``, ``(0.9, 0.1)``, ``(0.1, 0.9)``, ``(0.9, 0.9)``, safe at
        every time (``0.566`` from the centre, the disc never reaches past ``0.4``)."""
        return np.array([[0.1, 0.1], [0.9, 0.1], [0.1, 0.9], [0.9, 0.9]])


# ---------------------------------------------------------------------- WLAN
class ConstrainedWLAN(WLAN):
    """The WLAN simulator with a minimum per-user rate: ``min_u W log2(1 + SINR_u) >= r_min``.

    The constraint ``min_rate`` is ``c(x, t) = min_u rate_u(x, t) - r_min`` (Mbit/s), from
    the simulator's noise-free per-user rates (:meth:`WLAN.user_rates`): the feasible set
    is known exactly. Maximizing the summed rate starves the users at the cells' edges, so
    the unconstrained maximizer is often infeasible (``docs/safety.md``).

    The optimum over the feasible set (:meth:`optimum`): SLSQP
    (:func:`~dynbo.benchmarks.search.maximize_constrained`) on the powers in dBm, with one
    constraint per user (``rate_u - r_min >= 0``, exact gradients inside an association
    region), started from the unconstrained maximizer when it is feasible, the best
    feasible points of a 4096-point scrambled Sobol sample and of the box's corners, and
    the constrained maximizers of the nearest cached times. The tests check it against a
    dense random sample of the feasible set. No power setting is known to be feasible at
    every time, so :meth:`safe_points` is empty (a safe policy needs the user's own).

    Args:
        min_rate: ``r_min`` (Mbit/s), 1.0 by default: at the W-DBO size (4 APs, 18
            users, seed 0) part of the power box is feasible and the sum-rate maximizer
            is not at every time (the tests check one such time, ``t = 0``).
        constraint_noise_variance: variance of the observed constraint's noise
            ((Mbit/s)^2).
        **options: the :class:`WLAN` options (W-DBO's size by default: 4 APs, 18 users).
    """

    name = "wlan-min-rate"
    constraint_names = ("min_rate",)
    #: starts of the constrained search: Sobol points, best feasible ones kept
    search_samples = 4096
    search_starts = 6

    def __init__(
        self,
        *,
        min_rate: float = 1.0,
        constraint_noise_variance: float = 0.0025,
        access_points: int = 4,
        users: int = 18,
        seed: int = 0,
        noise_variance: float = 1.5,
        cost: float = 0.1,
        horizon: float = 600.0,
        constants: Any = None,
    ) -> None:
        self.min_rate = _positive(self.name, "min_rate", min_rate)
        self.constraint_noise_variance = _nonnegative(
            self.name, "constraint_noise_variance", constraint_noise_variance
        )
        super().__init__(
            access_points=access_points,
            users=users,
            seed=seed,
            noise_variance=noise_variance,
            cost=cost,
            horizon=horizon,
            constants=constants,
        )
        self._feasible_optima = OptimumCache()

    def constraint_values(self, x: np.ndarray, t: float | np.ndarray) -> np.ndarray:
        """``(m, 1)``: the smallest per-user rate minus ``r_min`` (Mbit/s)."""
        points = np.asarray(x, dtype=float).reshape(-1, self.dim)
        times = np.asarray(t, dtype=float)
        if times.ndim == 0 or times.size == 1:
            rates = self.user_rates(self.positions(float(times.reshape(-1)[0])), points)
        else:
            rates = self.user_rates(self.positions(times), points)
        return (rates.min(axis=-1) - self.min_rate)[:, None]

    def _rates_and_jacobian(
        self, gains: np.ndarray, y: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per-user rates ``(U,)`` at powers ``y`` ``(A,)`` dBm and ``d rate_u / d y_b``
        ``(U, A)``, exact inside an association region (as :meth:`WLAN._slice_dbm`)."""
        powers = 10.0 ** (y / 10.0)
        received = powers[None, :] * gains  # (U, A)
        serving = received.argmax(axis=-1)[:, None] == np.arange(self.dim)
        total = self._noise + received.sum(axis=-1)
        rest = self._noise + np.where(serving, 0.0, received).sum(axis=-1)
        scale = self._bandwidth / _LN2
        weights = 1.0 / total[:, None] - np.where(serving, 0.0, 1.0 / rest[:, None])
        return scale * np.log(total / rest), scale * weights * gains * powers * _DB_TO_LN

    def optimum(self, t: float) -> tuple[np.ndarray, float]:
        """``(x*, f*)``: the best feasible powers ``(A,)`` (mW) at ``t`` (s) and their summed
        rate (Mbit/s); cached per time stamp.

        Raises:
            ValueError: when the search finds no feasible point at ``t``.
        """
        t = self.checked_time(t)
        key = float(t)
        hit = self._feasible_optima.get(key)
        if hit is None:
            with _one_blas_thread():
                y, value = self._constrained_search(key)
            x = np.clip(10.0 ** (y / 10.0), self.bounds[0], self.bounds[1])
            hit = (x, float(self.f(x, key)))
            self._feasible_optima.put(key, *hit)
        return hit[0].copy(), hit[1]

    def unconstrained_optimum(self, t: float) -> tuple[np.ndarray, float]:
        """The maximum over the whole box, ignoring the constraint (:meth:`WLAN.optimum`)."""
        return super().optimum(t)

    def _constrained_search(self, t: float) -> tuple[np.ndarray, float]:
        gains = self.gains(self.positions(t))
        values, value_and_gradient = self._slice_dbm(gains)
        lower, upper = self.power_bounds_dbm
        unit = sobol_unit_sample(self.dim, self.search_samples, 0)
        corners = lower + self._corner_signs * (upper - lower)
        free_x, _ = self.unconstrained_optimum(t)
        candidates = [lower + unit * (upper - lower), corners, 10.0 * np.log10(free_x)[None, :]]
        neighbours = self._feasible_optima.nearest(t, 2)
        if neighbours:
            candidates.append(10.0 * np.log10(np.array([x for _, x in neighbours])))
        points = np.vstack(candidates)
        rates = self._user_rates_from_gains(gains, 10.0 ** (points / 10.0))
        feasible = rates.min(axis=-1) >= self.min_rate
        scores = np.where(feasible, values(points), -np.inf)
        order = np.argsort(-scores)[: self.search_starts]
        starts = points[order[np.isfinite(scores[order])]]
        # the extra candidates (unconstrained and cached maximizers) start too when feasible
        extra = points[len(unit) + len(corners) :][feasible[len(unit) + len(corners) :]]
        starts = np.vstack([starts, extra])

        def point_value(y: np.ndarray) -> tuple[float, np.ndarray]:
            value, gradient = value_and_gradient(y[None, :])
            return float(value[0]), gradient[0]

        def constraints(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            user_rates, jacobian = self._rates_and_jacobian(gains, y)
            return user_rates - self.min_rate, jacobian

        found = maximize_constrained(point_value, constraints, lower, upper, starts)
        if found is None:
            raise _no_feasible_point(self.name, t)
        return found


# ---------------------------------------------------------------------- cart-pole
#: ``max_excursion`` by drift (m): the track ends 8 cm (sudden) or 15 cm (smooth) beyond
#: the cart's start at 4 m; with friction growing the cart swings out further, so part of
#: the box becomes infeasible after the drift (``docs/safety.md``).
DEFAULT_MAX_EXCURSION = {"sudden": 4.08, "smooth": 4.15}


class CartPoleTrack(CartPole):
    """The cart-pole policy search on a bounded track: ``max_k |x_k| <= max_excursion``.

    The constraint ``excursion`` is ``c(theta, t) = x_max - max_k |x_k|`` (m): the cart's
    largest distance from the track's centre over the episode ``k = 0 .. N-1`` of step
    ``floor(t)`` (same model and process noise as :meth:`CartPole.f`), exact. The cart
    starts at ``x_0 = 4`` m and first swings outward to catch the pole; the further the
    friction has drifted, the further it swings, so gains that were safe before the drift
    leave the track after it.

    The optimum over the feasible set (:meth:`optimum`): the unconstrained maximizer
    (:meth:`CartPole.optimum`) when it is feasible; otherwise the best of SLSQP runs
    (:func:`~dynbo.benchmarks.search.maximize_constrained`) with one constraint per
    sample (``x_max - |x_k| >= 0``, Jacobian from the exact forward sensitivities
    ``ds_{k+1}/dtheta = (A_d - B_d theta') ds_k/dtheta - B_d s_k'``) started from the
    best feasible points of a 256-point scrambled Sobol sample of the box. Cached per
    step. No gain is known to be feasible at every step: :meth:`safe_points` is empty.

    Args:
        max_excursion: ``x_max`` (m); ``None`` for the drift's default
            (:data:`DEFAULT_MAX_EXCURSION`).
        constraint_noise_variance: variance of the observed constraint's noise (m^2).
        **options: the :class:`CartPole` options.
    """

    name = "cartpole-track"
    constraint_names = ("excursion",)
    search_samples = 256
    search_starts = 4

    def __init__(
        self,
        *,
        max_excursion: float | None = None,
        constraint_noise_variance: float = 4e-6,
        drift: str = "sudden",
        noise_variance: float = 0.02,
        horizon: float = 300,
        seed: int = 0,
        steps: int = 1000,
    ) -> None:
        super().__init__(
            drift=drift, noise_variance=noise_variance, horizon=horizon, seed=seed, steps=steps
        )
        if max_excursion is None:
            max_excursion = DEFAULT_MAX_EXCURSION[drift]
        self.max_excursion = _positive(self.name, "max_excursion", max_excursion)
        self.constraint_noise_variance = _nonnegative(
            self.name, "constraint_noise_variance", constraint_noise_variance
        )
        self._feasible_optima: dict[int, tuple[np.ndarray, float]] = {}

    def cart_positions(self, theta: np.ndarray, t: float) -> np.ndarray:
        """``(m, N)`` cart positions ``x_k`` (m) of ``(m, 4)`` gains over the episode of
        step ``floor(t)`` (a time loop vectorized over the gains)."""
        gains = _as_gains(theta)
        a_d, b_d = self.system(t)
        noise = self.process_noise(t)
        state = np.tile(INITIAL_STATE, (gains.shape[0], 1))
        out = np.empty((gains.shape[0], self.steps))
        out[:, 0] = state[:, 0]
        with np.errstate(over="ignore", invalid="ignore"):
            for k in range(self.steps - 1):
                inputs = -np.einsum("mi,mi->m", gains, state)
                state = state @ a_d.T + inputs[:, None] * b_d[:, 0] + noise[k]
                out[:, k + 1] = state[:, 0]
        return out

    def constraint_values(self, x: np.ndarray, t: float | np.ndarray) -> np.ndarray:
        """``(m, 1)``: ``x_max - max_k |x_k|`` (m), gains grouped by step; an overflowed
        (unstable) loop gives ``-inf`` clipped to ``-1e3``, finite like its capped cost."""
        gains = _as_gains(x)
        steps = np.broadcast_to(self.step_index(t), (gains.shape[0],))
        out = np.empty(gains.shape[0])
        for step in np.unique(steps):
            rows = steps == step
            positions = self.cart_positions(gains[rows], float(step))
            with np.errstate(invalid="ignore"):
                excursion = np.max(np.abs(positions), axis=1)
            out[rows] = np.where(np.isfinite(excursion), self.max_excursion - excursion, -1e3)
        return np.maximum(out, -1e3)[:, None]

    def _excursions_and_jacobian(
        self, theta: np.ndarray, t: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """``x_max - |x_k|`` ``(N,)`` of one gain ``(4,)`` and its ``(N, 4)`` Jacobian."""
        a_d, b_d = self.system(t)
        noise = self.process_noise(t)
        closed = a_d - b_d @ theta[None, :]
        state = INITIAL_STATE.copy()
        sensitivity = np.zeros((4, 4))  # d state / d theta
        positions = np.empty(self.steps)
        jacobian = np.empty((self.steps, 4))
        positions[0], jacobian[0] = state[0], 0.0
        for k in range(self.steps - 1):
            sensitivity = closed @ sensitivity - b_d @ state[None, :]
            state = closed @ state + noise[k]
            positions[k + 1], jacobian[k + 1] = state[0], sensitivity[0]
        sign = np.where(positions >= 0, 1.0, -1.0)
        return self.max_excursion - np.abs(positions), -sign[:, None] * jacobian

    def optimum(self, t: float) -> tuple[np.ndarray, float]:
        """``(theta*, -J*)`` over the feasible gains of step ``floor(t)`` (class docstring).

        Raises:
            ValueError: when the search finds no feasible gain at that step.
        """
        t = self.checked_time(t)
        step = int(self.step_index(t))
        if step not in self._feasible_optima:
            self._feasible_optima[step] = self._constrained_search(step)
        x, value = self._feasible_optima[step]
        return x.copy(), value

    def unconstrained_optimum(self, t: float) -> tuple[np.ndarray, float]:
        """The maximum over the whole box, ignoring the constraint (:meth:`CartPole.optimum`)."""
        return super().optimum(t)

    def _constrained_search(self, step: int) -> tuple[np.ndarray, float]:
        free_x, free_value = self.unconstrained_optimum(step)
        if self.constraint_values(free_x[None, :], step)[0, 0] >= 0:
            return free_x, free_value
        lower, upper = self.bounds
        points = lower + sobol_unit_sample(4, self.search_samples, 0) * (upper - lower)
        feasible = self.constraint_values(points, step)[:, 0] >= 0
        scores = np.where(feasible, self.f(points, step), -np.inf)
        order = np.argsort(-scores)[: self.search_starts]
        starts = points[order[np.isfinite(scores[order])]]

        def point_value(theta: np.ndarray) -> tuple[float, np.ndarray]:
            costs, gradients = self.episode_cost_and_gradient(theta[None, :], step)
            return -float(costs[0]), -gradients[0]

        def constraints(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return self._excursions_and_jacobian(theta, step)

        found = maximize_constrained(point_value, constraints, lower, upper, starts)
        if found is None:
            raise _no_feasible_point(self.name, float(step))
        return found[0], float(self.f(found[0], step))


CONSTRAINED_BENCHMARKS: dict[str, type[Benchmark]] = {
    MovingHazard.name: MovingHazard,
    ConstrainedWLAN.name: ConstrainedWLAN,
    CartPoleTrack.name: CartPoleTrack,
}
