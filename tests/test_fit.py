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
from dynbo.models.fit import _NUMPY_LARGEST
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


@pytest.mark.parametrize(
    "temporal,ard,fixed",
    [
        ("matern32", False, ()),
        ("matern12", True, ()),
        (None, False, ("noise",)),
        ("wiener", True, ("lengthscale_space", "outputscale")),
        ("matern52", False, ("lengthscale_time",)),
    ],
)
def test_the_evaluations_numbers_are_the_unpacked_hyperparameters(temporal, ard, fixed):
    # _evaluate reads plain numbers, not a Hyperparameters (building one costs as much as a
    # small evaluation's arithmetic): they must be exactly what unpack gives
    z, y = make_data(12, d=3)
    spec = KernelSpec(dim=3, temporal=temporal, ard=ard)
    gp = SpatioTemporalGP(
        spec, Hyperparameters(0.7, (0.3, 0.4, 0.5) if ard else (0.3,), 5.0 if temporal else None)
    )
    gp.set_data(z if temporal else z[:, :3], y)
    nll = NegativeLogMarginalLikelihood(gp, fixed=fixed)
    rng = np.random.default_rng(3)
    for _ in range(50):
        theta = nll.pack(gp.hyperparameters) + rng.normal(scale=2.0, size=nll.size)
        h = nll.unpack(theta)
        values = nll._values(theta)
        assert values.outputscale == h.outputscale and values.noise == h.noise
        assert values.lengthscale_space == h.lengthscale_space
        assert values.lengthscale_time == h.lengthscale_time


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


@pytest.mark.parametrize("size", [40, _NUMPY_LARGEST + 4])
@pytest.mark.parametrize("method", ["newton", "l-bfgs-b"])
@pytest.mark.parametrize(
    "spatial,temporal,ard", [("matern52", "matern12", False), ("se", "wiener", True)]
)
def test_the_gp_after_a_fit_is_the_refactorized_gp(method, spatial, temporal, ard, size):
    # the fit hands the GP the factor of its last evaluation where that is the optimum's
    # and was computed in torch: the same matrix, so the posterior is that of a fresh
    # factorization to rounding (a small dataset's NumPy evaluations hand none)
    z, y = make_data(size, d=2)
    spec = KernelSpec(dim=2, spatial=spatial, temporal=temporal, ard=ard)
    gp = SpatioTemporalGP(spec, Hyperparameters(1.0, (0.2, 0.3) if ard else (0.2,), 5.0, 0.05))
    gp.set_data(z, y)
    taken = []
    original = SpatioTemporalGP.set_hyperparameters

    def spy(self, hyperparameters, *, factor=None):
        taken.append(factor is not None)
        original(self, hyperparameters, factor=factor)

    SpatioTemporalGP.set_hyperparameters = spy
    try:
        fit_hyperparameters(gp, method=method, max_iterations=100)
    finally:
        SpatioTemporalGP.set_hyperparameters = original
    if method == "newton":
        assert taken == [size > _NUMPY_LARGEST]  # Newton ends on its last evaluation
    fitted_factor = gp._factor.clone()
    points = torch.rand(7, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    points[:, 2] *= 10.0
    mean, variance = gp.predict(points)
    gp.refactorize()
    # to rounding: relative to the factor's largest entry (a Wiener factor's grow with t)
    scale = float(gp._factor.abs().max())
    torch.testing.assert_close(fitted_factor, gp._factor, rtol=1e-10, atol=1e-12 * scale)
    fresh_mean, fresh_variance = gp.predict(points)
    torch.testing.assert_close(mean, fresh_mean, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(variance, fresh_variance, rtol=1e-10, atol=1e-12)


def test_a_factor_of_the_wrong_size_is_refused():
    z, y = make_data(10, d=2)
    gp = SpatioTemporalGP(KernelSpec(dim=2), Hyperparameters(1.0, (0.2,), 5.0, 0.05))
    gp.set_data(z, y)
    before = gp.hyperparameters
    with pytest.raises(ValueError, match="factor must be"):
        gp.set_hyperparameters(Hyperparameters(2.0, (0.3,), 5.0, 0.05), factor=torch.eye(9))
    assert gp.hyperparameters == before


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


def test_map_objective_adds_the_log_prior_and_its_gradient():
    z, y = make_data(30, d=2)
    gp = SpatioTemporalGP(KernelSpec(dim=2), Hyperparameters(1.0, (0.3,), 5.0, 0.05))
    gp.set_data(z, y)
    priors = {"lengthscale_time": (np.log(20.0), 1.5), "noise": (-4.0, 1.0)}
    ml = NegativeLogMarginalLikelihood(gp)
    post = NegativeLogMarginalLikelihood(gp, priors=priors)
    theta = ml.pack(gp.hyperparameters) + 0.1
    value_ml, _ = ml(theta)
    value, grad = post(theta)
    expected = value_ml
    for i, (mean, scale) in [(2, priors["lengthscale_time"]), (3, priors["noise"])]:
        # GPyTorch's LogNormalPrior.log_prob at v = exp(theta), up to its constant
        import torch as _torch
        from gpytorch.priors import LogNormalPrior

        log_prob = LogNormalPrior(mean, scale).log_prob(_torch.tensor(np.exp(theta[i])))
        const = -np.log(scale * np.sqrt(2 * np.pi))
        expected -= float(log_prob) - const
    assert value == pytest.approx(expected, rel=1e-12)
    np.testing.assert_allclose(grad, central_difference(post, theta), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="prior scale"):
        NegativeLogMarginalLikelihood(gp, priors={"noise": (0.0, 0.0)})
    with pytest.raises(ValueError, match="unknown hyperparameter"):
        NegativeLogMarginalLikelihood(gp, priors={"nosie": (0.0, 1.0)})


def test_priors_keep_wdbo_from_forgetting_everything_on_a_noisy_start():
    # 15 noisy warm-up points over 1.5 s of a 60 s problem: maximum likelihood then
    # swings l_T between 1e-2 s and 1e5 s, and W-DBO, trusting a short l_T, removes all
    # but 2 observations; under the default weak priors (time in units of the horizon)
    # l_T settles near the function's time scale and W-DBO keeps a working dataset.
    # The floor on l_T is switched off so that the priors' effect is seen alone.
    from dynbo.harness import Protocol, RunSpec, execute

    stuck = {}
    for hyperpriors in (False, True):
        spec = RunSpec(
            benchmark="hartmann3",
            policy="wdbo",
            seed=0,
            protocol=Protocol(clock="modeled", response_time=(0.5, 0.0, 0.0, 1e-6)),
            benchmark_options={"dim": 2, "horizon": 60.0, "cost": 0.5},
            policy_options={
                "hyperpriors": hyperpriors,
                "lengthscale_time_floor": None,
                "raw_samples": 64,
                "restarts": 3,
            },
        )
        result = execute(spec)
        assert result.status == "done", result.error
        sizes = np.array([r["dataset_size"] for r in result.iterations if not r["warmup"]])
        # share of iterations (after the first five) with W-DBO at its minimum size
        stuck[hyperpriors] = float(np.mean(sizes[5:] <= 3))
    assert stuck[False] > 0.9
    assert stuck[True] < 0.3
