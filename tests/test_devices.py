"""Several simulated devices (``Protocol.devices``, ``dynbo.harness.devices``): one device
is the papers' loop exactly, the event times of a hand-checked case, every answer told
once, distinct pending queries, exact replay, the store, and the refusals."""

import dataclasses
import json

import numpy as np
import pytest

from dynbo.cli import main
from dynbo.harness import Protocol, Store, build_campaign, execute, run_campaign
from dynbo.harness import loop as loop_module
from dynbo.harness.devices import DeviceRun, summarize_devices
from dynbo.harness.references import make_reference
from dynbo.policies import make
from tests.test_harness_loop import spec as loop_spec
from tests.test_service_manager import assert_states_equal
from tests.toy import MovingPeak

FAST = {"raw_samples": 32, "restarts": 2, "fit_iterations": 20}


def spec(policy="gp-ucb", devices=1, options=FAST, **protocol):
    """The one-device loop tests' run on the moving peak, with ``devices`` and ``options``."""
    run_spec = loop_spec(policy, devices=devices, **protocol)
    return dataclasses.replace(run_spec, policy_options=options)


def simulate(run_spec, bench):
    """The device simulation itself, whatever ``devices`` is (``execute`` runs one device
    through the one-device loop)."""
    run = DeviceRun(run_spec)
    run.prepare(bench)
    run.warm_up()
    run.start_clock()
    run.iterate(None, None)
    return run


def device_of(row):
    return json.loads(row["extra"])["device"]


@pytest.mark.parametrize(
    "policy,options",
    [
        ("gp-ucb", FAST),
        ("wdbo", FAST),
        ("abo", FAST),  # look-ahead: the landing waits for the time it asks for
        ("sparq-gp-ucb", {"raw_samples": 32, "restarts": 2}),  # additional queries
    ],
)
def test_one_device_simulated_is_the_loop_exactly(policy, options):
    run_spec = spec(policy, options=options)
    reference = execute(run_spec, benchmark=MovingPeak(horizon=12.0, cost=0.5))
    assert reference.status == "done", reference.error
    simulated = simulate(run_spec, MovingPeak(horizon=12.0, cost=0.5))
    assert simulated.iterations == reference.iterations
    assert simulated.summary() == reference.summary
    if policy == "sparq-gp-ucb":
        assert reference.summary["additional_queries"] > 0
    if policy == "abo":
        loop = [r for r in reference.iterations if not r["warmup"]]
        assert any(r["t"] > r["s"] + r["response_time"] + 1e-9 for r in loop)


def test_one_device_keeps_the_run_identities():
    assert "devices" not in Protocol(devices=1).as_dict()
    assert spec(devices=1).run_id == spec().run_id
    two = spec(devices=2)
    assert two.protocol.as_dict()["devices"] == 2 and two.run_id != spec().run_id


class Recorder:
    """A fake policy: the random reference player, logging what it is told and asked."""

    def __init__(self, player):
        self.player = player
        self.log = []

    def __getattr__(self, name):
        return getattr(self.player, name)

    def observe(self, x, t, y):
        self.log.append(("observe", float(x[0]), t, y))
        self.player.observe(x, t, y)

    def suggest(self, t):
        self.log.append(("suggest", t))
        return self.player.suggest(t)


def recorded_run(monkeypatch, devices, response, cost, horizon=4.0):
    """A random player with a constant modeled response time ``response`` (s), on a
    benchmark costing ``cost`` (s); the loop starts at 1.0 (a quarter of 4 s)."""
    recorders = []

    def fake_policy(run_spec, bench, run_horizon):
        recorders.append(Recorder(make_reference("random", bench, int(run_spec.seed), {})))
        return recorders[-1]

    monkeypatch.setattr(loop_module, "make_run_policy", fake_policy)
    run_spec = spec(
        "random",
        devices=devices,
        options={},
        warmup=2,
        warmup_fraction=0.25,
        response_time=(response, 0.0, 0.0, 0.0),
    )
    run = simulate(run_spec, MovingPeak(horizon=horizon, cost=cost))
    return run, recorders[0]


