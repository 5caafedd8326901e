"""The queries a policy returned and was not told the answer to (several devices at once).

:class:`PendingQueries` is the part of :class:`~dynbo.policies.base.Policy` that keeps
them: ``suggest`` appends each query it returns, ``observe`` at a pending query's point
answers it (the oldest one there), and the next ``suggest`` accounts for the others as
GP-BUCB does (Desautels, Krause & Burdick 2014; :mod:`dynbo.acquisition.pending`). It
reads the policy's domain, time coordinate and GP inputs, and holds no state of its own
besides ``_pending``, which the policy saves with its state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:
    from dynbo.policies.records import Query

__all__ = ["MAX_BATCH", "PendingQueries"]

#: the most queries one ``suggest_batch`` returns
MAX_BATCH = 64


class PendingQueries:
    """Pending queries of a policy: ``_pending``, ``((d,) x, t)`` pairs, oldest first.

    A mixin of :class:`~dynbo.policies.base.Policy`, whose ``suggest``, ``_snapshot``,
    ``_restore``, ``_time_coordinate`` and ``_gp_inputs`` it calls.
    """

    _pending: tuple[tuple[np.ndarray, float], ...]
    _domain: Any
    dtype: torch.dtype
    device: torch.device

    @property
    def pending(self) -> list[tuple[np.ndarray, float]]:
        """The queries returned and not answered yet, oldest first: ``((d,) x, t)`` copies.

        The next ``suggest`` accounts for them (GP-BUCB's hallucinated observations,
        :mod:`dynbo.acquisition.pending`); an ``observe`` at a pending query's point
        answers it (the oldest one there).
        """
        return [(x.copy(), t) for x, t in self._pending]

    def cancel_pending(self, x: Sequence[float] | np.ndarray | None = None) -> int:
        """Stop accounting for the pending query at ``x`` (the oldest there), or for every
        pending query (``x=None``): a device that will never answer. Returns how many."""
        if x is None:
            count, self._pending = len(self._pending), ()
            return count
        before = len(self._pending)
        self._pending = self._without_pending(self._domain.validate_point(x))
        return before - len(self._pending)

    def suggest_batch(self, t: float, q: int, budget: float | None = None) -> list[Query]:
        """``q`` queries at time ``t`` for ``q`` devices: each
        :meth:`~dynbo.policies.Policy.suggest` accounts for the ones before it (and for
        any query still pending), so that they differ.

        Args:
            q: 1 to ``MAX_BATCH`` queries.
            budget: seconds for each suggestion (see :meth:`~dynbo.policies.Policy.suggest`).
        """
        if isinstance(q, bool) or not isinstance(q, int) or not 1 <= q <= MAX_BATCH:
            raise ValueError(f"q must be an integer from 1 to {MAX_BATCH}, got {q!r}")
        snapshot = self._snapshot()
        try:
            return [self.suggest(t, budget=budget) for _ in range(q)]
        except BaseException:  # all or nothing: the queries made were never returned
            self._restore(snapshot)
            raise

    def _pending_index(self, x: np.ndarray | torch.Tensor) -> int | None:
        """Index in :attr:`pending` of the oldest pending query at ``x`` (within the
        domain's tolerance), or ``None``."""
        x = np.asarray(torch.as_tensor(x).detach().cpu(), dtype=float)
        tolerance = self._domain.tolerance()
        for i, (point, _) in enumerate(self._pending):
            if np.all(np.abs(point - x) <= tolerance):
                return i
        return None

    def _without_pending(
        self, x: np.ndarray | torch.Tensor
    ) -> tuple[tuple[np.ndarray, float], ...]:
        """The pending queries but the oldest at ``x`` (within the domain's tolerance)."""
        i = self._pending_index(x)
        if i is None:
            return self._pending
        return self._pending[:i] + self._pending[i + 1 :]

    def _pending_inputs(self) -> torch.Tensor:
        """``(k, input_dim)`` GP inputs of the pending queries."""
        points = torch.as_tensor(np.stack([x for x, _ in self._pending]), dtype=self.dtype)
        times = torch.tensor([self._time_coordinate(t) for _, t in self._pending], dtype=self.dtype)
        return self._gp_inputs(self._domain.to_unit(points), times).to(self.device)
