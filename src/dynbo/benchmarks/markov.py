"""GP Markov-chain functions (Bogunovic, Scarlett & Cevher, eqs. 3-4).

    f_1 = g_1,     f_{k+1} = sqrt(1 - eps) f_k + sqrt(eps) g_{k+1},     g_k iid GP(0, k),

on ``[0, 1]^2`` quantized into a ``50 x 50`` grid of equally spaced points (Bogunovic
Sec. 5.1), ``k`` a unit-variance SE or Matern-5/2 correlation with lengthscale 0.2. Every
``f_k`` is a ``GP(0, k)`` sample and ``Cov(f_k(x), f_{k+j}(x')) = (1 - eps)^{j/2} k(x, x')``.

Discrete time: the benchmark counts ``step`` units. Time ``t >= 0`` selects version
``floor(t)`` (0-based: ``t in [0, 1)`` is the paper's ``f_1``). A query off the grid is
answered at the nearest grid point, so the maximum over the box equals the maximum over
the grid (:attr:`candidates`) and the optimum is exact.

Samples ``g_k = L z_k`` use the Cholesky factor ``L`` of the ``2500 x 2500`` grid kernel
matrix plus jitter ``1e-8`` (shared by all instances with the same kernel). Steps are
generated lazily in blocks of :data:`BLOCK_STEPS`; block ``b`` draws its normals from its
own generator ``SeedSequence(seed, spawn_key=(b,))``, so a function depends on its seed
only, never on the order in which times are asked for.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from dynbo.benchmarks.base import Benchmark, check_array_size

__all__ = ["BLOCK_STEPS", "MarkovChainGP", "grid_points"]

#: Steps generated at once (one matrix product ``L @ Z`` per block).
BLOCK_STEPS = 32

_KERNELS = {"se": "se", "matern52": "matern52"}


def grid_points(size: int) -> np.ndarray:
    """``(size^2, 2)`` equally spaced grid on ``[0, 1]^2`` (end points included), row-major
    in ``(x_1, x_2)``: point ``i * size + j`` is ``(i, j) / (size - 1)``."""
    axis = np.linspace(0.0, 1.0, size)
    first, second = np.meshgrid(axis, axis, indexing="ij")
    return np.column_stack([first.ravel(), second.ravel()])


@functools.lru_cache(maxsize=8)
def _cholesky_factor(family: str, lengthscale: float, size: int, jitter: float) -> np.ndarray:
    """Lower Cholesky factor of the grid correlation matrix plus ``jitter * I``."""
    from dynbo.kernels import correlation_np  # here: dynbo.kernels loads torch

    points = grid_points(size)
    distances = np.sqrt(np.sum((points[:, None, :] - points[None, :, :]) ** 2, axis=2))
    covariance = correlation_np(family, distances / lengthscale)
    covariance[np.diag_indices_from(covariance)] += jitter
    factor = np.linalg.cholesky(covariance)
    factor.setflags(write=False)
    return factor


class MarkovChainGP(Benchmark):
    """A seeded GP Markov-chain function on a ``size x size`` grid of ``[0, 1]^2``.

    Args:
        kernel: ``"se"`` or ``"matern52"`` (unit variance).
        lengthscale: kernel lengthscale on ``[0, 1]^2`` (0.2 in the papers).
        epsilon: forgetting rate ``eps in [0, 1]`` of eq. 4.
        seed: the function realization (same seed, same function).
        noise_variance: ``sigma^2`` (0.01 in Bogunovic Sec. 5.1).
        horizon: ``T`` in steps (steps beyond ``T`` are still generated on demand).
        grid_size: points per axis (50 in the papers; smaller grids make cheap tests).
        jitter: added to the kernel diagonal before the Cholesky factorization.
    """

    name = "markov"
    time_unit = "step"
    cost = 0.0
    temporal_kernel = "matern12"  # (1 - eps)^{|i-j|/2} is exponential in the step gap
    reference = (
        "Bogunovic, Scarlett & Cevher, Time-Varying Gaussian Process Bandit Optimization, "
        "eqs. 3-4 and Sec. 5.1"
    )

    def __init__(
        self,
        kernel: str = "se",
        *,
        lengthscale: float = 0.2,
        epsilon: float = 0.01,
        seed: int = 0,
        noise_variance: float = 0.01,
        horizon: float = 200,
        grid_size: int = 50,
        jitter: float = 1e-8,
    ) -> None:
        from dynbo.kernels import as_family  # here: dynbo.kernels loads torch

        family = as_family(kernel).value
        if family not in _KERNELS:
            raise ValueError(f"markov: kernel must be 'se' or 'matern52', got {kernel!r}")
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"markov: epsilon must be in [0, 1], got {epsilon!r}")
        if not lengthscale > 0:
            raise ValueError(f"markov: lengthscale must be positive, got {lengthscale!r}")
        if noise_variance < 0:
            raise ValueError(f"markov: noise_variance must be >= 0, got {noise_variance!r}")
        if not (horizon > 0 and math.isfinite(horizon)):
            raise ValueError(f"markov: horizon must be positive and finite, got {horizon!r}")
        if int(grid_size) != grid_size or grid_size < 2:
            raise ValueError(f"markov: grid_size must be an integer >= 2, got {grid_size!r}")
        points = int(grid_size) ** 2
        check_array_size("markov", f"grid_size = {grid_size}", (points, points))  # covariance
        # every version up to the horizon is kept (one row per step)
        check_array_size(
            "markov",
            f"horizon = {horizon} with grid_size = {grid_size}",
            (math.floor(horizon) + 1, points),
        )
        self.kernel = family
        self.lengthscale = float(lengthscale)
        self.epsilon = float(epsilon)
        self.seed = int(seed)
        self.noise_variance = float(noise_variance)
        self.horizon = float(horizon)
        self.grid_size = int(grid_size)
        self.jitter = float(jitter)
        self.dim = 2
        self.bounds = np.array([[0.0, 0.0], [1.0, 1.0]])
        self.candidates = grid_points(self.grid_size)
        self._values = np.empty((0, self.grid_size**2))

    # ------------------------------------------------------------------ generation
    def _factor(self) -> np.ndarray:
        return _cholesky_factor(self.kernel, self.lengthscale, self.grid_size, self.jitter)

    def _generate(self, steps: int) -> None:
        """Extend the stored versions ``f`` (rows, one per step) to at least ``steps``."""
        have = self._values.shape[0]
        if steps <= have:
            return
        blocks = range(have // BLOCK_STEPS, math.ceil(steps / BLOCK_STEPS))
        keep, fresh = math.sqrt(1.0 - self.epsilon), math.sqrt(self.epsilon)
        rows = [self._values]
        previous = self._values[-1] if have else None
        for block in blocks:
            rng = np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=(block,)))
            normals = rng.standard_normal((BLOCK_STEPS, self.grid_size**2))
            samples = normals @ self._factor().T  # row k is g for step block*B + k
            values = np.empty_like(samples)
            for k in range(BLOCK_STEPS):
                step = block * BLOCK_STEPS + k
                if step == 0:
                    values[k] = samples[k]
                else:
                    values[k] = keep * previous + fresh * samples[k]
                previous = values[k]
            rows.append(values)
        self._values = np.vstack(rows)

    def step_index(self, t: float | np.ndarray) -> np.ndarray:
        """0-based version index ``floor(t)`` of time(s) ``t`` (steps); ``t < 0`` is an error."""
        times = np.asarray(t, dtype=float)
        if not np.all(np.isfinite(times)):
            raise ValueError(f"markov: times must be finite, got {t!r}")
        if np.any(times < 0):
            raise ValueError("markov: times must be >= 0")
        if times.size:
            # every version up to the one asked for is drawn and kept
            check_array_size(
                "markov",
                f"t = {float(times.max()):g}",
                (math.floor(times.max()) + 1, self.grid_size**2),
            )
        return np.floor(times).astype(np.int64)

    def grid_values(self, t: float) -> np.ndarray:
        """``(grid_size^2,)`` values of the version at time ``t`` on :attr:`candidates`."""
        step = int(self.step_index(t))
        self._generate(step + 1)
        return self._values[step].copy()

    def nearest_grid_index(self, x: np.ndarray) -> np.ndarray:
        """Index into :attr:`candidates` of the grid point nearest to each row of ``x``."""
        points = np.asarray(x, dtype=float).reshape(-1, 2)
        cells = np.clip(np.rint(points * (self.grid_size - 1)), 0, self.grid_size - 1)
        cells = cells.astype(np.int64)
        return cells[:, 0] * self.grid_size + cells[:, 1]

    # ------------------------------------------------------------------ interface
    def f(self, x: np.ndarray, t: float | np.ndarray) -> np.ndarray:
        """Values at the nearest grid points.

        Args:
            x: ``(m, 2)`` points (or one ``(2,)`` point) in ``[0, 1]^2``.
            t: a time or ``(m,)`` times in steps (version ``floor(t)``).

        Returns:
            ``(m,)`` values (0-d for a ``(2,)`` point).
        """
        x, t = self.checked_input(x, t)
        single = np.asarray(x).ndim == 1
        index = self.nearest_grid_index(x)
        steps = np.broadcast_to(self.step_index(t), index.shape)
        self._generate(int(steps.max()) + 1 if steps.size else 0)
        values = self._values[steps, index]
        return values.reshape(()) if single else values

    def optimum(self, t: float) -> tuple[np.ndarray, float]:
        """Exact: the best grid point ``(2,)`` of version ``floor(t)`` and its value."""
        t = self.checked_time(t)
        values = self.grid_values(t)
        best = int(np.argmax(values))
        return self.candidates[best].copy(), float(values[best])

    def __repr__(self) -> str:
        return (
            f"MarkovChainGP(kernel={self.kernel!r}, epsilon={self.epsilon}, seed={self.seed}, "
            f"T={self.horizon})"
        )
