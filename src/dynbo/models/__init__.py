"""GP models: kernels with time, the exact GP with O(n^2) updates, the likelihood fit."""

from dynbo.models.fit import FitResult, NegativeLogMarginalLikelihood, fit_hyperparameters
from dynbo.models.gp import SpatioTemporalGP
from dynbo.models.kernel import HyperparameterBounds, Hyperparameters, KernelSpec
from dynbo.models.linalg import CholeskyJitterWarning, NumericalError

__all__ = [
    "CholeskyJitterWarning",
    "FitResult",
    "HyperparameterBounds",
    "Hyperparameters",
    "KernelSpec",
    "NegativeLogMarginalLikelihood",
    "NumericalError",
    "SpatioTemporalGP",
    "fit_hyperparameters",
]
