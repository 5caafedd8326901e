"""What a policy returns: its query, the data it keeps, and what one iteration did."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

__all__ = ["Dataset", "Diagnostics", "Query"]


@dataclass(frozen=True)
class Query:
    """What a policy asks for.

    Attributes:
        x: ``(d,)`` point in the original domain.
        t: time at which to evaluate it (the ``t`` given to ``suggest`` unless the
            policy looks ahead, like ABO).
        additional: ``(m, d)`` past inputs the policy also asks to have evaluated
            afresh, after ``x``, at the current time (SparQ-GP-UCB's "expert" queries);
            their answers go to ``policy.observe_additional``. ``m = 0`` (the default)
            for every policy that makes none.
    """

    x: np.ndarray
    t: float
    additional: np.ndarray = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.additional is None:
            dim = int(np.asarray(self.x).reshape(-1).shape[0])
            object.__setattr__(self, "additional", np.empty((0, dim)))


@dataclass(frozen=True)
class Dataset:
    """The observations a policy currently keeps (original domain and units).

    Attributes:
        x: ``(n, d)`` points.
        t: ``(n,)`` time stamps.
        y: ``(n,)`` observed values.
    """

    x: np.ndarray
    t: np.ndarray
    y: np.ndarray

    def __len__(self) -> int:
        return int(self.y.shape[0])

    def find(
        self,
        x: np.ndarray,
        t: float,
        y: float | None = None,
        tolerance: np.ndarray | float = 0.0,
    ) -> int | None:
        """The index of the newest kept observation at ``x`` ``(d,)`` and time ``t``.

        ``x`` matches within ``tolerance`` (per coordinate, original units; the float32
        policies round what they keep), ``t`` within ``1e-9`` relative, and ``y``, if
        given, within ``1e-9`` relative; ``None`` if no kept observation matches.
        """
        if len(self) == 0:
            return None
        close = np.all(np.abs(self.x - np.asarray(x, dtype=float)) <= tolerance, axis=1)
        close &= np.abs(self.t - t) <= 1e-9 * max(1.0, abs(t))
        if y is not None:
            close &= np.abs(self.y - y) <= 1e-9 * max(1.0, abs(y))
        matches = np.flatnonzero(close)
        return None if matches.size == 0 else int(matches[-1])


@dataclass
class Diagnostics:
    """What happened in one iteration (one ``suggest``).

    Times are wall-clock seconds of this process. ``fit_evaluations`` counts the
    marginal-likelihood evaluations of the fit (0 when it was skipped) and
    ``acquisition_evaluations`` the batched acquisition calls of the gradient search:
    they tell a slow iteration's cause (more optimizer steps, or dearer steps).
    ``extra`` holds policy-specific values (W-DBO's budget, BOLT's n* and response-time
    model, ...).
    """

    iteration: int
    time: float
    fit_seconds: float = 0.0
    acquisition_seconds: float = 0.0
    cleaning_seconds: float = 0.0
    fit_evaluations: int = 0
    acquisition_evaluations: int = 0
    removed: int = 0
    reset: bool = False
    additional_queries: int = 0
    dataset_size: int = 0
    hyperparameters: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
