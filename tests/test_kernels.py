import math

import numpy as np
import pytest
import scipy.integrate
import scipy.special
import torch

from dynbo.kernels import (
    Family,
    as_family,
    correlation,
    correlation_np,
    matern_polynomial,
    smoothness,
    spectral_density,
)

MATERNS = [Family.MATERN12, Family.MATERN32, Family.MATERN52]


def matern_bessel(nu, r):
    """Textbook Matern correlation through the modified Bessel function K_nu."""
    r = np.asarray(r, dtype=float)
    z = np.sqrt(2 * nu) * r
    out = np.ones_like(z)
    nz = z > 0
    out[nz] = 2 ** (1 - nu) / scipy.special.gamma(nu) * z[nz] ** nu * scipy.special.kv(nu, z[nz])
    return out


@pytest.mark.parametrize("family", MATERNS)
def test_matern_closed_forms_equal_bessel_definition(family):
    r = np.linspace(0, 6, 61)
    np.testing.assert_allclose(
        correlation_np(family, r), matern_bessel(smoothness(family), r), rtol=1e-12, atol=1e-15
    )


def test_se_and_unit_value_at_zero():
    r = torch.linspace(0, 4, 9)
    np.testing.assert_allclose(correlation("se", r).numpy(), np.exp(-0.5 * r.numpy() ** 2))
    for fam in Family:
        assert float(correlation(fam, torch.zeros(1))) == 1.0


@pytest.mark.parametrize("family", MATERNS)
@pytest.mark.parametrize("lengthscale", [0.3, 2.0])
def test_matern_polynomial_form(family, lengthscale):
    a, coef = matern_polynomial(family, lengthscale)
    tau = np.linspace(0, 5, 41)
    poly = sum(c * tau**m for m, c in enumerate(coef))
    np.testing.assert_allclose(
        np.exp(-a * tau) * poly, correlation_np(family, tau / lengthscale), rtol=1e-13
    )


@pytest.mark.parametrize("family", list(Family))
@pytest.mark.parametrize("lengthscale", [0.5, 3.0])
def test_spectral_density_is_fourier_transform(family, lengthscale):
    # S(s) = 2 int_0^inf k(tau) cos(2 pi s tau) dtau, checked by quadrature.
    for s in [0.0, 0.05, 0.2]:
        val, _ = scipy.integrate.quad(
            lambda u: 2 * correlation_np(family, u / lengthscale) * math.cos(2 * math.pi * s * u),
            0,
            np.inf,
            limit=400,
        )
        assert spectral_density(family, s, lengthscale) == pytest.approx(val, rel=1e-7, abs=1e-10)
    total, _ = scipy.integrate.quad(
        lambda s: spectral_density(family, s, lengthscale), -np.inf, np.inf
    )
    assert total == pytest.approx(1.0, rel=1e-7)


def test_family_parsing():
    assert as_family("Matern-5/2") is Family.MATERN52
    assert as_family("rbf") is Family.SE
    with pytest.raises(ValueError, match="unknown correlation family"):
        as_family("matern72")


def test_correlation_gradient_finite_at_coincident_points():
    from dynbo.models.kernel import KernelSpec

    spec = KernelSpec(dim=2, spatial="matern52", temporal="matern32")
    z = torch.tensor([[0.2, 0.3, 1.0]], requires_grad=True)
    c = spec.correlation(z, z.detach().clone(), torch.tensor([0.5]), 2.0).sum()
    (g,) = torch.autograd.grad(c, z)
    assert torch.isfinite(g).all()


@pytest.mark.parametrize("family", list(Family))
def test_scale_derivative_matches_finite_difference(family):
    from dynbo.kernels import correlation_and_scale_derivative

    r = torch.linspace(0.0, 4.0, 41)
    value, deriv = correlation_and_scale_derivative(family, r)
    np.testing.assert_allclose(value.numpy(), correlation(family, r).numpy(), rtol=1e-14)
    # d/dlog l of k(tau / l) at l = 1, tau = r
    h = 1e-6
    fd = (correlation(family, r * np.exp(-h)) - correlation(family, r * np.exp(h))) / (2 * h)
    np.testing.assert_allclose(deriv.numpy(), fd.numpy(), rtol=1e-7, atol=1e-9)
