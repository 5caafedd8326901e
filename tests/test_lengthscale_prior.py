"""The shared ``lengthscale_prior`` option: a Gamma prior on the spatial lengthscales,
one per dimension with ARD, in the fit's objective (ET-GP-UCB's Table 6 for cart-pole)."""

import numpy as np
import pytest
import torch

from dynbo.models import SpatioTemporalGP
from dynbo.models.fit import NegativeLogMarginalLikelihood
from dynbo.models.kernel import Hyperparameters, KernelSpec
from dynbo.policies import PolicyOptions, make

BOX4 = [[0.0] * 4, [1.0] * 4]


def _gp(dim=3):
    kernel = KernelSpec(dim=dim, spatial="matern52", temporal="matern12", ard=True)
    gp = SpatioTemporalGP(kernel, Hyperparameters(1.0, (0.4, 0.7, 1.2), 5.0, 0.05))
    g = torch.Generator().manual_seed(0)
    x = torch.rand(10, dim, generator=g, dtype=torch.float64)
    t = torch.arange(10.0, dtype=torch.float64)[:, None]
    gp.set_data(torch.cat([x, t], 1), torch.sin(5 * x[:, 0]) + x[:, 1] + 0.1 * t[:, 0])
    return gp


def test_a_per_dimension_gamma_prior_adds_each_density_with_its_own_rate():
    gp = _gp()
    rates = (2.0, 5.0, 40.0)
    plain = NegativeLogMarginalLikelihood(gp)
    prior = NegativeLogMarginalLikelihood(gp, priors={"lengthscale_space": ("gamma", 15.0, rates)})
    theta = plain.pack(gp.hyperparameters)
    v0, g0, h0 = plain.with_hessian(theta)
    v1, g1, h1 = prior.with_hessian(theta)
    ls = np.array(gp.hyperparameters.lengthscale_space)
    # -log Gamma(l_j; 15, b_j) up to a constant, summed over the lengthscales
    assert v1 - v0 == pytest.approx(np.sum(np.array(rates) * ls - 14 * np.log(ls)), rel=1e-12)
    slots = slice(1, 4)  # log lambda, then the three log lengthscales
    assert np.allclose((g1 - g0)[slots], np.array(rates) * ls - 14)
    assert np.allclose(np.diag(h1 - h0)[slots], np.array(rates) * ls)
    steps = np.eye(theta.size) * 1e-6
    numeric = [(prior(theta + e)[0] - prior(theta - e)[0]) / 2e-6 for e in steps]
    assert g1 == pytest.approx(np.array(numeric), rel=1e-6, abs=1e-8)


def test_a_gamma_prior_of_the_wrong_width_or_sign_is_refused_by_the_fit():
    gp = _gp()
    with pytest.raises(ValueError, match="one per spatial lengthscale"):
        NegativeLogMarginalLikelihood(gp, priors={"lengthscale_space": ("gamma", 15.0, (1, 2))})
    with pytest.raises(ValueError, match="one per spatial lengthscale"):
        NegativeLogMarginalLikelihood(gp, priors={"noise": ("gamma", 15.0, (1, 2, 3))})
    with pytest.raises(ValueError, match="must be positive"):
        NegativeLogMarginalLikelihood(gp, priors={"lengthscale_space": ("gamma", 15.0, (1, -2, 3))})


def test_the_option_replaces_the_lengthscale_prior_and_keeps_the_others():
    default = make("gp-ucb", bounds=BOX4).priors()
    assert default["lengthscale_space"][0] != "gamma"
    p = make("gp-ucb", bounds=BOX4, ard=True, lengthscale_prior=[15, [1, 2, 3, 4]])
    priors = p.priors()
    assert priors["lengthscale_space"] == ("gamma", 15.0, (1.0, 2.0, 3.0, 4.0))
    assert priors["noise"] == default["noise"]
    # TV-GP-UCB drops the temporal prior; without hyperpriors the Gamma is the only one
    tv = make("tv-gp-ucb", bounds=BOX4, epsilon=0.03, lengthscale_prior=(15, 2))
    assert set(tv.priors()) == {"lengthscale_space", "noise"}
    alone = make("et-gp-ucb", bounds=BOX4, hyperpriors=False, lengthscale_prior=(15, 2))
    assert alone.priors() == {"lengthscale_space": ("gamma", 15.0, 2.0)}
    assert make("gp-ucb", bounds=BOX4, hyperpriors=False).priors() is None
    # the option round-trips through the serialized shared options
    config = p.options.as_config()
    assert config["lengthscale_prior"] == [15, [1, 2, 3, 4]]
    assert PolicyOptions.parse(type(p), **config).lengthscale_prior == p.options.lengthscale_prior


@pytest.mark.parametrize(
    "options,message",
    [
        ({"lengthscale_prior": (15, [1, 2, 3, 4])}, "needs ard=True"),
        ({"ard": True, "lengthscale_prior": (15, [1, 2, 3])}, "has 3 values"),
        ({"lengthscale_prior": (15, -1)}, r"lengthscale_prior\[1\] must be positive"),
        ({"lengthscale_prior": (1e7, 1)}, r"lengthscale_prior\[0\] must be at most"),
        ({"lengthscale_prior": (15,)}, "a \\(concentration, rate\\) pair"),
        (
            {
                "candidates": [[0.0] * 4, [1.0] * 4],
                "arm_covariance": [[1, 0], [0, 1]],
                "lengthscale_prior": (15, 2),
            },
            "arm_covariance has no spatial lengthscale",
        ),
    ],
)
def test_bad_lengthscale_priors_are_refused_naming_the_option(options, message):
    with pytest.raises(ValueError, match=message):
        make("gp-ucb", bounds=BOX4, **options)


def test_ui_tvbo_takes_the_shared_option_with_its_own_default():
    assert make("ui-tvbo", bounds=BOX4, noise_variance=0.01).lengthscale_prior == (6.0, 10 / 3)
    p = make("ui-tvbo", bounds=BOX4, noise_variance=0.01, lengthscale_prior=(15, [1, 2, 3, 4]))
    assert p.priors() == {"lengthscale_space": ("gamma", 15.0, (1.0, 2.0, 3.0, 4.0))}
    assert (
        make("ui-tvbo", bounds=BOX4, noise_variance=0.01, lengthscale_prior=None).priors() is None
    )


def test_a_tight_prior_holds_the_fitted_lengthscales_at_its_mode():
    rng = np.random.default_rng(0)
    modes = np.array([0.15, 0.6])
    concentration = 1e4
    p = make(
        "gp-ucb",
        bounds=[[0.0, 0.0], [1.0, 1.0]],
        ard=True,
        lengthscale_prior=(concentration, tuple((concentration - 1) / modes)),
        raw_samples=16,
        restarts=1,
    )
    for k in range(12):
        x = rng.uniform(size=2)
        p.observe(x, float(k), float(np.sin(6 * x[0]) + x[1] + 0.05 * rng.standard_normal()))
    p.suggest(12.0)
    fitted = np.array(p.hyperparameters.lengthscale_space)
    assert fitted == pytest.approx(modes, rel=0.02)
