"""Response times per dataset size, and the cubic ``R(n)`` fitted to them.

A TVBO policy's response time grows with its dataset (fit and acquisition are
polynomial in ``n``). BOLT (Bardou & Thiran 2025, Sec. 4) fits a cubic with
non-negative coefficients to measured ``(n, seconds)`` pairs to compute its maximal
useful dataset size; latency-aware acquisition uses the same fit to aim a query at the
time it will land (``t + R(n)``) instead of the time it was asked for.

The measurements are kept as one aggregate per dataset size (count and sum of
durations); the cubic is fitted to the means weighted by the counts, which is the same
least-squares problem as on every pair, in memory bounded by the number of distinct
sizes instead of growing by one pair per iteration for ever.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from dynbo.theory import ResponseTimeModel, fit_cubic

__all__ = ["DurationTable"]

#: distinct dataset sizes a cubic (4 coefficients) needs.
CUBIC_POINTS = 4


class DurationTable:
    """Durations (seconds) aggregated per dataset size, with the fitted ``R(n)``."""

    def __init__(self) -> None:
        # dataset size -> [number of measurements, sum of their durations (s)]
        self._table: dict[int, list[float]] = {}

    def __len__(self) -> int:
        """Number of distinct dataset sizes measured."""
        return len(self._table)

    def record(self, size: int, seconds: float) -> None:
        """Add one measured duration at dataset size ``size``."""
        entry = self._table.setdefault(int(size), [0, 0.0])
        entry[0] += 1
        entry[1] += float(seconds)

    def rows(self) -> np.ndarray:
        """``(m, 3)``: dataset size, mean duration (s), number of measurements; by size."""
        rows = [(n, total / count, count) for n, (count, total) in sorted(self._table.items())]
        return np.asarray(rows, dtype=float).reshape(-1, 3)

    def model(self, min_sizes: int = CUBIC_POINTS) -> ResponseTimeModel | None:
        """The cubic fitted to the means (``None`` with fewer than ``min_sizes`` sizes)."""
        if len(self._table) < max(min_sizes, CUBIC_POINTS):
            return None
        table = self.rows()
        return fit_cubic(table[:, 0], table[:, 1], weights=table[:, 2])

    def predict(self, size: int, min_sizes: int = CUBIC_POINTS) -> float | None:
        """Predicted duration at ``size``: the cubic, or the overall mean before it fits.

        The cubic is not extrapolated more than one size beyond the largest measured
        (a cubic through a few small sizes can grow without bound past them; a policy
        that measures every iteration is never more than one size ahead). ``None``
        before the first measurement.
        """
        model = self.model(min_sizes)
        if model is not None:
            return float(model(min(size, max(self._table) + 1)))
        if not self._table:
            return None
        count = sum(c for c, _ in self._table.values())
        return sum(total for _, total in self._table.values()) / count

    def state(self) -> dict[str, list[float]]:
        """Plain-value state (``{"size": [count, total seconds]}``)."""
        return {str(n): [int(c), float(s)] for n, (c, s) in self._table.items()}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> DurationTable:
        """Inverse of :meth:`state`."""
        table = cls()
        table._table = {int(n): [int(c), float(s)] for n, (c, s) in state.items()}
        return table
