"""An interrupted worker pool releases its named semaphores before the interrupt leaves
the harness, so that a process ending at once after it (the CLI's exit on Ctrl-C) leaves
none to multiprocessing's resource tracker ("There appear to be 5 leaked semaphore
objects to clean up at shutdown")."""

from multiprocessing import resource_tracker

import pytest

from dynbo.harness import Protocol, RunSpec
from dynbo.harness.campaign import _run_on_pool

FAST = {"raw_samples": 16, "restarts": 2, "fit_iterations": 10}


def _spec(horizon, seed):
    return RunSpec(
        benchmark="eggholder",
        benchmark_options={"dim": 1, "horizon": horizon, "cost": 0.5},
        policy="gp-ucb",
        policy_options=FAST,
        seed=seed,
        protocol=Protocol(clock="step", warmup=3),
    )


@pytest.mark.slow
def test_an_interrupted_pool_has_released_its_semaphores_when_the_interrupt_leaves(
    monkeypatch,
):
    registered, unregistered = [], []
    register, unregister = resource_tracker.register, resource_tracker.unregister

    def track(name, rtype):
        if rtype == "semaphore":
            registered.append(name)
        register(name, rtype)

    def untrack(name, rtype):
        if rtype == "semaphore":
            unregistered.append(name)
        unregister(name, rtype)

    # the pool's semaphores look these up when they are made and when they are released
    monkeypatch.setattr(resource_tracker, "register", track)
    monkeypatch.setattr(resource_tracker, "unregister", untrack)
    recorded = []

    def record(result, running):
        # Ctrl-C while the campaign waits: the first finished run, then the interrupt
        recorded.append(result.status)
        raise KeyboardInterrupt

    # a run of a few steps and one of minutes, which the interrupt cuts
    with pytest.raises(KeyboardInterrupt):
        _run_on_pool([_spec(3.0, 0), _spec(4000.0, 1)], 2, record)
    assert recorded == ["done"]
    # the call queue's three locks and the result queue's two
    assert len(registered) == 5
    assert sorted(unregistered) == sorted(registered)