# D = 0.25 s, c = 1 s, T = 4 s, start 1 s (binary fractions: the sums are exact)
HAND_CHECKED = {
    # q = 2: k1 s=1 -> lands 1.25 on device 0 (answer at 2.25); k2 s=1.25 -> 1.5 on 1
    # (2.5); both busy: wait to 2.25, k3 -> 2.5 on 0 (3.5); at 2.5 device 1 is back:
    # k4 -> 2.75 on 1 (3.75); wait to 3.5, k5 -> 3.75 on 0 (4.75); at 3.75 device 1:
    # k6 -> 4.0 on 1 (lands at T: made); the next answer (4.75) is after T: the end
    2: [(0, 1.0, 1.25), (1, 1.25, 1.5), (0, 2.25, 2.5), (1, 2.5, 2.75), (0, 3.5, 3.75),
        (1, 3.75, 4.0)],
    # q = 4: four in a row from 1 (the 4th lands at 2.0, every device busy), then each
    # device as its answer comes back (2.25, 2.5, 2.75, 3.0; 3.5, 3.75); at 4.0 the
    # policy would start a suggestion at T: the end
    4: [(0, 1.0, 1.25), (1, 1.25, 1.5), (2, 1.5, 1.75), (3, 1.75, 2.0), (0, 2.25, 2.5),
        (1, 2.5, 2.75), (2, 2.75, 3.0), (3, 3.0, 3.25), (0, 3.5, 3.75), (1, 3.75, 4.0)],
}  # fmt: skip


@pytest.mark.parametrize("devices", [2, 4])
def test_the_event_times_of_a_hand_checked_case(monkeypatch, devices):
    run, recorder = recorded_run(monkeypatch, devices, response=0.25, cost=1.0)
    loop = [r for r in run.iterations if not r["warmup"]]
    assert [(device_of(r), r["s"], r["t"]) for r in loop] == HAND_CHECKED[devices]
    assert all(r["response_time"] == 0.25 for r in loop)
    # each suggestion told every answer arrived by then (t + c <= s), each once, in order
    told = [(e[1], e[2], e[3]) for e in recorder.log if e[0] == "observe"][2:]  # no warm-up
    last_suggest = loop[-1]["s"]
    arrived = sorted(
        (r for r in loop if r["t"] + 1.0 <= last_suggest), key=lambda r: (r["t"] + 1.0, r["k"])
    )
    assert told == [(json.loads(r["x"])[0], r["t"], r["y"]) for r in arrived]
    for event, before in zip(recorder.log[3:], recorder.log[2:]):
        if event[0] == "suggest" and before[0] == "observe":
            assert before[2] + 1.0 <= event[1]  # arrived before the suggestion
    # the time-averaged regret holds each device's regret until its next landing
    expected_weight, expected_time = 0.0, 0.0
    for device in range(devices):
        rows = [r for r in loop if device_of(r) == device]
        ends = [r["t"] for r in rows[1:]] + [4.0]
        expected_weight += sum(r["regret"] * (e - r["t"]) for r, e in zip(rows, ends))
        expected_time += 4.0 - rows[0]["t"]
    summary = run.summary()
    assert summary["time_averaged_regret"] == pytest.approx(expected_weight / expected_time)
    assert summary["queries"] == len(HAND_CHECKED[devices]) and summary["devices"] == devices
    assert summary["average_regret"] == pytest.approx(np.mean([r["regret"] for r in loop]))


