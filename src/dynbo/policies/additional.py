"""Bookkeeping of additional queries: fresh evaluations a policy asks for at past inputs.

SparQ-GP-UCB and W-SparQ-GP-UCB (Mauduit, Berthier & Simonetto 2025) ask, besides their main
query, for new values of the objective at some inputs they have already queried, taken
at the current time. ``Policy.suggest`` returns them in ``Query.additional``; the
answers come back through ``Policy.observe_additional``. This module holds the requests
of the latest ``suggest`` and checks each answer against them: an answer must be for a
requested point, at most once, and only until the next ``suggest`` (which asks anew).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from dynbo.validation import finite_number, real_array

if TYPE_CHECKING:
    from dynbo.policies.domain import SearchDomain

__all__ = ["AdditionalRequests", "validate_answers"]


class AdditionalRequests:
    """The additional points asked for by the latest ``suggest`` and which were answered.

    Args:
        points: ``(m, d)`` the requested points in original units (``m`` may be 0).
        tolerance: ``(d,)`` how far (original units) an answered point may be from the
            requested one (round-off of a client's copy) and still match it.
    """

    def __init__(self, points: np.ndarray, tolerance: np.ndarray) -> None:
        self.tolerance = np.asarray(tolerance, dtype=float)
        self.points = np.asarray(points, dtype=float).reshape(len(points), self.tolerance.size)
        self.answered = np.zeros(len(self.points), dtype=bool)

    def __len__(self) -> int:
        return int(self.points.shape[0])

    def match(self, x: np.ndarray) -> np.ndarray:
        """The request each row of ``x`` answers (changes nothing).

        Args:
            x: ``(k, d)`` answered points, original units.

        Returns:
            ``(k,)`` indices into :attr:`points`, distinct and not answered before.

        Raises:
            ValueError: a row that matches no outstanding request (never asked for,
                already answered, or answered twice in ``x``).
        """
        if len(self) == 0:
            raise ValueError("observe_additional: the last suggest asked for no additional queries")
        taken = self.answered.copy()
        out = np.empty(x.shape[0], dtype=np.int64)
        for row, point in enumerate(x):
            close = np.all(np.abs(self.points - point) <= self.tolerance, axis=1)
            free = np.flatnonzero(close & ~taken)
            if free.size == 0:
                what = "was already answered" if close.any() else "was not asked for"
                raise ValueError(
                    f"observe_additional: x[{row}] = {point.tolist()} {what} (the last "
                    f"suggest asked for {self.points.tolist()})"
                )
            out[row] = free[0]
            taken[free[0]] = True
        return out

    def mark(self, indices: np.ndarray) -> None:
        """Record the requests ``indices`` as answered."""
        self.answered[indices] = True

    def state(self) -> dict[str, Any]:
        """Plain tensors for ``Policy.state_dict``."""
        return {
            "points": torch.as_tensor(self.points, dtype=torch.float64).clone(),
            "answered": torch.as_tensor(self.answered).clone(),
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any], tolerance: np.ndarray) -> AdditionalRequests:
        """Inverse of :meth:`state`."""
        points = torch.as_tensor(state["points"], dtype=torch.float64).numpy().copy()
        answered = torch.as_tensor(state["answered"]).numpy().astype(bool).copy()
        if answered.shape != (points.shape[0],):
            raise ValueError("additional requests: points and answered flags disagree")
        requests = cls(points, tolerance)
        requests.answered = answered
        return requests


def validate_answers(
    domain: SearchDomain,
    x: Any,
    t: Any,
    y: Any,
    validate_time: Callable[[Any], float],
    max_abs_target: float,
) -> tuple[np.ndarray, torch.Tensor, list[float], list[float]]:
    """Check answers to additional queries before anything changes.

    Args:
        domain: the policy's search domain.
        x: ``(m, d)`` points; ``t``: one time or ``(m,)`` non-decreasing times; ``y``:
            ``(m,)`` values.
        validate_time: the policy's check of one time.
        max_abs_target: the largest ``|y|`` the model takes.

    Returns:
        ``(points, rows, times, values)``: the points as given ``(m, d)``, as the model's
        tensor ``(m, d)`` (clipped into the box), and the times and values as floats.

    Raises:
        ValueError: wrong shapes, NaN/inf, points outside the box, values too large or
            times out of order.
    """
    points = real_array("x", x)
    if points.ndim != 2 or points.shape[1] != domain.dim:
        raise ValueError(f"x must have shape (m, {domain.dim}), got {points.shape}")
    m = points.shape[0]
    rows = [domain.validate_point(p) for p in points]
    given = real_array("t", t)
    if given.ndim > 1 or given.size not in (1, m):
        raise ValueError(f"t must be one time or have shape ({m},), got {given.shape}")
    times = [validate_time(v) for v in np.broadcast_to(given.reshape(-1), (m,))]
    for i in range(1, m):
        if times[i] < times[i - 1]:
            raise ValueError(f"t must be non-decreasing, but t[{i}] < t[{i - 1}]")
    observed = real_array("y", y)
    if observed.shape != (m,):
        raise ValueError(f"y must have shape ({m},), got {observed.shape}")
    values = [finite_number(f"y[{i}]", v) for i, v in enumerate(observed)]
    for i, v in enumerate(values):
        if abs(v) > max_abs_target:
            raise ValueError(f"y[{i}] = {v} is too large to model")
    stacked = torch.stack(rows) if rows else torch.empty((0, domain.dim), dtype=domain.dtype)
    return points, stacked, times, values
