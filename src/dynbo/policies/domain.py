"""The search domain of a policy: its box, an optional finite candidate set, and the map
between original units and the unit box the GP works in.

Every point a user gives is checked here (shape, finiteness, inside the box) and every
suggestion leaves from here (in float64, clipped to the box, or exactly a candidate),
so no policy handles raw coordinates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from dynbo.acquisition.optimize import MAX_BOX_DIM
from dynbo.models.kernel import ArmCovariance
from dynbo.validation import MAX_ABS_TIME, real_array

__all__ = ["SearchDomain"]


class SearchDomain:
    """A box ``[lower, upper]`` in ``d`` dimensions, optionally restricted to candidates.

    Args:
        bounds: ``(2, d)`` lower and upper corners (original units).
        dtype: the model's dtype: bounds and widths must be finite numbers in it, and
            each width at least its smallest normal number (``torch.finfo(dtype).tiny``).
        candidates: ``(N, d)`` finite set of points inside the box, or ``None``.
        arm_covariance: ``(N, N)`` given covariance of ``f`` over the candidates (the
            spatial kernel of the GP, :class:`dynbo.models.ArmCovariance`), or ``None``.

    Raises:
        ValueError: naming the problem with the bounds, the candidates or the covariance
            (not symmetric, not positive semi-definite, wrong size, no candidates,
            repeated candidates).
    """

    def __init__(
        self, bounds: Any, dtype: torch.dtype, candidates: Any = None, arm_covariance: Any = None
    ) -> None:
        self.dtype = dtype
        self.lower, self.upper = self._parse_bounds(bounds, dtype)
        self.dim = int(self.lower.shape[0])
        if candidates is None and self.dim > MAX_BOX_DIM:
            raise ValueError(
                f"bounds: a box search takes at most {MAX_BOX_DIM} dimensions (its Sobol "
                f"sequence), got {self.dim}; give candidates to search a finite set"
            )
        self.candidates: np.ndarray | None = None
        self.candidates_unit: torch.Tensor | None = None
        if candidates is not None:
            cand = real_array("candidates", candidates)
            if cand.ndim != 2 or cand.shape[1] != self.dim or cand.shape[0] < 1:
                raise ValueError(
                    f"candidates must have shape (N, {self.dim}) with N >= 1, got {cand.shape}"
                )
            if not np.isfinite(cand).all():
                raise ValueError("candidates contain NaN or infinite values")
            tol = self.tolerance()
            if (cand < self.lower - tol).any() or (cand > self.upper + tol).any():
                raise ValueError("some candidates lie outside the search bounds")
            self.candidates = np.clip(cand, self.lower, self.upper)
            self.candidates_unit = self.to_unit(torch.as_tensor(cand, dtype=dtype))
        self.arms: ArmCovariance | None = None
        if arm_covariance is not None:
            self.arms = self._parse_arm_covariance(arm_covariance)

    def _parse_arm_covariance(self, value: Any) -> ArmCovariance:
        if self.candidates is None or self.candidates_unit is None:
            raise ValueError("arm_covariance needs candidates (the arms it is a covariance of)")
        matrix = real_array("arm_covariance", value)
        n = self.candidates.shape[0]
        if matrix.shape != (n, n):
            raise ValueError(
                f"arm_covariance must have shape ({n}, {n}) for {n} candidates, got {matrix.shape}"
            )
        if not np.isfinite(matrix).all():
            raise ValueError("arm_covariance contains NaN or infinite values")
        scale = max(float(np.abs(matrix).max()), np.finfo(float).tiny)
        if np.abs(matrix - matrix.T).max() > 1e-10 * scale:
            raise ValueError("arm_covariance must be symmetric")
        lowest = float(np.linalg.eigvalsh(0.5 * (matrix + matrix.T))[0])
        if lowest < -1e-8 * scale:
            raise ValueError(
                f"arm_covariance must be positive semi-definite (smallest eigenvalue {lowest:.3g})"
            )
        if len(np.unique(self.candidates, axis=0)) != n:
            # an arm is found by its coordinates: two arms at one point are one arm
            raise ValueError("arm_covariance needs distinct candidates; some are repeated")
        matrix = 0.5 * (matrix + matrix.T)
        return ArmCovariance(self.candidates_unit, torch.as_tensor(matrix, dtype=self.dtype))

    def tolerance(self) -> np.ndarray:
        """``(d,)`` slack accepted outside the box (1e-9 of each width)."""
        return 1e-9 * (self.upper - self.lower)

    def to_unit(self, x: torch.Tensor) -> torch.Tensor:
        """``(..., d)`` points in original units -> the unit box (clamped)."""
        lower = torch.as_tensor(self.lower, dtype=x.dtype, device=x.device)
        width = torch.as_tensor(self.upper - self.lower, dtype=x.dtype, device=x.device)
        return ((x - lower) / width).clamp(0.0, 1.0)

    def point_from_unit(self, unit: torch.Tensor) -> np.ndarray:
        """``(d,)`` float64 point of the original domain for a unit-box point.

        Computed in float64 and clipped to the bounds, so that a float32 model never
        suggests a point outside the box; on a finite candidate set, the candidate
        itself (exactly as the user gave it).
        """
        u = unit.detach().cpu().to(torch.float64).numpy().reshape(self.dim)
        if self.candidates is not None and self.candidates_unit is not None:
            reference = self.candidates_unit.detach().cpu().to(torch.float64).numpy()
            index = int(np.argmin(((reference - u) ** 2).sum(axis=1)))
            return self.candidates[index].copy()
        return np.clip(self.lower + u * (self.upper - self.lower), self.lower, self.upper)

    def snap(self, points: np.ndarray) -> np.ndarray:
        """``(m, d)`` points the model holds (in its dtype's precision) as the domain's own:
        clipped to the bounds, or on a finite set the nearest candidates exactly, so that
        a float32 model never asks for a point the domain refuses."""
        points = np.asarray(points, dtype=np.float64).reshape(-1, self.dim)
        if self.candidates is not None and len(points):
            distance = ((points[:, None, :] - self.candidates[None, :, :]) ** 2).sum(axis=2)
            return self.candidates[np.argmin(distance, axis=1)].copy()
        return np.clip(points, self.lower, self.upper)

    def validate_point(self, x: Sequence[float] | np.ndarray) -> torch.Tensor:
        """``x`` as a ``(d,)`` tensor of the model's dtype, or a ``ValueError``."""
        arr = real_array("x", x)
        if arr.shape not in ((self.dim,), (1, self.dim)):
            raise ValueError(f"x must have shape ({self.dim},), got {arr.shape}")
        arr = arr.reshape(self.dim)
        if not np.isfinite(arr).all():
            raise ValueError(f"x contains NaN or infinite values: {arr.tolist()}")
        self.check_inside(arr.reshape(1, self.dim), "x")
        return torch.as_tensor(np.clip(arr, self.lower, self.upper), dtype=self.dtype)

    def check_inside(self, points: np.ndarray, name: str) -> None:
        """``ValueError`` naming the first coordinate of the finite ``(m, d)`` ``points``
        outside the box (beyond :meth:`tolerance`); ``name`` is the argument's name."""
        tol = self.tolerance()
        outside = (points < self.lower - tol) | (points > self.upper + tol)
        if outside.any():
            i, j = (int(v) for v in np.argwhere(outside)[0])
            where = f"{name}[{j}]" if len(points) == 1 else f"{name}[{i}, {j}]"
            raise ValueError(
                f"{where} = {points[i, j]} lies outside the domain "
                f"[{self.lower[j]}, {self.upper[j]}]"
            )

    def validate_points_and_times(self, x: Any, t: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(m, d)`` points inside the box and ``(m,)`` times (one time is broadcast), as
        float64 arrays, or a ``ValueError`` (wrong shape, non-finite, outside the box,
        ``|t| > 1e12``: what ``observe`` refuses too)."""
        points = real_array("x", x)
        if points.ndim != 2 or points.shape[1] != self.dim:
            raise ValueError(f"x must have shape (m, {self.dim}), got {points.shape}")
        times = np.broadcast_to(real_array("t", t), (points.shape[0],))
        if not (np.isfinite(points).all() and np.isfinite(times).all()):
            raise ValueError("x and t must be finite")
        self.check_inside(points, "x")  # as observe: the model knows the box only
        if times.size and np.abs(times).max() > MAX_ABS_TIME:
            raise ValueError(
                f"t = {np.abs(times).max():g} is out of range (|t| must be <= {MAX_ABS_TIME:g})"
            )
        return points, times

    @staticmethod
    def _parse_bounds(bounds: Any, dtype: torch.dtype) -> tuple[np.ndarray, np.ndarray]:
        arr = real_array("bounds", bounds)
        if arr.ndim != 2 or arr.shape[0] != 2 or arr.shape[1] < 1:
            raise ValueError(f"bounds must have shape (2, d), got {arr.shape}")
        if not np.isfinite(arr).all():
            raise ValueError("bounds must be finite")
        if not (arr[0] < arr[1]).all():
            j = int(np.argmax(~(arr[0] < arr[1])))
            raise ValueError(
                f"bounds: lower[{j}] = {arr[0, j]} is not below upper[{j}] = {arr[1, j]}"
            )
        # points are mapped to the unit box through the width: it must be a finite
        # number of the model's dtype, and so must every bound
        largest = float(torch.finfo(dtype).max) / 4
        with np.errstate(over="ignore"):
            width = arr[1] - arr[0]
        finite = np.isfinite(width).all()
        if not (finite and np.abs(arr).max() <= largest and width.max() <= largest):
            raise ValueError(
                f"bounds are too wide: each bound and each width upper - lower must be at "
                f"most {largest:.3g} in magnitude (dtype {str(dtype).replace('torch.', '')})"
            )
        # the unit box divides by the width in the model's dtype: a width that underflows
        # there (to 0 or to a subnormal) would turn every observed point into NaN
        smallest = float(torch.finfo(dtype).tiny)
        narrow = width < smallest
        if narrow.any():
            j = int(np.argmax(narrow))
            raise ValueError(
                f"bounds are too narrow: width upper[{j}] - lower[{j}] = {width[j]:.3g} is "
                f"below {smallest:.3g}, the smallest normal number of dtype "
                f"{str(dtype).replace('torch.', '')} (rescale the problem or use float64)"
            )
        return arr[0].copy(), arr[1].copy()
