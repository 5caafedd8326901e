"""GP models: kernels with time, the exact GP with O(n^2) updates, the likelihood fit."""

from dynbo.models.fit import (
    FitResult,
    NegativeLogMarginalLikelihood,
    epsilon_gradient,
    fit_hyperparameters,
)
from dynbo.models.gp import PosteriorGradient, SpatioTemporalGP
from dynbo.models.kernel import (
    ArmCovariance,
    HyperparameterBounds,
    Hyperparameters,
    KernelSpec,
    markov_epsilon,
    markov_lengthscale,
)
from dynbo.models.linalg import CholeskyJitterWarning, NumericalError
from dynbo.models.ridge import WeightedRidgeView, ridge_width

__all__ = [
    "ArmCovariance",
    "CholeskyJitterWarning",
    "FitResult",
    "HyperparameterBounds",
    "Hyperparameters",
    "KernelSpec",
    "NegativeLogMarginalLikelihood",
    "NumericalError",
    "PosteriorGradient",
    "SpatioTemporalGP",
    "WeightedRidgeView",
    "epsilon_gradient",
    "fit_hyperparameters",
    "markov_epsilon",
    "markov_lengthscale",
    "ridge_width",
]
