"""Cooperative deadlines (dynbo.deadline): where the inner loops stop, by how much a
budget can be overrun, and that an interrupted suggest leaves the policy as it was."""

import threading

import numpy as np
import pytest
import torch

from dynbo import deadline
from dynbo.acquisition.optimize import BoxSearch, maximize_on_box, maximize_on_candidates
from dynbo.deadline import Cancelled, Deadline, DeadlineExceeded, within
from dynbo.models import SpatioTemporalGP
from dynbo.models.fit import fit_hyperparameters
from dynbo.models.kernel import DIFFERENCE_CHUNK_ELEMENTS, KernelSpec, _squared_distance
from dynbo.policies import make
from tests.test_service_manager import assert_states_equal


class Ticks:
    """A clock that advances only when told (one tick per unit of work)."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def cancelled():
    event = threading.Event()
    event.set()
    return Deadline(cancel=event)


def test_check_is_a_no_op_without_a_deadline_and_the_deadline_is_scoped():
    deadline.check("anything")
    with within(cancelled()):
        with pytest.raises(Cancelled, match="cancelled in the loop"):
            deadline.check("loop")
        with within(None):  # a nested scope without a deadline (a replay from the log)
            deadline.check("loop")
    deadline.check("anything")


def test_a_deadline_needs_a_positive_budget():
    for bad in (0, -1.0):
        with pytest.raises(ValueError, match="positive number of seconds"):
            Deadline(bad)


def test_the_budget_is_overrun_by_at_most_one_acquisition_batch():
    clock = Ticks()
    calls = []

    def acquisition(x):
        calls.append(len(x))
        clock.now += 1.0  # each batch costs one "second"
        return -((x - 0.3) ** 2).sum(-1)

    search = BoxSearch(raw_samples=64, restarts=4, max_iterations=100)
    with within(Deadline(3.5, clock=clock)):
        with pytest.raises(DeadlineExceeded) as info:
            maximize_on_box(
                acquisition, 2, search=search, generator=torch.Generator().manual_seed(0)
            )
    # batches started at t = 0, 1, 2, 3 (each under the budget when it started); the
    # check before the fifth saw t = 4 > 3.5 and stopped
    assert len(calls) == 4
    assert info.value.where == "acquisition search" and info.value.elapsed == 4.0
    assert "over the time budget of 3.5 s" in str(info.value)


def test_candidate_search_and_the_raw_sample_chunks_stop_at_a_cancellation():
    values = lambda x: x.sum(-1)  # noqa: E731
    with within(cancelled()):
        with pytest.raises(Cancelled):
            maximize_on_candidates(values, torch.rand(10, 2, dtype=torch.float64))
        with pytest.raises(Cancelled):
            maximize_on_box(values, 2, generator=torch.Generator().manual_seed(0))


def test_the_fit_stops_after_the_likelihood_evaluation_that_passed_the_budget():
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(20, 2, generator=gen, dtype=torch.float64)
    t = torch.arange(20, dtype=torch.float64)
    y = torch.sin(6 * x[:, 0]) + 0.01 * t
    gp = SpatioTemporalGP(KernelSpec(dim=2))
    gp.set_data(torch.cat([x, t[:, None]], dim=1), y)
    clock = Ticks()
    evaluations = []
    import dynbo.models.fit as fit_module

    original = fit_module.NegativeLogMarginalLikelihood._evaluate

    def counted(self, theta):
        evaluations.append(1)
        clock.now += 1.0
        return original(self, theta)

    fit_module.NegativeLogMarginalLikelihood._evaluate = counted
    try:
        with within(Deadline(2.5, clock=clock)):
            with pytest.raises(DeadlineExceeded, match="hyperparameter fit"):
                fit_hyperparameters(gp, max_iterations=50)
    finally:
        fit_module.NegativeLogMarginalLikelihood._evaluate = original
    assert len(evaluations) == 3  # at t = 0, 1, 2; stopped before the fourth (t = 3)


@pytest.mark.parametrize("name", ["gp-ucb", "wdbo"])
def test_an_interrupted_suggest_leaves_the_policy_as_it_was(name):
    options = dict(bounds=[[0.0, 0.0], [1.0, 1.0]], seed=3, raw_samples=64, restarts=2)
    twin, policy = make(name, **options), make(name, **options)
    rng = np.random.default_rng(0)
    for k in range(8):
        x, y = rng.random(2), float(rng.normal())
        for p in (twin, policy):
            p.observe(x, float(k), y)
    before = policy.state_dict()
    with within(cancelled()):
        with pytest.raises(Cancelled):
            policy.suggest(8.0)
    assert_states_equal(before, policy.state_dict())
    # and it goes on exactly as an uninterrupted twin
    np.testing.assert_array_equal(policy.suggest(8.0).x, twin.suggest(8.0).x)


def test_squared_distances_in_chunks_are_the_same_numbers():
    gen = torch.Generator().manual_seed(2)
    d = 16
    rows = DIFFERENCE_CHUNK_ELEMENTS // (50 * d) * 3 + 7  # three and a bit chunks
    a = torch.rand(rows, d, generator=gen, dtype=torch.float64)
    b = torch.rand(50, d, generator=gen, dtype=torch.float64)
    diff = a[:, None, :] - b[None, :, :]
    assert torch.equal(_squared_distance(a, b), (diff * diff).sum(-1))
    # with batch dimensions too
    a2, b2 = a[None].expand(2, -1, -1), b[None].expand(2, -1, -1)
    assert torch.equal(_squared_distance(a2, b2)[1], (diff * diff).sum(-1))
