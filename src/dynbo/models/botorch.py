"""The dynbo GP seen as a BoTorch ``Model``.

``BoTorchGP(gp).posterior(X)`` returns a ``GPyTorchPosterior`` in original units, so
BoTorch's analytic acquisition functions (``UpperConfidenceBound``,
``LogExpectedImprovement``, ...) and ``optimize_acqf`` work on the dynbo GP directly.
For a spatio-temporal kernel ``X`` has ``d + 1`` columns (time last); fix the time with
``optimize_acqf(..., fixed_features={d: t})``.
"""

from __future__ import annotations

from typing import Any

import torch
from botorch.acquisition.objective import PosteriorTransform
from botorch.models.model import Model
from botorch.posteriors.gpytorch import GPyTorchPosterior
from gpytorch.distributions import MultivariateNormal

from dynbo.models.gp import SpatioTemporalGP

__all__ = ["BoTorchGP"]


class BoTorchGP(Model):
    """Read-only BoTorch view of a :class:`~dynbo.models.gp.SpatioTemporalGP`.

    The view follows later changes of the GP (it holds a reference, not a copy).
    """

    def __init__(self, gp: SpatioTemporalGP) -> None:
        super().__init__()
        self.gp = gp

    @property
    def num_outputs(self) -> int:
        return 1

    @property
    def batch_shape(self) -> torch.Size:
        return torch.Size([])

    def posterior(
        self,
        X: torch.Tensor,
        output_indices: list[int] | None = None,
        observation_noise: bool | torch.Tensor = False,
        posterior_transform: PosteriorTransform | None = None,
        **kwargs: Any,
    ) -> GPyTorchPosterior:
        """Joint posterior of f at ``X``: ``(..., q, input_dim) -> (..., q)`` Gaussian."""
        if output_indices not in (None, [0]):
            raise ValueError("the dynbo GP has a single output (index 0)")
        mean, cov = self.gp.predict(X, full_covariance=True)
        if observation_noise is not False:
            if isinstance(observation_noise, torch.Tensor):
                noise = observation_noise.to(cov).squeeze(-1)
                cov = cov + torch.diag_embed(noise.expand(cov.shape[:-1]))
            else:
                noise = self.gp.hyperparameters.noise * self.gp.target_scale**2
                cov = cov + noise * torch.eye(cov.shape[-1], dtype=cov.dtype, device=cov.device)
        posterior = GPyTorchPosterior(MultivariateNormal(mean, cov))
        if posterior_transform is not None:
            return posterior_transform(posterior)
        return posterior
