"""The health monitor (dynbo.policies.health) on hand-made cases, and the GP's
leave-one-out prediction it tests changes with, against a GP without the point."""

import numpy as np
import pytest
import torch

from dynbo.models import Hyperparameters, KernelSpec, SpatioTemporalGP
from dynbo.policies import make
from tests.test_service_manager import assert_states_equal

BOUNDS = [[0.0, 0.0], [1.0, 1.0]]


def kinds(policy):
    return [e["kind"] for e in policy.diagnostics.extra.get("health", [])]


def test_leave_one_out_is_the_prediction_of_a_gp_without_the_point():
    g = torch.Generator().manual_seed(0)
    inputs = torch.rand(15, 3, generator=g, dtype=torch.float64)
    targets = torch.sin(5 * inputs[:, 0]) + inputs[:, 2]
    h = Hyperparameters(outputscale=1.3, lengthscale_space=(0.3,), lengthscale_time=0.5, noise=0.02)
    full = SpatioTemporalGP(KernelSpec(dim=2, temporal="se"))
    full.set_data(inputs, targets)
    full.set_hyperparameters(h)
    for i in (0, 7, 14):
        mean, variance = full.leave_one_out(i)
        keep = torch.arange(15) != i
        held_out = SpatioTemporalGP(KernelSpec(dim=2, temporal="se"))
        held_out.set_data(inputs[keep], targets[keep])
        # the same standardization as the full GP's (the hyperparameters' units)
        held_out._target_mean, held_out._target_scale = full.target_mean, full.target_scale
        held_out.set_hyperparameters(h)
        m, v = held_out.predict(inputs[i : i + 1])
        assert mean == pytest.approx(float(m), rel=1e-10, abs=1e-12)
        assert variance == pytest.approx(float(v), rel=1e-9, abs=1e-12)
    with pytest.raises(ValueError, match="index"):
        full.leave_one_out(15)


def test_a_forced_tiny_temporal_lengthscale_is_reported():
    policy = make(
        "st-gp-ucb",
        bounds=BOUNDS,
        seed=0,
        learn_hyperparameters=False,
        initial_hyperparameters={"lengthscale_time": 0.01},
        raw_samples=32,
    )
    rng = np.random.default_rng(0)
    for k in range(6):  # one observation per time unit
        policy.observe(rng.random(2), float(k), float(rng.normal()))
    policy.suggest(6.0)
    events = {e["kind"]: e for e in policy.diagnostics.extra["health"]}
    assert events["short_lengthscale"]["lengthscale_time"] == pytest.approx(0.01)
    assert events["short_lengthscale"]["sampling_interval"] == pytest.approx(1.0)


def test_a_step_change_of_the_function_is_reported_and_nothing_is_reset():
    policy = make("gp-ucb", bounds=BOUNDS, seed=0, raw_samples=64)
    fired = []
    for k in range(25):
        query = policy.suggest(float(k))
        if "change" in kinds(policy):
            fired.append(k)
        jump = 3.0 if k >= 15 else 0.0
        policy.observe(query.x, query.t, float(-np.sum((query.x - 0.5) ** 2)) + jump)
        if k >= 15:
            assert policy.dataset_size == k + 1  # a monitor: the data stay
    assert fired and fired[0] == 16  # the first observation after the step, tested next


def test_a_dataset_held_at_its_minimum_is_reported_every_streak_iterations():
    policy = make("sw-gp-ucb", bounds=BOUNDS, seed=0, window=1, raw_samples=32)
    rng = np.random.default_rng(2)
    reported = []
    for k in range(12):
        policy.suggest(float(k))
        if "dataset_at_minimum" in kinds(policy):
            reported.append(k)
        policy.observe(rng.random(2), float(k), float(rng.normal()))
    # the window keeps one observation from the second iteration on
    assert reported == [5, 10]


def test_the_monitor_state_is_saved_and_an_old_state_without_it_loads():
    policy = make("gp-ucb", bounds=BOUNDS, seed=0, raw_samples=32)
    rng = np.random.default_rng(3)
    for k in range(8):
        policy.observe(rng.random(2), float(k), float(rng.normal()))
        policy.suggest(float(k) + 0.5)
    state = policy.state_dict()
    assert state["health"]["tested"] >= 1
    restored = make("gp-ucb", bounds=BOUNDS, seed=0, raw_samples=32)
    restored.load_state_dict(state)
    assert_states_equal(state, restored.state_dict())
    old = {k: v for k, v in state.items() if k != "health"}
    restored.load_state_dict(old)
    assert restored.state_dict()["health"]["tested"] == 0


@pytest.fixture
def browser(request):
    """``headless_chromium`` where it is available (``None`` otherwise)."""
    try:
        return request.getfixturevalue("headless_chromium")
    except pytest.skip.Exception:
        return None


def test_health_alarms_reach_a_server_sent_event_client_and_the_dashboard(tmp_path, browser):
    import json
    import urllib.request

    pytest.importorskip("fastapi")
    from dynbo.client import Client
    from tests.test_service_http import in_process

    with in_process(tmp_path / "s.sqlite", refit=False) as url:
        client = Client(url, retries=0)
        client.create_study(
            "a",
            "st-gp-ucb",
            BOUNDS,
            options={
                "learn_hyperparameters": False,
                "initial_hyperparameters": {"lengthscale_time": 0.01},
                "raw_samples": 32,
            },
            clock="client",
        )
        rng = np.random.default_rng(0)
        for k in range(6):
            client.observe("a", float(rng.normal()), x=rng.random(2).tolist(), t=float(k))
        client.suggest("a", t=6.0)
        request = urllib.request.Request(url + "/studies/a/alarms?poll=0.1&seconds=20")
        received = []
        with urllib.request.urlopen(request, timeout=30) as stream:
            assert stream.headers["Content-Type"].startswith("text/event-stream")
            for raw in stream:
                line = raw.decode().rstrip("\n")
                received.append(line)
                if line.startswith("data: "):
                    break
        event = next(line for line in received if line.startswith("event: "))
        assert event == "event: short_lengthscale"
        data = json.loads(received[-1][len("data: ") :])
        assert data["study"] == "a" and data["seq"] == 7 and data["kind"] == "short_lengthscale"
        ident = next(line for line in received if line.startswith("id: "))
        # resuming after that event sends nothing more from the log
        resume = urllib.request.Request(
            url + "/studies/a/alarms?poll=0.1&seconds=1",
            headers={"Last-Event-ID": ident[len("id: ") :]},
        )
        with urllib.request.urlopen(resume, timeout=30) as stream:
            assert b"short_lengthscale" not in stream.read()
        studies = client._request("GET", "/dashboard/data")["studies"]
        assert studies[0]["alarms"][-1][1] == "short_lengthscale"
        if browser is not None:  # the page lists them, visibly, under the study's header
            driver = browser(1200, 800)
            driver.get(url + "/?refresh=0")
            items = driver.find_elements("css selector", "details.study ul.alarms li")
            assert items and all(item.is_displayed() for item in items)
            assert items[-1].get_attribute("data-kind") == "short_lengthscale"
            assert items[-1].size["height"] > 5
        history = client.history("a")
        assert any(
            a["kind"] == "short_lengthscale" for a in history[-1]["diagnostics"]["extra"]["health"]
        )
