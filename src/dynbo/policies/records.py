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
