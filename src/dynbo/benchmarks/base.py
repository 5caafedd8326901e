"""The benchmark interface: a time-varying objective with an exact moving optimum.

A benchmark is a maximization problem ``f(x, t)``, ``x`` in a box ``S`` of ``R^d``,
``t`` in ``[0, T]``. It knows its noise variance, the cost ``c`` of one evaluation (the
seconds the objective takes to answer), the noiseless ``f`` (vectorized over points),
and its maximum over ``S`` at any time (for the regret). Benchmarks know nothing of
policies or clocks.

A *constrained* benchmark also has black-box constraints ``c_j(x, t)``, ``c_j >= 0``
being safe (:attr:`Benchmark.constraint_names`, :meth:`Benchmark.constraints`): its
feasible set is known exactly (the noise-free constraint values), its :meth:`optimum`
is the best *feasible* value at ``t`` (the regret is measured against it), and
:meth:`Benchmark.safe_points` lists points known to be feasible at every time of the
horizon (the seeds of a safe policy).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from dynbo.validation import finite_number, real_array

__all__ = ["MAX_ARRAY_BYTES", "Benchmark", "BenchmarkInfo", "check_array_size"]

#: the largest array a benchmark allocates (bytes): options that need a larger one are
#: refused when the benchmark is made, not met later as a MemoryError
MAX_ARRAY_BYTES = 2**31


def check_array_size(benchmark: str, what: str, shape: tuple[int, ...]) -> None:
    """Refuse options whose float64 array of ``shape`` would exceed :data:`MAX_ARRAY_BYTES`.

    Args:
        benchmark: the benchmark's name (starts the message).
        what: the options responsible, as the user gave them (e.g. ``"grid_size = 500"``).
        shape: the array's shape.

    Raises:
        ValueError: naming the options, the array and its size.
    """
    nbytes = 8 * math.prod(int(n) for n in shape)
    if nbytes > MAX_ARRAY_BYTES:
        raise ValueError(
            f"{benchmark}: {what} needs a {' x '.join(map(str, shape))} array of "
            f"{nbytes / 2**30:.3g} GiB; at most {MAX_ARRAY_BYTES / 2**30:g} GiB"
        )


@dataclass(frozen=True)
class BenchmarkInfo:
    """What ``dynbo list`` shows about a benchmark."""

    name: str
    dim: int
    noise_variance: float
    cost: float
    horizon: float
    time_unit: str
    reference: str

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Benchmark(ABC):
    """A time-varying objective to maximize.

    Subclasses set the attributes below in ``__init__`` and implement :meth:`f` and
    :meth:`_search_optimum` (or override :meth:`optimum` when the maximizer is known).

    Attributes:
        name: registry name, e.g. ``"eggholder"``.
        dim: spatial dimension ``d``.
        bounds: ``(2, d)`` lower and upper corners of ``S`` (original units).
        horizon: ``T``, in ``time_unit``.
        time_unit: ``"s"`` (continuous time) or ``"step"`` (discrete time).
        noise_variance: variance ``sigma_0^2`` of the additive Gaussian noise.
        cost: ``c``, seconds one evaluation takes (0 for step benchmarks).
        reference: paper and equation the definition comes from.
        candidates: ``(N, d)`` finite set of feasible points, or ``None`` for the box.
        arm_covariance: ``(N, N)`` covariance of ``f`` over the candidates that the
            benchmark's papers give the algorithms as their spatial kernel, or ``None``.
        temporal_kernel: the temporal kernel family the papers pair with it.
        constraint_names: the names of the black-box constraints ``c_j(x, t) >= 0``
            (empty for an unconstrained benchmark, the default).
        constraint_noise_variance: variance of the additive Gaussian noise of a constraint
            observation (:meth:`observe_constraints`), in the constraints' squared units.
    """

    name: str
    dim: int
    bounds: np.ndarray
    horizon: float
    time_unit: str = "s"
    noise_variance: float = 0.0
    cost: float = 0.0
    reference: str = ""
    candidates: np.ndarray | None = None
    arm_covariance: np.ndarray | None = None
    temporal_kernel: str = "matern32"
    constraint_names: tuple[str, ...] = ()
    constraint_noise_variance: float = 0.0

    @abstractmethod
    def f(self, x: np.ndarray, t: float | np.ndarray) -> np.ndarray:
        """Noiseless objective.

        Args:
            x: ``(m, d)`` points (or ``(d,)`` for one point) in the original domain.
            t: a time, or ``(m,)`` times, in ``time_unit``.

        Returns:
            ``(m,)`` values (a 0-d array for a single ``(d,)`` point).
        """

    def checked_input(self, x: Any, t: Any) -> tuple[np.ndarray, np.ndarray]:
        """The arguments of :meth:`f` as float arrays, checked.

        Args:
            x: ``(d,)`` or ``(m, d)`` finite real numbers.
            t: a finite real time, or ``(m,)`` of them.

        Raises:
            ValueError: naming the benchmark and what is wrong (not NaN values, nor a
                reshape error from deep inside).
        """
        points = real_array(f"{self.name}: x", x)
        if points.ndim not in (1, 2) or points.shape[-1] != self.dim:
            raise ValueError(
                f"{self.name}: x must be ({self.dim},) or (m, {self.dim}), got shape {points.shape}"
            )
        if not np.isfinite(points).all():
            raise ValueError(f"{self.name}: x must be finite")
        times = real_array(f"{self.name}: t", t)
        rows = 1 if points.ndim == 1 else points.shape[0]
        if times.ndim > 1 or (times.ndim == 1 and times.shape[0] not in (1, rows)):
            raise ValueError(
                f"{self.name}: t must be one time or ({rows},) times, got shape {times.shape}"
            )
        if not np.isfinite(times).all():
            raise ValueError(f"{self.name}: t must be finite, got {t!r}")
        return points, times

    def checked_time(self, t: Any) -> float:
        """The time of :meth:`optimum`: a finite real number (ValueError otherwise)."""
        return finite_number(f"{self.name}: t", t)

    def observe(self, x: np.ndarray, t: float, rng: np.random.Generator) -> float:
        """One noisy evaluation ``f(x, t) + e``, ``e ~ N(0, noise_variance)``."""
        value = float(self.f(np.asarray(x, dtype=float).reshape(1, self.dim), t)[0])
        if self.noise_variance > 0:
            value += math.sqrt(self.noise_variance) * float(rng.standard_normal())
        return value

    @abstractmethod
    def optimum(self, t: float) -> tuple[np.ndarray, float]:
        """``(x*, f*)``: a maximizer of ``f(., t)`` over the domain and the maximum."""

    # ------------------------------------------------------------------ constraints
    def constraint_values(self, x: np.ndarray, t: float | np.ndarray) -> np.ndarray:
        """Noise-free constraint values, one column per name of :attr:`constraint_names`.

        A constrained benchmark overrides this; ``c_j(x, t) >= 0`` is safe.

        Args:
            x: ``(m, d)`` points (original units), already checked.
            t: a time or ``(m,)`` times, already checked.

        Returns:
            ``(m, J)`` values, ``J = len(constraint_names)`` (``(m, 0)`` without constraints).
        """
        if self.constraint_names:
            raise NotImplementedError(f"{self.name}: constraint_values is not implemented")
        return np.zeros((np.asarray(x).reshape(-1, self.dim).shape[0], 0))

    def constraints(self, x: Any, t: Any) -> dict[str, np.ndarray]:
        """Noise-free constraint values by name (``{}`` for an unconstrained benchmark).

        Args:
            x: ``(m, d)`` points or one ``(d,)`` point (original units).
            t: a time, or ``(m,)`` times, in ``time_unit``.

        Returns:
            ``name -> (m,)`` values (0-d arrays for a ``(d,)`` point); ``>= 0`` is safe.

        Raises:
            ValueError: as :meth:`checked_input`.
        """
        points, times = self.checked_input(x, t)
        single = points.ndim == 1
        values = self.constraint_values(points.reshape(-1, self.dim), times)
        return {
            name: (values[0, j].reshape(()) if single else values[:, j].copy())
            for j, name in enumerate(self.constraint_names)
        }

    def feasible(self, x: Any, t: Any) -> np.ndarray:
        """Whether points satisfy every constraint (noise-free): ``(m,)`` bools (0-d for a
        ``(d,)`` point; all true without constraints)."""
        points, times = self.checked_input(x, t)
        values = self.constraint_values(points.reshape(-1, self.dim), times)
        ok = np.all(values >= 0.0, axis=1)
        return ok.reshape(()) if points.ndim == 1 else ok

    def observe_constraints(
        self, x: np.ndarray, t: float, rng: np.random.Generator
    ) -> dict[str, float]:
        """One noisy observation of every constraint at one point ``x`` ``(d,)``:
        ``c_j(x, t) + e_j``, ``e_j ~ N(0, constraint_noise_variance)`` independent
        (one normal draw per constraint, in :attr:`constraint_names` order)."""
        exact = self.constraints(np.asarray(x, dtype=float).reshape(self.dim), t)
        scale = math.sqrt(self.constraint_noise_variance)
        out = {}
        for name in self.constraint_names:
            value = float(exact[name])
            if scale > 0:
                value += scale * float(rng.standard_normal())
            out[name] = value
        return out

    def safe_points(self) -> np.ndarray:
        """``(k, d)`` points known to be feasible at every time in ``[0, horizon]`` (the
        seeds of a safe policy); ``(0, d)`` when none is known (the default)."""
        return np.zeros((0, self.dim))

    def info(self) -> BenchmarkInfo:
        return BenchmarkInfo(
            name=self.name,
            dim=self.dim,
            noise_variance=self.noise_variance,
            cost=self.cost,
            horizon=self.horizon,
            time_unit=self.time_unit,
            reference=self.reference,
        )

    def signal_variance(self, samples: int = 100_000, seed: int = 0) -> float:
        """Variance of ``f`` over uniform ``(x, t)`` in ``S x [0, T]`` (Monte Carlo)."""
        rng = np.random.default_rng(seed)
        if self.candidates is not None:
            x = self.candidates[rng.integers(0, len(self.candidates), samples)]
        else:
            x = rng.uniform(self.bounds[0], self.bounds[1], size=(samples, self.dim))
        t = rng.uniform(0.0, self.horizon, size=samples)
        if self.time_unit == "step":
            t = np.floor(t)
        return float(np.var(self.f(x, t)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, d={self.dim}, T={self.horizon})"
