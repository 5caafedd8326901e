"""Queries out but not answered (GP-BUCB's hallucinated observations): a batch's queries
differ, the hallucinated GP keeps the mean and shrinks the variance, and the answers,
in any order, leave the state of sequential observes of the same points."""

import numpy as np
import pytest
import torch

from dynbo.acquisition.pending import hallucinate
from dynbo.models import Hyperparameters, KernelSpec, SpatioTemporalGP
from dynbo.policies import make
from tests.test_service_manager import assert_states_equal

BOUNDS = [[0.0, 0.0], [1.0, 1.0]]


def filled(name, n=10, **options):
    policy = make(name, bounds=BOUNDS, seed=4, raw_samples=128, **options)
    rng = np.random.default_rng(5)
    for k in range(n):
        policy.observe(rng.random(2), float(k), float(np.sin(3 * rng.random())))
    return policy


def test_hallucinated_observations_keep_the_mean_and_shrink_the_variance():
    g = torch.Generator().manual_seed(0)
    inputs = torch.rand(12, 3, generator=g, dtype=torch.float64)
    gp = SpatioTemporalGP(KernelSpec(dim=2, temporal="se"))
    gp.set_data(inputs, torch.sin(4 * inputs[:, 0]))
    gp.set_hyperparameters(
        Hyperparameters(outputscale=1.0, lengthscale_space=(0.3,), lengthscale_time=1.0, noise=0.01)
    )
    before = gp.state_dict()
    pending = torch.rand(3, 3, generator=g, dtype=torch.float64)
    fantasy = hallucinate(gp, pending)
    test = torch.cat([torch.rand(20, 3, generator=g, dtype=torch.float64), pending])
    mean, variance = gp.predict(test)
    mean_h, variance_h = fantasy.predict(test)
    torch.testing.assert_close(mean_h, mean, rtol=1e-9, atol=1e-10)
    assert torch.all(variance_h <= variance + 1e-12)
    assert torch.all(variance_h[-3:] < 0.1 * variance[-3:])  # at the pending points
    assert_states_equal(before, gp.state_dict())  # the policy's own GP is untouched
    assert hallucinate(gp, pending[:0]) is gp


@pytest.mark.parametrize("name", ["gp-ucb", "wdbo", "st-gp-ucb"])
def test_a_batch_of_queries_differs_and_its_answers_in_any_order_equal_sequential_observes(name):
    policy = filled(name, learn_hyperparameters=False)
    queries = policy.suggest_batch(10.0, 4)
    points = np.array([q.x for q in queries])
    distances = np.linalg.norm(points[:, None] - points[None], axis=-1)
    assert distances[np.triu_indices(4, 1)].min() > 1e-3
    assert len(policy.pending) == 4
    assert policy.diagnostics.extra["pending"] == 3  # the fourth accounted for three
    answers = [(q.x, q.t, float(np.cos(q.x.sum()))) for q in queries]
    for x, t, y in (answers[i] for i in (2, 0, 3, 1)):
        policy.observe(x, t, y)
    assert policy.pending == []
    sequential = filled(name, learn_hyperparameters=False)
    for x, t, y in (answers[i] for i in (2, 0, 3, 1)):
        sequential.observe(x, t, y)
    for field in ("x", "t", "y"):
        np.testing.assert_array_equal(
            getattr(policy.dataset, field), getattr(sequential.dataset, field)
        )
    # the posterior, once both standardize the same data (each suggest does)
    policy._restandardize()
    sequential._restandardize()
    g = torch.Generator().manual_seed(1)
    test = torch.rand(10, policy.model.kernel.input_dim, generator=g, dtype=torch.float64)
    for a, b in zip(policy.model.predict(test), sequential.model.predict(test)):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


def test_pending_queries_can_be_cancelled_and_are_saved_with_the_state():
    policy = filled("gp-ucb")
    first, second = policy.suggest_batch(10.0, 2)
    state = policy.state_dict()
    restored = make("gp-ucb", bounds=BOUNDS, seed=4, raw_samples=128)
    restored.load_state_dict(state)
    assert [t for _, t in restored.pending] == [10.0, 10.0]
    np.testing.assert_array_equal(restored.pending[1][0], second.x)
    assert policy.cancel_pending(first.x) == 1 and len(policy.pending) == 1
    assert policy.cancel_pending([0.123, 0.456]) == 0
    assert policy.cancel_pending() == 1 and policy.pending == []
    # an old state without the key loads with nothing pending
    restored.load_state_dict({k: v for k, v in state.items() if k != "pending"})
    assert restored.pending == []
    for bad in (0, 65, 1.5, True):
        with pytest.raises(ValueError, match="q must be"):
            policy.suggest_batch(11.0, bad)


def test_a_model_without_hallucination_ignores_pending_queries():
    # W-GP-UCB's weighted kernel-ridge view has no "observation without a value"
    policy = filled("w-gp-ucb")
    policy.suggest_batch(10.0, 2)
    assert "pending" not in policy.diagnostics.extra
    assert len(policy.pending) == 2


def test_a_failing_batch_leaves_the_policy_as_it_was(monkeypatch):
    policy = filled("gp-ucb")
    before = policy.state_dict()
    calls = []
    original = type(policy)._acquire

    def fails_third(self, t, diag):
        calls.append(t)
        if len(calls) == 3:
            raise RuntimeError("broken on purpose")
        return original(self, t, diag)

    monkeypatch.setattr(type(policy), "_acquire", fails_third)
    with pytest.raises(RuntimeError, match="broken on purpose"):
        policy.suggest_batch(10.0, 4)
    assert_states_equal(before, policy.state_dict())
    assert policy.pending == []


def test_a_float32_policy_matches_its_answers_and_forgets_what_it_rounded():
    """It keeps x rounded to float32: a retraction with the float64 point it was told
    (as the service logs it) must still find the observation, and an answer at a
    pending query's point clears it."""
    policy = filled("gp-ucb", dtype="float32")
    query = policy.suggest(10.0)
    policy.observe(query.x, query.t, 0.5)
    assert policy.pending == []
    told = [0.123456789012, 0.987654321098]  # not float32 numbers
    policy.observe(told, 11.0, 0.25)
    policy.forget(told, 11.0, 0.25)
    assert policy.dataset_size == 11
