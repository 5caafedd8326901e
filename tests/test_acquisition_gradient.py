"""Closed-form acquisition gradients against autograd and finite differences."""

import math

import numpy as np
import pytest
import torch

from dynbo.acquisition import BoxSearch, UpperConfidenceBound, maximize_on_box
from dynbo.acquisition.optimize import values_and_gradients
from dynbo.kernels import correlation, correlation_and_radial_derivative
from dynbo.models import (
    ArmCovariance,
    Hyperparameters,
    KernelSpec,
    SpatioTemporalGP,
    WeightedRidgeView,
)
from tests.test_gp import make_data

SMOOTH = ("se", "matern32", "matern52")


@pytest.mark.parametrize("family", SMOOTH)
def test_radial_derivative_is_k_prime_over_r(family):
    r = torch.linspace(0.05, 4.0, 40, dtype=torch.float64)
    value, radial = correlation_and_radial_derivative(family, r.clone())
    assert torch.allclose(value, correlation(family, r), rtol=1e-14, atol=0)
    h = 1e-6
    slope = (correlation(family, r + h) - correlation(family, r - h)) / (2 * h)
    assert torch.allclose(radial * r, slope, rtol=1e-7, atol=1e-10)
    # the limit at r = 0: -1 (SE), -3 (Matern-3/2), -5/3 (Matern-5/2)
    _, at_zero = correlation_and_radial_derivative(family, torch.zeros(1, dtype=torch.float64))
    assert float(at_zero) == pytest.approx(
        {"se": -1.0, "matern32": -3.0, "matern52": -5 / 3}[family]
    )


def test_radial_derivative_refuses_matern12():
    with pytest.raises(ValueError, match="Matern-1/2"):
        correlation_and_radial_derivative("matern12", torch.ones(3, dtype=torch.float64))


def fitted(spatial="matern52", temporal="matern32", ard=False, n=25, seed=0):
    kernel = KernelSpec(dim=2, spatial=spatial, temporal=temporal, ard=ard)
    z, y = make_data(n, seed=seed)
    if temporal is None:
        z = z[:, :2]
    hyper = Hyperparameters(
        outputscale=1.3,
        lengthscale_space=(0.15, 0.4) if ard else (0.25,),
        lengthscale_time=None if temporal is None else 6.0,
        noise=0.02,
    )
    gp = SpatioTemporalGP(kernel, hyper)
    gp.set_data(z, y)
    return gp


def autograd_ucb(acq, points):
    x = points.clone().requires_grad_(True)
    values = acq(x)
    (grad,) = torch.autograd.grad(values.sum(), x)
    return values.detach(), grad


def probe_points(gp, m=9, seed=3):
    g = torch.Generator().manual_seed(seed)
    points = torch.rand(m, 2, generator=g, dtype=torch.float64)
    # one point on a training input (r = 0) and one on the box's edge
    points[0] = gp.inputs[4, :2]
    points[1, 0] = 1.0
    return points


@pytest.mark.parametrize("spatial", SMOOTH)
@pytest.mark.parametrize("temporal", [None, "matern32", "matern12", "wiener"])
@pytest.mark.parametrize("ard", [False, True])
def test_ucb_closed_form_equals_autograd(spatial, temporal, ard):
    gp = fitted(spatial, temporal, ard)
    points = probe_points(gp)
    for maximize in (True, False):
        acq = UpperConfidenceBound(gp, 1.7, 31.0, maximize=maximize)
        values, grads = acq.value_and_gradient(points)
        ref_values, ref_grads = autograd_ucb(acq, points)
        assert torch.allclose(values, ref_values, rtol=1e-12, atol=1e-13)
        assert torch.allclose(grads, ref_grads, rtol=1e-9, atol=1e-10)


def test_closed_form_gradient_matches_finite_differences():
    # independent of autograd: central differences of the UCB itself
    gp = fitted("matern52", "matern32", ard=True)
    acq = UpperConfidenceBound(gp, 2.0, 29.0)
    points = probe_points(gp)[1:]
    _, grads = acq.value_and_gradient(points)
    h = 1e-6
    for j in range(2):
        step = torch.zeros(2, dtype=torch.float64)
        step[j] = h
        with torch.no_grad():
            slope = (acq(points + step) - acq(points - step)) / (2 * h)
        assert torch.allclose(grads[:, j], slope, rtol=1e-6, atol=1e-7)


