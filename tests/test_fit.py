import numpy as np
import pytest
import torch

from dynbo.models import (
    HyperparameterBounds,
    Hyperparameters,
    KernelSpec,
    NegativeLogMarginalLikelihood,
    SpatioTemporalGP,
    fit_hyperparameters,
)
from tests.test_gp import make_data


def central_difference(f, theta, eps=1e-6):
    grad = np.zeros_like(theta)
    for i in range(theta.size):
        e = np.zeros_like(theta)
        e[i] = eps
        grad[i] = (f(theta + e)[0] - f(theta - e)[0]) / (2 * eps)
    return grad


@pytest.mark.parametrize(
    "spatial,temporal,ard",
    [
        ("matern52", "matern32", False),
        ("se", "matern12", True),
        ("matern32", None, False),
        ("matern12", "se", False),
    ],
)
def test_marginal_likelihood_gradient_matches_finite_differences(spatial, temporal, ard):
    z, y = make_data(35, d=2)
    spec = KernelSpec(dim=2, spatial=spatial, temporal=temporal, ard=ard)
    inputs = z if temporal else z[:, :2]
    gp = SpatioTemporalGP(spec, Hyperparameters(1.0, (0.3,), 5.0 if temporal else None, 0.05))
    gp.set_data(inputs, y)
    nll = NegativeLogMarginalLikelihood(gp)
    rng = np.random.default_rng(1)
    for _ in range(3):
        theta = nll.pack(gp.hyperparameters) + rng.normal(scale=0.3, size=nll.size)
        value, grad = nll(theta)
        np.testing.assert_allclose(grad, central_difference(nll, theta), rtol=1e-5, atol=1e-6)
    # the value is the log-likelihood of the GP at those hyperparameters
    gp.set_hyperparameters(nll.unpack(theta))
    assert -gp.log_marginal_likelihood() == pytest.approx(nll(theta)[0], rel=1e-10)


def test_fit_increases_likelihood_respects_bounds_and_fixed_values():
    z, y = make_data(60)
    gp = SpatioTemporalGP(KernelSpec(dim=2), Hyperparameters(1.0, (0.2,), 1.0, 0.1))
    gp.set_data(z, y)
    before = gp.log_marginal_likelihood()
    bounds = HyperparameterBounds(lengthscale_space=(0.05, 0.25), fixed=frozenset({"noise"}))
    result = fit_hyperparameters(gp, bounds=bounds, max_iterations=100)
    assert gp.log_marginal_likelihood() > before
    assert 0.05 <= result.hyperparameters.lengthscale_space[0] <= 0.25 + 1e-12
    assert result.hyperparameters.noise == 0.1
    assert -gp.log_marginal_likelihood() == pytest.approx(result.negative_log_likelihood, rel=1e-9)


def test_fit_finds_a_stationary_point_and_warm_start_is_cheap():
    z, y = make_data(60)
    gp = SpatioTemporalGP(KernelSpec(dim=2), Hyperparameters(1.0, (0.2,), 5.0, 0.1))
    gp.set_data(z, y)
    first = fit_hyperparameters(gp, max_iterations=200)
    nll = NegativeLogMarginalLikelihood(gp)
    theta = nll.pack(gp.hyperparameters)
    lo, hi = np.array(nll.bounds(HyperparameterBounds())).T
    interior = (theta > lo + 1e-6) & (theta < hi - 1e-6)
    assert np.abs(nll(theta)[1][interior]).max() < 1e-3
    second = fit_hyperparameters(gp, max_iterations=200)
    assert second.iterations <= 3
    assert second.negative_log_likelihood <= first.negative_log_likelihood + 1e-9


def test_fit_needs_data_and_valid_settings():
    gp = SpatioTemporalGP(KernelSpec(dim=1, temporal=None))
    with pytest.raises(ValueError, match="without observations"):
        fit_hyperparameters(gp)
    gp.set_data(torch.rand(3, 1), torch.rand(3))
    with pytest.raises(ValueError, match="max_iterations"):
        fit_hyperparameters(gp, max_iterations=0)
    with pytest.raises(ValueError, match="bounds for noise"):
        HyperparameterBounds(noise=(1.0, 0.1))
    with pytest.raises(ValueError, match="unknown hyperparameter"):
        HyperparameterBounds(fixed=frozenset({"nois"}))
