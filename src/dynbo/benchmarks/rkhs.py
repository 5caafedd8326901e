"""The drifting RKHS function of W-SparQ-GP-UCB (Mauduit, Berthier & Simonetto (2025), Sec. 4.1).

On ``D = [-50, 50]`` with ``k(x, x') = 0.5 exp(-(x - x')^2 / 18)`` (variance 0.5,
lengthscale 3),

    f(x, t) = sum_{i=1}^n a_i(t) k(x, c_i),     u_i(t) = sin(0.3 t + i),

and the RKHS norm is ``||f_t||_k^2 = a(t)^T K_C a(t)``, ``K_C = [k(c_i, c_j)]``. The paper
sets ``a(t) = (5 / lambda_max) u(t) / ||u(t)||`` (``lambda_max`` the top eigenvalue of
``K_C``) and states ``||f_t||_k <= 5``; but that coefficient only gives
``||f_t||_k <= 5 / sqrt(lambda_max)``, which exceeds 5 whenever ``lambda_max < 1`` (it is
about 0.72 for the default centres). Two normalizations are offered:

* ``"exact"`` (default): ``a(t) = 5 u(t) / sqrt(u(t)^T K_C u(t))``, so ``||f_t||_k = 5``
  exactly, the norm bound the algorithms' confidence widths assume;
* ``"literal"``: the paper's formula as printed.

The paper leaves ``n`` and the centres open; the defaults are 20 centres equally spaced on
``[-50, 50]``. ``t`` is in steps (``T = 500``); the formula is smooth in ``t`` and is
evaluated at the time given (the step clock passes integers).
"""

from __future__ import annotations

import numpy as np

from dynbo.benchmarks.base import Benchmark, check_array_size
from dynbo.benchmarks.search import maximize_interval
from dynbo.validation import positive_number

__all__ = ["DriftingRKHS"]

_NORMALIZATIONS = ("exact", "literal")