def test_posterior_gradient_moments_equal_predict():
    gp = fitted("se", "matern32")
    z = torch.cat([probe_points(gp), torch.full((9, 1), 31.0, dtype=torch.float64)], 1)
    posterior = gp.posterior_with_gradient(z)
    mean, var = gp.predict(z, standardized=True)
    assert torch.allclose(posterior.mean, mean, rtol=1e-13, atol=1e-14)
    assert torch.allclose(posterior.variance, var, rtol=1e-12, atol=1e-14)
    dense = torch.cholesky_solve(gp.covariance(gp.inputs, z), gp.cholesky_factor)
    assert torch.allclose(posterior.representer, dense, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("temporal", ["matern32", "matern12", "se", "wiener"])
def test_a_known_query_time_gives_the_same_posterior_bit_for_bit(temporal):
    # an acquisition at a given time passes it, and the temporal factor against the
    # data is computed once (GP.temporal_row) instead of per call: the same numbers
    gp = fitted("matern52", temporal)
    z = torch.cat([probe_points(gp), torch.full((9, 1), 31.0, dtype=torch.float64)], 1)
    fresh = gp.posterior_with_gradient(z)
    known = gp.posterior_with_gradient(z, time=31.0)
    for name in ("mean", "variance", "variance_weights", "representer"):
        assert torch.equal(getattr(known, name), getattr(fresh, name)), name
    assert torch.equal(known.cross.value, fresh.cross.value)
    assert torch.equal(known.cross.radial, fresh.cross.radial)
    assert torch.equal(known.gradient(1.0, 0.5), fresh.gradient(1.0, 0.5))
    # the cached row follows the time, the data and the hyperparameters
    row = gp.temporal_row(31.0)
    assert gp.temporal_row(31.0) is row
    assert gp.temporal_row(32.0) is not row

    def reference(time):
        at = torch.cat([gp.inputs[:1, :2], torch.full((1, 1), time, dtype=torch.float64)], 1)
        return gp.kernel.temporal_factor(
            gp.kernel.temporal_argument(at[:, 2], gp.inputs[:, 2])[0]
            / gp.hyperparameters.lengthscale_time
        )

    gp.add(torch.tensor([[0.3, 0.6, 30.0]], dtype=torch.float64), 0.2)
    assert gp.temporal_row(31.0).shape == (gp.n,)
    assert torch.equal(gp.temporal_row(31.0), reference(31.0))
    gp.remove(0)
    assert torch.equal(gp.temporal_row(31.0), reference(31.0))
    gp.set_hyperparameters(
        Hyperparameters(
            outputscale=1.3, lengthscale_space=(0.25,), lengthscale_time=3.0, noise=0.02
        )
    )
    assert torch.equal(gp.temporal_row(31.0), reference(31.0))
    after = gp.posterior_with_gradient(z, time=31.0)
    assert torch.equal(after.mean, gp.posterior_with_gradient(z).mean)


def test_a_gp_without_time_has_no_temporal_row():
    gp = fitted("matern52", None)
    with pytest.raises(ValueError, match="time"):
        gp.temporal_row(1.0)


@pytest.mark.parametrize("width", ["plain", "sandwich"])
def test_ridge_widths_closed_form_equals_autograd(width):
    gp = fitted("matern52", None, n=30)
    weights = torch.pow(0.9, torch.arange(29, -1, -1, dtype=torch.float64))
    gp.set_noise_scale(1.0 / weights)
    view = WeightedRidgeView(gp, width)
    acq = UpperConfidenceBound(view, 2.5)
    points = probe_points(gp)
    values, grads = acq.value_and_gradient(points)
    ref_values, ref_grads = autograd_ucb(acq, points)
    assert torch.allclose(values, ref_values, rtol=1e-12, atol=1e-13)
    assert torch.allclose(grads, ref_grads, rtol=1e-9, atol=1e-10)
    if width == "sandwich":
        plain = UpperConfidenceBound(WeightedRidgeView(gp, "plain"), 2.5)
        assert not torch.allclose(plain.value_and_gradient(points)[0], values)


def test_no_closed_form_where_there_is_none():
    points = torch.rand(4, 2, dtype=torch.float64)
    # Matern-1/2 in space, a given arm covariance, an empty GP, a look-ahead window
    rough = fitted("matern12", "matern32")
    assert UpperConfidenceBound(rough, 1.0, 31.0).value_and_gradient(points) is None
    arms = torch.rand(5, 2, dtype=torch.float64)
    kernel = KernelSpec(dim=2, temporal=None, arms=ArmCovariance(arms, torch.eye(5)))
    gp = SpatioTemporalGP(kernel)
    gp.set_data(arms[:3], torch.tensor([0.1, 0.5, -0.2], dtype=torch.float64))
    assert UpperConfidenceBound(gp, 1.0).value_and_gradient(arms[:2]) is None
    empty = SpatioTemporalGP(KernelSpec(dim=2, temporal=None))
    assert UpperConfidenceBound(empty, 1.0).value_and_gradient(points) is None
    window = UpperConfidenceBound(fitted(), 1.0, time_window=(30.0, 35.0))
    assert window.value_and_gradient(torch.rand(4, 3, dtype=torch.float64)) is None
    # the search then differentiates the call: same numbers as autograd
    acq = UpperConfidenceBound(rough, 1.0, 31.0)
    values, grads = values_and_gradients(acq, points)
    ref_values, ref_grads = autograd_ucb(acq, points)
    assert torch.equal(values, ref_values) and torch.equal(grads, ref_grads)
    # a constant acquisition has zero gradients
    values, grads = values_and_gradients(UpperConfidenceBound(empty, 1.0), points)
    assert torch.equal(grads, torch.zeros_like(points))
    assert torch.allclose(values, torch.ones(4, dtype=torch.float64))


def test_box_search_finds_the_same_maximum_with_either_gradient():
    gp = fitted("matern52", "matern32", n=40)
    acq = UpperConfidenceBound(gp, 1.5, 31.0)

    def autograd_only(points):  # the same function without its closed form
        return acq(points)

    runs = []
    for fn in (acq, autograd_only):
        record = {}
        x, value = maximize_on_box(
            fn,
            2,
            search=BoxSearch(256, 6),
            generator=torch.Generator().manual_seed(4),
            record=record,
        )
        runs.append((x, value, record["evaluations"]))
    (x1, v1, e1), (x2, v2, e2) = runs
    assert torch.allclose(x1, x2, atol=1e-8)
    assert v1 == pytest.approx(v2, rel=1e-12)
    assert abs(e1 - e2) <= 2
    assert math.isfinite(v1) and np.isfinite(x1.numpy()).all()


def test_summed_fallback_search_uses_the_closed_form_too(monkeypatch):
    import dynbo.acquisition.optimize as optimize

    gp = fitted("matern52", None, n=40)
    acq = UpperConfidenceBound(gp, 1.5)
    calls = {"closed": 0}
    closed_form = acq.value_and_gradient

    def counted(points):
        calls["closed"] += 1
        return closed_form(points)

    monkeypatch.setattr(acq, "value_and_gradient", counted)
    monkeypatch.setattr(optimize, "_batched_lbfgs_b", lambda: None)
    x, value = maximize_on_box(
        acq, 2, search=BoxSearch(256, 4), generator=torch.Generator().manual_seed(2)
    )
    assert calls["closed"] > 0
    # a stationary point of the UCB (or on the box's boundary)
    _, grad = autograd_ucb(acq, x.reshape(1, -1))
    inside = (x > 1e-9) & (x < 1 - 1e-9)
    assert float(torch.where(inside, grad[0], 0.0).abs().max()) < 1e-3
    with torch.no_grad():
        assert value == pytest.approx(float(acq(x.reshape(1, -1))), rel=1e-12)
