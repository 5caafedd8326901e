import math

import numpy as np
import pytest
import torch
from botorch.acquisition.analytic import UpperConfidenceBound as BoTorchUCB
from botorch.optim import optimize_acqf

from dynbo.acquisition import (
    BoxSearch,
    ConstantBeta,
    DatasetSizeBeta,
    LogTimeBeta,
    UpperConfidenceBound,
    make_beta_schedule,
    maximize_on_box,
    maximize_on_candidates,
)
from dynbo.models import Hyperparameters, KernelSpec, SpatioTemporalGP
from dynbo.models.botorch import BoTorchGP
from tests.test_gp import make_data


def known_surface(x):
    """Multimodal surface on [0,1]^2 with its global max 1 at (0.73, 0.21)."""
    c = torch.tensor([0.73, 0.21], dtype=x.dtype)
    r2 = ((x - c) ** 2).sum(-1)
    bump = 0.6 * torch.exp(-((x - torch.tensor([0.2, 0.8], dtype=x.dtype)) ** 2).sum(-1) / 0.01)
    return (
        torch.exp(-r2 / 0.02)
        + bump * (1 - torch.exp(-r2 / 0.02))
        + 0.02 * torch.cos(12 * x[..., 0]) * r2
    )


def test_box_maximizer_finds_known_maximum():
    g = torch.Generator().manual_seed(3)
    x, value = maximize_on_box(known_surface, 2, search=BoxSearch(256, 8), generator=g)
    assert value == pytest.approx(1.0, abs=1e-4)
    assert torch.allclose(x, torch.tensor([0.73, 0.21]), atol=1e-3)


def test_box_maximizer_handles_maximum_on_the_boundary():
    def slope(x):
        return x[..., 0] - (x[..., 1] - 0.4) ** 2

    x, value = maximize_on_box(slope, 2, generator=torch.Generator().manual_seed(0))
    assert value == pytest.approx(1.0, abs=1e-6)
    assert x[0] == 1.0 and x[1] == pytest.approx(0.4, abs=1e-4)


def test_candidate_maximizer_is_exact():
    cand = torch.rand(5000, 2)
    index, value = maximize_on_candidates(known_surface, cand, chunk=333)
    vals = known_surface(cand)
    assert index == int(torch.argmax(vals)) and value == float(vals.max())


def test_beta_schedules():
    assert DatasetSizeBeta()(n=10, iteration=1, dim=3) == pytest.approx(0.2 * 3 * math.log(20))
    assert LogTimeBeta(0.8, 0.4)(n=0, iteration=1, dim=2) == 0.0  # clamped
    assert LogTimeBeta(0.8, 4)(n=0, iteration=5, dim=2) == pytest.approx(0.8 * math.log(20))
    assert make_beta_schedule(2.0) == ConstantBeta(2.0)
    assert make_beta_schedule({"kind": "log_time", "c1": 0.4, "c2": 4}) == LogTimeBeta(0.4, 4.0)
    with pytest.raises(ValueError, match="unknown beta schedule"):
        make_beta_schedule("ucb-magic")
    with pytest.raises(ValueError, match=">= 0"):
        make_beta_schedule({"kind": "constant", "value": -1})


def fitted_gp():
    z, y = make_data(40)
    gp = SpatioTemporalGP(KernelSpec(dim=2), Hyperparameters(1.1, (0.3,), 6.0, 0.02))
    gp.set_data(z, y)
    return gp


def test_botorch_ucb_agrees_with_policy_acquisition():
    gp = fitted_gp()
    t, beta = 31.0, 2.7
    ours = UpperConfidenceBound(gp, math.sqrt(beta), t)
    theirs = BoTorchUCB(BoTorchGP(gp), beta=beta)
    x = torch.rand(64, 2)
    with torch.no_grad():
        a = ours(x)
        b = theirs(ours.inputs(x).unsqueeze(-2))
    # BoTorch works in original units: target_mean + target_scale * (our value).
    np.testing.assert_allclose(
        b.numpy(), (gp.target_mean + gp.target_scale * a).numpy(), rtol=1e-10
    )


def test_optimize_acqf_on_the_botorch_view_agrees_with_our_maximizer():
    gp = fitted_gp()
    t, beta = 31.0, 2.0
    ours = UpperConfidenceBound(gp, math.sqrt(beta), t)
    x_ours, v_ours = maximize_on_box(
        ours, 2, search=BoxSearch(512, 10), generator=torch.Generator().manual_seed(0)
    )
    bounds = torch.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, 100.0]])
    cand, val = optimize_acqf(
        BoTorchUCB(BoTorchGP(gp), beta=beta),
        bounds,
        q=1,
        num_restarts=10,
        raw_samples=512,
        fixed_features={2: t},
    )
    assert float(cand[0, 2]) == t
    v_theirs = (float(val) - gp.target_mean) / gp.target_scale
    assert v_ours >= v_theirs - 1e-6


def test_botorch_posterior_observation_noise_and_joint_covariance():
    gp = fitted_gp()
    x = torch.cat([torch.rand(3, 2), torch.full((3, 1), 31.0)], 1)
    post = BoTorchGP(gp).posterior(x)
    noisy = BoTorchGP(gp).posterior(x, observation_noise=True)
    assert post.mean.shape == (3, 1)
    np.testing.assert_allclose(
        (noisy.variance - post.variance).numpy().ravel(),
        np.full(3, gp.hyperparameters.noise * gp.target_scale**2),
        rtol=1e-10,
    )
    _, cov = gp.predict(x, full_covariance=True)
    np.testing.assert_allclose(post.distribution.covariance_matrix.numpy(), cov.numpy())


def test_each_start_is_its_own_l_bfgs_b_problem(monkeypatch):
    # starts of very different curvature: one shared L-BFGS-B on their sum must run until
    # the slowest converges with one curvature model; per-start problems stop separately
    import dynbo.acquisition.optimize as optimize

    scales = torch.tensor([1.0, 40.0, 400.0], dtype=torch.float64)

    def bumps(x):
        # a sharp and a broad local maximum per coordinate
        return -(scales[: x.shape[-1]] * (x - 0.3) ** 2).sum(-1) + 0.2 * torch.sin(9 * x).sum(-1)

    def run(per_start):
        if not per_start:
            monkeypatch.setattr(optimize, "_batched_lbfgs_b", lambda: None)
        else:
            monkeypatch.undo()
        record = {}
        x, value = maximize_on_box(
            bumps,
            3,
            search=BoxSearch(64, 8),
            generator=torch.Generator().manual_seed(1),
            record=record,
        )
        return x, value, record

    x_sum, v_sum, r_sum = run(per_start=False)
    x_per, v_per, r_per = run(per_start=True)
    assert v_per == pytest.approx(v_sum, abs=1e-7)
    assert torch.allclose(x_per, x_sum, atol=1e-4)
    assert r_per["evaluations"] < r_sum["evaluations"]
    # the per-start answer is a stationary point: the gradient vanishes (inside the box)
    point = x_per.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(bumps(point.reshape(1, -1)).sum(), point)
    assert float(grad.abs().max()) < 1e-4