def test_answers_arriving_together_are_told_in_the_order_of_their_queries(monkeypatch):
    # R(n) = 0: three queries made at 1.0 land at 1.0, their answers all arrive at 2.0,
    # and so on each second; the answers of 3.0 would come at T = 4: the end
    run, recorder = recorded_run(monkeypatch, 3, response=0.0, cost=1.0)
    loop = [r for r in run.iterations if not r["warmup"]]
    assert [(device_of(r), r["s"], r["t"]) for r in loop] == [
        (j, float(s), float(s)) for s in (1, 2, 3) for j in range(3)
    ]
    told = [e[3] for e in recorder.log if e[0] == "observe"][2:]
    assert told == [r["y"] for r in loop[:6]]


@pytest.mark.parametrize("devices", [2, 4])
def test_pending_queries_are_distinct_and_the_run_replays_exactly(devices):
    # D = R(n) is about 0.35 s: with c = 1.5 s, 1 + c / D > 4 devices keep busy
    run_spec = spec("wdbo", devices=devices)
    first = execute(run_spec, benchmark=MovingPeak(horizon=10.0, cost=1.5))
    assert first.status == "done", first.error
    loop = [r for r in first.iterations if not r["warmup"]]
    assert {device_of(r) for r in loop} == set(range(devices))
    for i, row in enumerate(loop):
        # the queries out when this one was made: made before, answered after its start
        out = [r for r in loop[:i] if r["t"] + 1.5 > row["s"]]
        assert len(out) <= devices - 1
        assert device_of(row) not in {device_of(r) for r in out}  # its device was free
        x = json.loads(row["x"])[0]
        assert all(abs(x - json.loads(r["x"])[0]) > 1e-4 for r in out)
    one = execute(spec("wdbo"), benchmark=MovingPeak(horizon=10.0, cost=1.5))
    assert first.summary["queries"] > one.summary["queries"]
    again = execute(run_spec, benchmark=MovingPeak(horizon=10.0, cost=1.5))
    assert again.iterations == first.iterations and again.summary == first.summary


def test_a_look_ahead_policy_runs_with_several_devices():
    result = execute(spec("abo", devices=2), benchmark=MovingPeak(horizon=12.0, cost=0.5))
    assert result.status == "done", result.error
    loop = [r for r in result.iterations if not r["warmup"]]
    assert all(r["t"] >= r["s"] + r["response_time"] - 1e-12 for r in loop)
    for device in (0, 1):  # each device evaluates one query at a time
        times = [r["t"] for r in loop if device_of(r) == device]
        assert all(b >= a + 0.5 for a, b in zip(times, times[1:]))


def test_an_answer_to_an_older_pending_query_may_come_after_a_later_suggestion():
    policy = make("gp-ucb", bounds=[[0.0], [1.0]], seed=0, raw_samples=32, restarts=2)
    rng = np.random.default_rng(0)
    for t in np.linspace(0.0, 1.0, 6):
        policy.observe(rng.random(1), float(t), float(rng.random()))
    first, second = policy.suggest(2.0), policy.suggest(2.5)
    for x, t, message in [
        (first.x, 1.9, r"observe\(t=1.9\) answers a query for t=2.0"),
        # the newest query: no earlier than the latest suggestion (an early answer to a
        # look-ahead query, ABO's, at or after it is fine)
        (second.x, 2.2, r"time went backwards: observe\(t=2.2\) after suggest\(t=2.5\)"),
    ]:
        before = policy.state_dict()
        with pytest.raises(ValueError, match=message):
            policy.observe(x, t, 0.0)
        assert_states_equal(policy.state_dict(), before)
    # each device's answer at its landing time, after the later suggestion (2.5)
    policy.observe(first.x, 2.2, 0.1)
    assert len(policy.pending) == 1
    policy.observe(second.x, 2.8, 0.2)
    assert policy.pending == [] and policy.dataset_size == 8
    # the dataset's times stay in order: an answer not before the previous observe
    third, fourth = policy.suggest(3.0), policy.suggest(3.1)
    policy.observe(fourth.x, 3.5, 0.0)
    with pytest.raises(ValueError, match=r"observe\(t=3.2\) after observe\(t=3.5\)"):
        policy.observe(third.x, 3.2, 0.0)
    policy.observe(third.x, 3.5, 0.0)
    policy.suggest(4.0)
    with pytest.raises(ValueError, match=r"observe\(t=3.9\) after suggest\(t=4.0\)"):
        policy.observe(np.array([0.31]), 3.9, 0.0)  # a free observation keeps one clock