class DriftingRKHS(Benchmark):
    """W-SparQ's synthetic benchmark: a kernel expansion whose weights rotate with time.

    Args:
        n_centres: number ``n`` of kernel centres, equally spaced on ``[-50, 50]``.
        normalization: ``"exact"`` (``||f_t||_k = norm_bound``) or ``"literal"`` (paper).
        norm_bound: the RKHS norm ``B`` the construction targets (5 in the paper).
        noise_variance: ``sigma^2`` of the observations (not given by the paper).
        horizon: ``T`` in steps.
        grid_points: if given, the feasible set is this many equally spaced points of
            ``[-50, 50]`` (:attr:`candidates`; the policies then maximize their
            acquisition exactly over it) and the optimum is the best of them.
    """

    name = "rkhs"
    time_unit = "step"
    cost = 0.0
    temporal_kernel = "matern12"  # what TV-GP-UCB's (1 - eps)^{|i-j|/2} factor amounts to
    reference = (
        "Mauduit, Berthier & Simonetto (2025), No-Regret Gaussian Process Optimization of "
        "Time-Varying Functions (W-SparQ-GP-UCB), Sec. 4.1"
    )
    variance = 0.5
    lengthscale = 3.0
    frequency = 0.3

    def __init__(
        self,
        *,
        n_centres: int = 20,
        normalization: str = "exact",
        norm_bound: float = 5.0,
        noise_variance: float = 0.01,
        horizon: float = 500,
        grid_points: int | None = None,
    ) -> None:
        if int(n_centres) != n_centres or n_centres < 1:
            raise ValueError(f"rkhs: n_centres must be a positive integer, got {n_centres!r}")
        check_array_size("rkhs", f"n_centres = {n_centres}", (int(n_centres),) * 2)  # Gram
        if normalization not in _NORMALIZATIONS:
            raise ValueError(
                f"rkhs: normalization must be one of {_NORMALIZATIONS}, got {normalization!r}"
            )
        if noise_variance < 0:
            raise ValueError(f"rkhs: noise_variance must be >= 0, got {noise_variance!r}")
        if not horizon > 0:
            raise ValueError(f"rkhs: horizon must be positive, got {horizon!r}")
        self.dim = 1
        self.bounds = np.array([[-50.0], [50.0]])
        self.n_centres = int(n_centres)
        self.normalization = normalization
        self.norm_bound = positive_number("norm_bound", norm_bound)
        self.noise_variance = float(noise_variance)
        self.horizon = float(horizon)
        if grid_points is not None:
            if isinstance(grid_points, bool) or int(grid_points) != grid_points or grid_points < 2:
                raise ValueError(f"rkhs: grid_points must be an integer >= 2, got {grid_points!r}")
            check_array_size("rkhs", f"grid_points = {grid_points}", (int(grid_points),))
            self.candidates = np.linspace(-50.0, 50.0, int(grid_points)).reshape(-1, 1)
        self.centres = np.linspace(-50.0, 50.0, self.n_centres)
        self.centre_gram = self.kernel(self.centres, self.centres)
        self.lambda_max = float(np.linalg.eigvalsh(self.centre_gram)[-1])
        self._optimum_cache: dict[float, tuple[np.ndarray, float]] = {}

    def kernel(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """``k(x_i, y_j) = 0.5 exp(-(x_i - y_j)^2 / 18)``: ``(m,)`` and ``(n,)`` to ``(m, n)``."""
        from dynbo.kernels import correlation_np  # here: dynbo.kernels loads torch

        distance = np.abs(np.asarray(x, dtype=float)[:, None] - np.asarray(y, dtype=float)[None])
        return self.variance * correlation_np("se", distance / self.lengthscale)

    def coefficients(self, t: float | np.ndarray) -> np.ndarray:
        """``a(t)``: ``(n,)`` for a scalar ``t``, ``(m, n)`` for ``(m,)`` times (steps)."""
        times = np.asarray(t, dtype=float)
        u = np.sin(self.frequency * times[..., None] + np.arange(1, self.n_centres + 1))
        if self.normalization == "exact":
            norm = np.sqrt(np.einsum("...i,ij,...j->...", u, self.centre_gram, u))
            return self.norm_bound * u / norm[..., None]
        return (self.norm_bound / self.lambda_max) * u / np.linalg.norm(u, axis=-1)[..., None]

    def rkhs_norm(self, t: float) -> float:
        """``||f_t||_k = sqrt(a^T K_C a)``."""
        a = self.coefficients(float(t))
        return float(np.sqrt(a @ self.centre_gram @ a))

    def f(self, x: np.ndarray, t: float | np.ndarray) -> np.ndarray:
        """``f(x, t)``.

        Args:
            x: ``(m, 1)`` points (or one ``(1,)`` point) in ``[-50, 50]``.
            t: a time or ``(m,)`` times, in steps.

        Returns:
            ``(m,)`` values (0-d for a ``(1,)`` point).
        """
        x, t = self.checked_input(x, t)
        points = np.asarray(x, dtype=float)
        single = points.ndim == 1
        points = points.reshape(-1)
        weights = self.coefficients(np.broadcast_to(np.asarray(t, dtype=float), points.shape))
        values = np.sum(weights * self.kernel(points, self.centres), axis=1)
        return values.reshape(()) if single else values

    def optimum(self, t: float) -> tuple[np.ndarray, float]:
        """``(x*, f*)``: the best grid point with ``grid_points``; otherwise a 10,001-point
        grid on ``[-50, 50]`` refined by golden section."""
        t = self.checked_time(t)
        key = float(t)
        if key not in self._optimum_cache:
            if len(self._optimum_cache) >= 65_536:
                self._optimum_cache.clear()
            weights = self.coefficients(key)
            if self.candidates is not None:
                values = self.kernel(self.candidates[:, 0], self.centres) @ weights
                best = int(np.argmax(values))
                self._optimum_cache[key] = (self.candidates[best].copy(), float(values[best]))
            else:
                x, value = maximize_interval(
                    lambda u: self.kernel(u, self.centres) @ weights,
                    -50.0,
                    50.0,
                    grid_points=10_001,
                )
                self._optimum_cache[key] = (np.array([x]), value)
        x, value = self._optimum_cache[key]
        return x.copy(), value
