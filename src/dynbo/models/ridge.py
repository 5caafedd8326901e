"""Weighted kernel-ridge views of the GP: the surrogate of the frequentist baselines.

SW-, BR- (Zhou & Shroff 2021) and W-GP-UCB (Deng, Zhou, Kim, Tewari, Gupta & Shroff 2022)
run a regularized kernel-ridge regression instead of a Bayesian GP. With regularizer
``lambda_r`` and weights ``w_s`` on the observations,

    f_hat = argmin_f sum_s w_s (y_s - f(x_s))^2 + lambda_r ||f||_H^2,
    b(x) = (K + lambda_r W^{-1})^{-1} k(x),    mu(x) = y^T b(x),

which is exactly the posterior mean of the GP whose noise variance is ``lambda_r`` and
whose per-observation noise multipliers are ``1 / w_s``; so the policies reuse the GP
(its O(n^2) add and remove included) and only the width differs. Two widths
(``sigma^2`` below; UCB uses ``mu + kappa sigma``):

* ``"plain"``: ``k(x, x) - k(x)^T (K + lambda_r W^{-1})^{-1} k(x)``, the GP's posterior
  variance (with unit weights: IGP-UCB's ``sigma_t^2``, Chowdhury & Gopalan 2017);
* ``"sandwich"``: ``k(x, x) - 2 k(x)^T b + b^T K b + lambda_r b^T b``, which is
  ``lambda_r ||phi(x)||^2_{V^{-1} V~ V^{-1}}`` with ``V = lambda_r I + sum w_s phi phi^T``
  and ``V~ = lambda_r I + sum w_s^2 phi phi^T``: the weighted-bandit width (Russac et al.
  2019) that Deng et al. generalize. It equals the plain width plus
  ``lambda_r sum_s b_s^2 (1 - 1/w_s)``, so both coincide when all weights are 1.

Both are scaled by ``lambda_r`` relative to the feature-space norms, so that with unit
weights they equal the GP variance (the convention of the unweighted policies here).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

import torch

from dynbo.models.gp import PosteriorGradient, SpatioTemporalGP

__all__ = ["WIDTHS", "ridge_width", "WeightedRidgeView"]

WIDTHS = ("plain", "sandwich")

_MIN_WIDTH = 1e-12


def ridge_width(
    cross: torch.Tensor,
    prior_variance: torch.Tensor | float,
    factor: torch.Tensor,
    inverse_weights: torch.Tensor,
    regularizer: float,
    width: Literal["plain", "sandwich"],
) -> torch.Tensor:
    """Squared width of the weighted kernel-ridge estimate at ``m`` points.

    Args:
        cross: ``(m, n)`` kernel values ``k(x, x_s)``.
        prior_variance: ``k(x, x)``, scalar or ``(m,)``.
        factor: ``(n, n)`` lower Cholesky factor of ``K + regularizer * diag(inverse_weights)``.
        inverse_weights: ``(n,)`` ``1 / w_s`` (>= 1 for weights in (0, 1]).
        regularizer: ``lambda_r > 0``.
        width: ``"plain"`` or ``"sandwich"`` (module docstring).

    Returns:
        ``(m,)`` squared widths, floored at ``1e-12``.
    """
    if width not in WIDTHS:
        raise ValueError(f"width must be one of {WIDTHS}, got {width!r}")
    v = torch.linalg.solve_triangular(factor, cross.T, upper=False)  # (n, m)
    plain = prior_variance - (v * v).sum(0)
    if width == "plain":
        return plain.clamp_min(_MIN_WIDTH)
    b = torch.linalg.solve_triangular(factor.T, v, upper=True)  # (n, m) = Delta^{-1} k
    correction = regularizer * ((b * b) * (1.0 - inverse_weights).reshape(-1, 1)).sum(0)
    return (plain + correction).clamp_min(_MIN_WIDTH)


class WeightedRidgeView:
    """The GP read as a weighted kernel ridge: its mean, and the chosen width as variance.

    The GP must hold ``noise = lambda_r`` and noise multipliers ``1 / w_s``. Has the
    ``kernel`` and ``predict`` that :class:`~dynbo.acquisition.ucb.UpperConfidenceBound`
    needs (standardized units only).
    """

    def __init__(self, gp: SpatioTemporalGP, width: Literal["plain", "sandwich"]) -> None:
        if width not in WIDTHS:
            raise ValueError(f"width must be one of {WIDTHS}, got {width!r}")
        self.gp = gp
        self.kernel = gp.kernel
        self.width = width

    def predict(
        self, test_inputs: torch.Tensor, *, standardized: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mean, width^2)`` at ``(..., m, input_dim)`` inputs (differentiable)."""
        if not standardized:
            raise ValueError("the ridge view works in standardized units")
        gp = self.gp
        if gp.n == 0 or self.width == "plain":
            return gp.predict(test_inputs, standardized=True)
        z = test_inputs.to(dtype=gp.dtype, device=gp.device)
        shape = z.shape[:-1]
        flat = z.reshape(-1, z.shape[-1])
        cross = gp.covariance(flat, gp.inputs)
        mean = cross @ gp.alpha
        squared = ridge_width(
            cross,
            gp.prior_variance(flat),  # not the outputscale: k(x, x) varies over given arms
            gp.cholesky_factor,
            gp.noise_scale,
            gp.hyperparameters.noise,
            self.width,
        )
        return mean.reshape(shape), squared.reshape(shape)

    def posterior_with_gradient(self, test_inputs: torch.Tensor) -> PosteriorGradient | None:
        """The mean and the chosen width squared at ``(m, input_dim)`` points, with gradients.

        The sandwich correction ``lambda_r sum_s c_s b_s^2`` (``c_s = 1 - 1/w_s``,
        ``b = Delta^{-1} k``) has gradient ``2 lambda_r sum_s (Delta^{-1} (c o b))_s dk_s/dx``:
        one more Cholesky solve than the GP's variance. ``None`` where the GP has no
        closed-form gradient (:meth:`SpatioTemporalGP.posterior_with_gradient`).
        """
        gp = self.gp
        posterior = gp.posterior_with_gradient(test_inputs)
        if posterior is None or self.width == "plain":
            return posterior
        b = posterior.representer  # (n, m)
        weights = (1.0 - gp.noise_scale).reshape(-1, 1)
        regularizer = gp.hyperparameters.noise
        # c_s <= 0: where the GP's variance sits at its floor, so does the width
        squared = posterior.variance + regularizer * (weights * b * b).sum(0)
        projected = torch.cholesky_solve(weights * b, gp.cholesky_factor)  # (n, m)
        # V = -2 b + 2 lambda_r Delta^{-1} (c o b), from the GP's V (zero rows where its
        # variance is floored: then so is the width), zero rows where the width is floored
        variance_weights = torch.add(
            posterior.variance_weights, projected.T, alpha=2.0 * regularizer
        )
        return replace(
            posterior,
            variance=squared.clamp_min(_MIN_WIDTH),
            variance_weights=variance_weights.masked_fill_((squared < _MIN_WIDTH)[:, None], 0.0),
        )