def test_store_keeps_and_resumes_runs_with_devices(tmp_path):
    config = {
        "name": "devices",
        "benchmarks": [{"name": "eggholder", "options": {"dim": 1, "horizon": 8.0, "cost": 0.5}}],
        "policies": [{"name": "wdbo", "options": {"raw_samples": 32, "restarts": 2}}],
        "seeds": [0],
        "protocol": {
            "clock": "modeled",
            "response_time": [0.25, 0.0, 0.0, 0.0],
            "warmup": 4,
            "devices": 2,
        },
    }
    campaign = build_campaign(config)
    (run_spec,) = campaign.specs
    assert run_spec.protocol.devices == 2
    with Store(tmp_path / "d.sqlite") as store:
        assert run_campaign(campaign, store, progress=False).done == 1
        rows = store.iteration_rows()
        (stored,) = store.runs()
    with Store(tmp_path / "d.sqlite") as store:
        again = run_campaign(campaign, store, progress=False)
        assert again.skipped == 1 and again.done == 0
        assert store.iteration_rows() == rows
    direct = execute(run_spec)
    assert direct.status == "done", direct.error
    assert stored["summary"]["queries"] == direct.summary["queries"]
    assert stored["summary"]["time_averaged_regret"] == pytest.approx(
        direct.summary["time_averaged_regret"]
    )
    assert stored["protocol"]["devices"] == 2
    with Store(tmp_path / "d.sqlite") as store:
        frame = store.iterations_frame()
    frame = frame[frame["warmup"] == 0]
    loop = [r for r in direct.iterations if not r["warmup"]]
    for column in ("k", "s", "t", "y", "regret", "extra"):  # the run replays exactly
        assert list(frame[column]) == [r[column] for r in loop]
    assert {device_of(r) for r in loop} == {0, 1}
    assert summarize_devices(direct.iterations, 8.0) == direct.summary


@pytest.mark.parametrize(
    "protocol,message",
    [
        (dict(devices=0), "devices must be an integer from 1 to 64"),
        (dict(devices=65), "devices must be an integer from 1 to 64"),
        (dict(devices=2.0), "devices must be an integer"),
        (dict(devices=True), "devices must be an integer"),
        (dict(devices="2"), "devices must be an integer"),
        (dict(clock="step", devices=2), "needs a continuous clock"),
    ],
)
def test_bad_device_counts_are_refused(protocol, message):
    with pytest.raises(ValueError, match=message):
        Protocol(**protocol)


def test_sparq_is_refused_with_several_devices_and_campaigns_and_the_cli_say_so(capsys):
    result = execute(spec("sparq-gp-ucb", devices=2, options={}), benchmark=MovingPeak())
    assert result.status == "failed" and "additional" in result.error
    config = {
        "name": "x",
        "benchmarks": ["eggholder"],
        "policies": ["gp-ucb"],
        "protocol": {"clock": "modeled", "devices": 0},
    }
    with pytest.raises(ValueError, match="invalid protocol: devices must be"):
        build_campaign(config)
    base = ["run", "--benchmark", "eggholder", "--clock", "modeled", "--quiet"]
    for extra, message in [
        (["--policy", "gp-ucb", "--devices", "0"], "devices must be an integer"),
        (["--policy", "gp-ucb", "--devices", "two"], "invalid int value"),
        (["--policy", "sparq-gp-ucb", "--devices", "2"], "additional queries"),
        (["--policy", "gp-ucb", "--devices", "2", "--clock", "step"], "continuous clock"),
    ]:
        capsys.readouterr()
        assert main(base + extra) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("dynbo: error:") and message in err[0], err
