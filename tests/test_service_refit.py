"""Policy.refit: a fit run ahead of suggest gives the suggestion and state without it."""

import numpy as np
import pytest

from dynbo.policies import make
from tests.test_policy_base import assert_states_equal

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def moving_peak(x, t):
    c = np.array([0.5 + 0.3 * np.sin(t / 10), 0.5])
    return -float(np.sum((np.asarray(x) - c) ** 2))


def without_timings(state):
    state = dict(state)
    diag = state["diagnostics"]
    if diag is not None:
        state["diagnostics"] = {k: v for k, v in diag.items() if not k.endswith("_seconds")}
    return state


def session(name, early, steps=6, **options):
    """Suggest/observe ``steps`` times; with ``early``, refit after every observe."""
    policy = make(
        name,
        bounds=[[0.0, 0.0], [1.0, 2.0]],
        seed=5,
        raw_samples=32,
        restarts=2,
        acquisition_iterations=20,
        fit_iterations=15,
        **options,
    )
    rng = np.random.default_rng(1)
    for i in range(4):
        x = rng.uniform([0, 0], [1, 2])
        policy.observe(x, 0.25 * i, moving_peak(x, 0.25 * i))
    queries, ran = [], []
    for k in range(steps):
        if early:
            ran.append(policy.refit())
        query = policy.suggest(1.0 + k)
        queries.append(query)
        policy.observe(query.x, query.t, moving_peak(query.x, query.t))
    return policy, queries, ran


@pytest.mark.parametrize(
    "name, options",
    [
        ("gp-ucb", {}),
        ("bolt", {"min_response_points": 4, "max_size": 8}),
        ("r-gp-ucb", {"reset_every": 5}),
    ],
)
def test_suggestions_and_state_are_identical_with_and_without_refit(name, options):
    plain, plain_queries, _ = session(name, early=False, **options)
    early, early_queries, ran = session(name, early=True, **options)
    assert any(ran)
    for a, b in zip(plain_queries, early_queries):
        np.testing.assert_array_equal(a.x, b.x)
        assert a.t == b.t
    assert_states_equal(without_timings(plain.state_dict()), without_timings(early.state_dict()))
    # the next suggestion too
    np.testing.assert_array_equal(plain.suggest(100.0).x, early.suggest(100.0).x)


def test_refit_leaves_the_state_unchanged_and_is_reused_only_when_nothing_changed():
    policy, _, _ = session("gp-ucb", early=False, steps=3)
    before = policy.state_dict()
    assert policy.refit()
    assert_states_equal(before, policy.state_dict())
    # reused: suggest runs no fit of its own
    fits = []
    original = policy._fit
    policy._fit = lambda t: fits.append(t) or original(t)
    reused = policy.suggest(50.0)
    assert fits == []
    del policy._fit
    assert policy._early_fit is None
    reference = policy.__class__.from_state_dict(before)
    direct = reference.suggest(50.0)
    np.testing.assert_array_equal(reused.x, direct.x)
    assert_states_equal(
        without_timings(policy.state_dict()), without_timings(reference.state_dict())
    )
    # an observation after the refit makes it stale: suggest fits afresh, same answer
    policy.observe(reused.x, 50.0, moving_peak(reused.x, 50.0))
    reference.observe(direct.x, 50.0, moving_peak(direct.x, 50.0))
    policy.refit()
    policy.observe([0.3, 0.3], 50.5, moving_peak([0.3, 0.3], 50.5))
    reference.observe([0.3, 0.3], 50.5, moving_peak([0.3, 0.3], 50.5))
    np.testing.assert_array_equal(policy.suggest(51.0).x, reference.suggest(51.0).x)
    assert_states_equal(
        without_timings(policy.state_dict()), without_timings(reference.state_dict())
    )


def test_refit_without_learning_or_data_does_nothing():
    policy = make("gp-ucb", bounds=[[0.0], [1.0]], learn_hyperparameters=False)
    policy.observe([0.5], 0.0, 1.0)
    assert not policy.refit()
    assert not make("gp-ucb", bounds=[[0.0], [1.0]]).refit()
