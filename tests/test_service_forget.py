"""Retraction: Policy.forget removes one kept observation exactly, and the service's
DELETE /studies/{name}/observations/{seq} logs it so that no replay brings it back."""

import numpy as np
import pytest
import torch

from dynbo.client import Client, ServiceError
from dynbo.policies import make
from tests.test_service_http import CHEAP, ServerProcess
from tests.test_service_manager import assert_states_equal

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

BOUNDS = [[0.0, 0.0], [1.0, 1.0]]


def observations(n, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.random(2), float(k), float(np.sin(4 * rng.random()))) for k in range(n)]


@pytest.mark.parametrize("name", ["gp-ucb", "wdbo", "bolt"])
def test_a_forgotten_observation_leaves_the_posterior_of_never_having_made_it(name):
    options = dict(bounds=BOUNDS, seed=1, learn_hyperparameters=False)
    forgetting, never = make(name, **options), make(name, **options)
    data = observations(12)
    for k, (x, t, y) in enumerate(data):
        forgetting.observe(x, t, y)
        if k != 5:
            never.observe(x, t, y)
    x, t, y = data[5]
    forgetting.forget(x, t, y)
    assert forgetting.dataset_size == never.dataset_size == 11
    np.testing.assert_array_equal(forgetting.dataset.x, never.dataset.x)
    inputs = torch.rand(20, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    inputs[:, 2] = 12.0  # a time column where the kernel has one
    inputs = inputs[:, : forgetting.model.kernel.input_dim]
    for a, b in zip(forgetting.model.predict(inputs), never.model.predict(inputs)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_forgetting_what_is_not_kept_is_refused_and_changes_nothing():
    policy = make("gp-ucb", bounds=BOUNDS, seed=1)
    data = observations(5)
    for x, t, y in data:
        policy.observe(x, t, y)
    before = policy.state_dict()
    x, t, y = data[2]
    for args in ((x, t + 1.0, y), (x + 0.1, t, y), (x, t, y + 1.0)):
        with pytest.raises(ValueError, match="no kept observation"):
            policy.forget(*args)
    with pytest.raises(ValueError):
        policy.forget([2.0, 0.5], t)  # outside the bounds
    assert_states_equal(before, policy.state_dict())


def test_the_manager_logs_a_forget_and_refuses_what_it_cannot_forget(tmp_path):
    from dynbo.service import ServiceStore, StudyManager

    manager = StudyManager(ServiceStore(tmp_path / "s.sqlite"), refit=False)
    try:
        manager.create("a", "gp-ucb", BOUNDS, options=CHEAP, clock="client")
        seqs = [manager.observe("a", y, x=list(x), t=t)["seq"] for x, t, y in observations(4)]
        query = manager.suggest("a", 4.0)
        first = manager.forget("a", seqs[1], "sensor glitch")
        assert first["forgets"] == seqs[1] and first["reason"] == "sensor glitch"
        assert first["dataset_size"] == 3 and not first["repeated"]
        again = manager.forget("a", seqs[1], "retry")
        assert again == {**first, "repeated": True}
        history = manager.history("a")
        assert [e.kind for e in history] == ["observe"] * 4 + ["suggest", "forget"]
        assert history[-1].forgets == seqs[1] and history[-1].reason == "sensor glitch"
        for bad, status in ((99, 404), (seqs[-1] + 1, 404), (0, 422), ("1", 422)):
            with pytest.raises(Exception) as info:
                manager.forget("a", bad)
            assert info.value.status == status
        assert query["query_id"] == manager.suggest("a", 4.0)["query_id"]  # still pending
        info = manager.info("a")
        assert info["forgotten"] == 1 and info["dataset_size"] == 3
        assert manager.studies()[0]["forgotten"] == 1
    finally:
        manager.store.close()


def test_a_window_that_dropped_the_observation_makes_its_forget_a_409(tmp_path):
    from dynbo.service import ServiceStore, StudyManager

    manager = StudyManager(ServiceStore(tmp_path / "s.sqlite"), refit=False)
    try:
        manager.create("w", "sw-gp-ucb", BOUNDS, options={**CHEAP, "window": 2}, clock="client")
        seqs = [manager.observe("w", y, x=list(x), t=t)["seq"] for x, t, y in observations(4)]
        manager.suggest("w", 4.0)  # the window keeps the last two
        with pytest.raises(Exception, match="removed it already") as info:
            manager.forget("w", seqs[0])
        assert info.value.status == 409
        assert [e.kind for e in manager.history("w")][-1] == "suggest"
    finally:
        manager.store.close()


@pytest.mark.parametrize("checkpoint_every", [1, 100])
def test_a_forget_survives_kill_9_and_the_replay(tmp_path, checkpoint_every):
    store = tmp_path / "s.sqlite"
    args = ("--checkpoint-every", str(checkpoint_every), "--no-refit")
    with open(tmp_path / "log", "wb") as log:
        server = ServerProcess(store, *args, log=log).wait_ready()
        try:
            client = Client(server.url, retries=0)
            client.create_study("a", "gp-ucb", BOUNDS, options=CHEAP, clock="client")
            data = observations(6)
            seqs = [client.observe("a", y, x=list(x), t=t)["seq"] for x, t, y in data]
            answer = client.forget("a", seqs[2], reason="wrong unit")
            kept = client.study("a")["dataset_size"]
        finally:
            server.proc.kill()  # SIGKILL right after the acknowledged forget
            server.proc.wait()
        server = ServerProcess(store, *args, log=log).wait_ready()
        try:
            client = Client(server.url, retries=0)
            study = client.study("a")
            assert study["dataset_size"] == kept == 5 and study["replay_mismatches"] == 0
            assert study["forgotten"] == 1
            dataset = client._request("GET", "/studies/a/dataset")
            forgotten = np.asarray(data[2][0])
            assert not any(np.allclose(row, forgotten) for row in dataset["x"])
            events = client.history("a")
            assert events[-1]["kind"] == "forget" and events[-1]["reason"] == "wrong unit"
            assert client.forget("a", seqs[2]) == {**answer, "repeated": True}
            csv = client.history("a", format="csv").splitlines()
            assert csv[0].endswith("forgets,reason,constraints")
            assert csv[-1].endswith(f"{seqs[2]},wrong unit,")
            with pytest.raises(ServiceError) as info:
                client.forget("a", 999)
            assert info.value.status == 404
        finally:
            server.stop()
