"""Acquisition functions and their maximizers."""

from dynbo.acquisition.optimize import BoxSearch, maximize_on_box, maximize_on_candidates
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
    "DatasetSizeBeta",
    "LogTimeBeta",
    "UpperConfidenceBound",
    "make_beta_schedule",
    "maximize_on_box",
    "maximize_on_candidates",
]
