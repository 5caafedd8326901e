"""Acquisition functions and their maximizers."""

from dynbo.acquisition.latency import DurationTable
from dynbo.acquisition.optimize import (
    BoxSearch,
    maximize_acquisition,
    maximize_on_box,
    maximize_on_candidates,
)
from dynbo.acquisition.ucb import (
    BetaSchedule,
    ConstantBeta,
    DatasetSizeBeta,
    LogTimeBeta,
    UpperConfidenceBound,
    make_beta_schedule,
)

__all__ = [
    "BetaSchedule",
    "BoxSearch",
    "ConstantBeta",
    "DurationTable",
    "DatasetSizeBeta",
    "LogTimeBeta",
    "UpperConfidenceBound",
    "make_beta_schedule",
    "maximize_acquisition",
    "maximize_on_box",
    "maximize_on_candidates",
]
