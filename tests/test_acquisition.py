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


def test_trailing_start_stops_exactly_when_its_pace_cannot_reach_the_best():
    """The pruning rule on hand-set numbers: ``v_j + (T - j) * pace < v_best``, T = 10."""
    from types import SimpleNamespace

    from dynbo.acquisition.optimize import PRUNE_WINDOW, TrailingStarts

    assert PRUNE_WINDOW == 3
    trailing = TrailingStarts(starts=3, max_iterations=10, best_value=1.0)
    corners = [np.array([0.1, 0.1]), np.array([0.5, 0.5]), np.array([0.9, 0.2])]
    # first evaluation of every start (iteration 0; negated values, as L-BFGS-B minimizes)
    trailing.evaluated(np.stack(corners), np.array([-0.5, -0.1, -0.9]), [0, 1, 2])
    moves = [0, 0, 0]

    def step(i, value):
        moves[i] += 1
        point = corners[i] + 0.001 * moves[i]
        trailing.evaluated(point[None, :], np.array([-value]), [i])
        trailing.iteration(SimpleNamespace(x=point.copy(), fun=-value))

    # start 0 creeps (0.5, 0.51, 0.52, ...): not judged before 3 iterations, stopped at
    # the 3rd, where 0.53 + 7 * 0.01 = 0.60 < 1
    step(0, 0.51)
    step(0, 0.52)
    assert not trailing.pruned
    with pytest.raises(StopIteration):
        step(0, 0.53)
    assert trailing.pruned == {0} and trailing.values[0] == [0.5, 0.51, 0.52, 0.53]
    # start 1: 0.1, 0.15, 0.25, 0.35: pace 0.1 and 7 iterations left reach 1.05 >= 1 (with 6
    # left it would be 0.95: it goes on only if the count of iterations left is right)
    for value in (0.15, 0.25, 0.35):
        step(1, value)
    assert trailing.pruned == {0}
    # then 0.36: pace still 0.1, 0.36 + 6 * 0.1 = 0.96 < 1 (with 7 left, 1.06: not stopped)
    with pytest.raises(StopIteration):
        step(1, 0.36)
    assert trailing.pruned == {0, 1}
    # start 2 leads once it passes the best raw value, and the best start never stops,
    # however slowly it moves: 1.5, 1.5001, 1.5002, ...
    for k in range(6):
        step(2, 1.5 + 1e-4 * k)
    assert trailing.best_value == pytest.approx(1.5005) and trailing.pruned == {0, 1}
    # a point no start evaluated identifies nothing and prunes nothing
    trailing.iteration(SimpleNamespace(x=np.array([0.3, 0.3]), fun=-0.1))
    assert trailing.pruned == {0, 1}


def test_an_iteration_at_a_point_two_starts_evaluated_is_not_attributed():
    """Two starts evaluated at one box corner: the accepted iteration could be either's."""
    from types import SimpleNamespace

    from dynbo.acquisition.optimize import TrailingStarts

    trailing = TrailingStarts(starts=2, max_iterations=10, best_value=5.0)
    trailing.evaluated(np.array([[0.2, 0.2], [0.7, 0.7]]), np.array([-0.1, -0.2]), [0, 1])
    corner = np.array([1.0, 1.0])
    trailing.evaluated(np.stack([corner, corner]), np.array([-0.3, -0.3]), [0, 1])
    for _ in range(4):  # far below the best, but neither start can be told from the other
        trailing.iteration(SimpleNamespace(x=corner.copy(), fun=-0.3))
    assert trailing.values == [[0.1], [0.2]] and not trailing.pruned
    # once one of them moves on, the other is the only one at the corner
    trailing.evaluated(np.array([[0.9, 0.95]]), np.array([-0.25]), [1])
    trailing.iteration(SimpleNamespace(x=corner.copy(), fun=-0.3))
    assert trailing.values == [[0.1, 0.3], [0.2]]


def test_pruning_trailing_starts_keeps_the_maximum_and_saves_calls():
    """A narrow peak (max 3.1105) and Rosenbrock's curved valley (max 0), which L-BFGS-B
    climbs slowly: the starts in the valley stop early, the peak's start does not."""

    def peak_and_valley(x):
        u, v = 4 * x[..., 0] - 2, 4 * x[..., 1] - 1
        rosenbrock = (1 - u) ** 2 + 100 * (v - u * u) ** 2
        peak = 10 * torch.exp(-((x - torch.tensor([0.9, 0.1], dtype=x.dtype)) ** 2).sum(-1) / 0.01)
        return peak - torch.log1p(rosenbrock)

    def run(prune, seed):
        record = {}
        x, value = maximize_on_box(
            peak_and_valley,
            2,
            search=BoxSearch(256, 8, prune_trailing=prune),
            generator=torch.Generator().manual_seed(seed),
            record=record,
        )
        return x, value, record["evaluations"]

    for seed in range(3):
        x_full, v_full, calls_full = run(False, seed)
        x_pruned, v_pruned, calls_pruned = run(True, seed)
        assert v_full == pytest.approx(3.1104816555, abs=1e-9)
        assert torch.equal(x_pruned, x_full) and v_pruned == v_full
        assert calls_pruned < calls_full


def test_box_search_checks_prune_trailing():
    with pytest.raises(ValueError, match="prune_trailing"):
        BoxSearch(prune_trailing="yes")


def test_raw_batches_shrink_with_the_dataset_so_that_their_matrices_stay_bounded():
    from dynbo.acquisition.optimize import (
        RAW_BATCH_ENTRIES,
        RAW_CHUNK,
        BoxSearch,
        maximize_on_box,
        raw_batch_size,
    )

    assert raw_batch_size(0) == raw_batch_size(1000) == RAW_CHUNK
    assert raw_batch_size(4096) == RAW_BATCH_ENTRIES // 4096 == 2048
    assert raw_batch_size(10**9) == 64
    sizes = []

    class Acquisition:
        raw_batch = 1000

        def __call__(self, x):
            sizes.append(len(x))
            return -((x - 0.5) ** 2).sum(-1)

    maximize_on_box(
        Acquisition(),
        2,
        search=BoxSearch(raw_samples=2500, restarts=1, max_iterations=1),
        generator=torch.Generator().manual_seed(0),
    )
    # the raw sample in batches of 1000 (a Sobol draw of 2500 points), then the search
    assert sizes[:3] == [1000, 1000, 500]
