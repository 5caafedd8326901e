import json
import time

import numpy as np
import pytest

from dynbo.harness import Clock, Protocol, ResponseTimeModel, RunSpec, execute, fit_cubic
from dynbo.harness.loop import summarize
from tests.toy import MovingPeak

FAST = {"raw_samples": 32, "restarts": 2, "fit_iterations": 20}


def spec(policy="gp-ucb", clock="modeled", seed=0, **protocol):
    protocol.setdefault("warmup", 5)
    protocol.setdefault("warmup_fraction", 0.05)
    if clock == "modeled":
        protocol.setdefault("response_time", (0.3, 0.01, 0.0, 0.0))
    return RunSpec(
        benchmark="moving-peak",
        policy=policy,
        seed=seed,
        protocol=Protocol(clock=clock, **protocol),
        policy_options=FAST,
    )


def test_response_time_model_and_cubic_fit():
    model = ResponseTimeModel((0.05, 0.0, 0.0, 2e-7))
    assert model(100) == pytest.approx(0.05 + 0.2)
    n = np.arange(10, 200, 10)
    fitted = fit_cubic(n, 0.1 + 3e-4 * n + 2e-7 * n**3)
    np.testing.assert_allclose(fitted.coefficients, [0.1, 3e-4, 0.0, 2e-7], rtol=1e-6, atol=1e-9)
    # noisy data: coefficients stay non-negative
    rng = np.random.default_rng(0)
    noisy = fit_cubic(n, 0.1 + 2e-7 * n**3 + 0.01 * rng.standard_normal(n.size))
    assert all(c >= 0 for c in noisy.coefficients)
    with pytest.raises(ValueError, match=">= 0"):
        ResponseTimeModel((0.1, -1.0, 0.0, 0.0))


def test_clock_modes():
    modeled = Clock("modeled", response_time=ResponseTimeModel((1.0, 0.5, 0, 0)), start=2.0)
    assert modeled.respond(123.0, 4) == 3.0 and modeled.current() == 2.0
    modeled.advance(3.0)
    assert modeled.current() == 5.0
    assert Clock("measured").respond(0.25, 1000) == 0.25
    assert Clock("step").respond(5.0, 10) == 0.0
    with pytest.raises(ValueError, match="unknown clock"):
        Clock("sundial")
    with pytest.raises(ValueError, match="response-time model"):
        Clock("modeled")


def test_modeled_clock_follows_the_protocol_time_line():
    bench = MovingPeak(horizon=20.0, cost=0.5)
    result = execute(spec(), benchmark=bench)
    assert result.status == "done", result.error
    warm = [r for r in result.iterations if r["warmup"]]
    loop = [r for r in result.iterations if not r["warmup"]]
    assert len(warm) == 5 and all(0 <= r["t"] <= 1.0 for r in warm)
    assert [r["t"] for r in warm] == sorted(r["t"] for r in warm)
    assert loop[0]["s"] == pytest.approx(1.0)
    for prev, cur in zip(loop, loop[1:]):
        # s_{k+1} = t_k + c and t_k = s_k + R(n_k), n_k the dataset size before suggest
        assert cur["s"] == pytest.approx(prev["t"] + 0.5)
        n_k = prev["dataset_size"] + 1
        assert cur["response_time"] == pytest.approx(0.3 + 0.01 * n_k)
        assert cur["t"] == pytest.approx(cur["s"] + cur["response_time"])
    assert loop[-1]["t"] <= 20.0
    assert all(r["regret"] >= 0 for r in result.iterations)
    assert all(r["fit_seconds"] is None for r in loop)  # modeled: no machine-dependent fields
    s = result.summary
    assert s["queries"] == len(loop)
    assert s["average_regret"] == pytest.approx(np.mean([r["regret"] for r in loop]))
    assert s["cumulative_regret"] == pytest.approx(sum(r["regret"] for r in loop))


def test_time_averaged_regret_holds_each_regret_until_the_next_query():
    rows = [
        {"warmup": 0, "t": 2.0, "regret": 1.0, "response_time": 0.1, "dataset_size": 3},
        {"warmup": 0, "t": 4.0, "regret": 3.0, "response_time": 0.1, "dataset_size": 4},
    ]
    s = summarize(rows, horizon=10.0)
    assert s["time_averaged_regret"] == pytest.approx((1.0 * 2 + 3.0 * 6) / 8)
    assert s["average_regret"] == 2.0 and s["max_dataset_size"] == 4


def test_modeled_runs_replay_exactly():
    a = execute(spec(seed=3), benchmark=MovingPeak())
    b = execute(spec(seed=3), benchmark=MovingPeak())
    assert a.iterations == b.iterations
    c = execute(spec(seed=4), benchmark=MovingPeak())
    assert c.iterations != a.iterations


def test_measured_clock_slow_policy_gets_fewer_queries():
    fast = execute(spec("gp-ucb", clock="measured"), benchmark=MovingPeak(horizon=8.0, cost=0.05))
    slow_spec = RunSpec(
        benchmark="moving-peak",
        policy="test-slow-gp-ucb",
        seed=0,
        protocol=Protocol(clock="measured", warmup=5, warmup_fraction=0.05),
        policy_options={**FAST, "delay": 0.25},
    )
    slow = execute(slow_spec, benchmark=MovingPeak(horizon=8.0, cost=0.05))
    assert fast.status == slow.status == "done"
    assert slow.summary["queries"] < fast.summary["queries"]
    slow_loop = [r for r in slow.iterations if not r["warmup"]]
    assert min(r["response_time"] for r in slow_loop) >= 0.25
    assert slow.summary["queries"] <= (8.0 - 0.4) / 0.3 + 1


def test_step_clock_uses_integer_times():
    result = execute(spec(clock="step", warmup=2), benchmark=MovingPeak(horizon=6))
    loop = [r for r in result.iterations if not r["warmup"]]
    assert [r["t"] for r in loop] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert all(r["response_time"] == 0.0 for r in loop)


def test_wall_clock_really_waits():
    start = time.monotonic()
    result = execute(spec(clock="wall", warmup=3), benchmark=MovingPeak(horizon=1.5, cost=0.2))
    elapsed = time.monotonic() - start
    assert result.status == "done"
    loop = [r for r in result.iterations if not r["warmup"]]
    assert elapsed >= 1.5 - 0.075 - 0.3  # ran until (about) the horizon in real time
    for prev, cur in zip(loop, loop[1:]):
        assert cur["s"] >= prev["t"] + 0.2 - 1e-3


def test_failing_objective_is_a_failed_run_not_a_crash():
    result = execute(spec(), benchmark=MovingPeak(horizon=20.0, fail_after=5.0))
    assert result.status == "failed"
    assert "the instrument is offline" in result.error
    assert result.iterations  # what happened before the failure is kept
    assert all(r["t"] <= 5.0 for r in result.iterations)


def test_protocol_validation():
    with pytest.raises(ValueError, match="horizon"):
        Protocol(horizon=-1.0)
    with pytest.raises(ValueError, match="modeled clock needs"):
        Protocol(clock="modeled")
    with pytest.raises(ValueError, match="unknown clock"):
        Protocol(clock="lunar")
    with pytest.raises(ValueError, match="warmup"):
        Protocol(warmup=-2)
    # wrong types are ValueErrors that name the field, never TypeError or OverflowError
    for kwargs, field in [
        ({"threads": 2.5}, "threads"),
        ({"threads": True}, "threads"),
        ({"threads": float("nan")}, "threads"),
        ({"horizon": [1]}, "horizon"),
        ({"horizon": 10**400}, "horizon"),
        ({"warmup_fraction": "0.1"}, "warmup_fraction"),
        ({"cost": True}, "cost"),
        ({"cost": 10**400}, "cost"),
        ({"additional_cost": True}, "additional_cost"),
        ({"clock": "modeled", "response_time": 0.1}, "response_time"),
        ({"clock": "modeled", "response_time": (0.1, 0.0)}, "response_time"),
        ({"clock": ["step"]}, "clock"),
    ]:
        with pytest.raises(ValueError, match=field):
            Protocol(**kwargs)
    # a modeled clock that never advances would loop for ever
    with pytest.raises(ValueError, match="never advance"):
        Protocol(clock="modeled", response_time=(0, 0, 0, 0), cost=0)
    assert Protocol(clock="modeled", response_time=(0, 0, 0, 0), cost=0.1).cost == 0.1


def test_a_frozen_modeled_clock_is_a_named_run_error():
    # the benchmark's own cost is 0 here: known only when the run starts
    from dynbo import benchmarks

    bench = benchmarks.get("ackley", dim=2, cost=0.0)
    result = execute(
        RunSpec(
            benchmark="ackley",
            policy="gp-ucb",
            seed=0,
            protocol=Protocol(clock="modeled", response_time=(0, 0, 0, 0), horizon=5, warmup=2),
        ),
        benchmark=bench,
    )
    assert result.status == "failed" and "never advance" in result.error


def test_run_identity_depends_on_what_determines_the_run():
    a, b = spec(seed=1), spec(seed=1)
    assert a.run_id == b.run_id
    assert spec(seed=2).run_id != a.run_id
    assert spec(seed=1, horizon=30.0).run_id != a.run_id


def test_a_run_pins_the_blas_threads_of_its_process_and_restores_them():
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads():
        return {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}

    seen = []
    spec = RunSpec(
        benchmark="eggholder",
        benchmark_options={"dim": 1, "horizon": 3.0},
        policy="gp-ucb",
        seed=0,
        protocol=Protocol(clock="step", warmup=2, threads=1),
        policy_options={"raw_samples": 16, "restarts": 1},
    )
    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        assert before == {2}  # NumPy's BLAS is found (the check below is not empty)
        result = execute(spec, observer=lambda policy, row: seen.append(blas_threads()))
        assert blas_threads() == before  # given back after the run
    assert result.status == "done" and seen and all(s <= {1} for s in seen)


@pytest.mark.parametrize("policy", ["bolt", "wdbo"])
def test_a_compressed_protocol_keeps_the_full_protocols_sizes_and_n_star(policy):
    # kappa = 4 (a power of two: every scaled duration is exact) over a 40 s horizon:
    # the same queries at a quarter of the times, the same dataset sizes and BOLT's n*
    def run(compression):
        protocol = Protocol(
            clock="modeled",
            horizon=40.0,
            warmup=4,
            response_time=(0.5, 0.0, 2e-3, 0.0),
            cost=0.5,
            compression=compression,
        )
        spec = RunSpec(
            benchmark="six-hump-camel",
            policy=policy,
            seed=1,
            protocol=protocol,
            policy_options={"raw_samples": 32, "restarts": 2, "fit_iterations": 20},
        )
        result = execute(spec)
        assert result.status == "done", result.error
        return [r for r in result.iterations if not r["warmup"]]

    full, compressed = run(None), run(4.0)
    assert len(full) == len(compressed) > 10
    for a, b in zip(full, compressed):
        assert a["dataset_size"] == b["dataset_size"]
        assert b["t"] == pytest.approx(a["t"] / 4, rel=1e-9)
        assert b["response_time"] == pytest.approx(a["response_time"] / 4, rel=1e-12)
        assert b["regret"] == pytest.approx(a["regret"], rel=1e-6, abs=1e-9)
        if policy == "bolt":
            assert json.loads(a["extra"])["n_star"] == json.loads(b["extra"])["n_star"]
    if policy == "bolt":
        assert any(json.loads(r["extra"])["n_star"] is not None for r in full)


def test_compression_is_refused_where_it_cannot_hold():
    with pytest.raises(ValueError, match="modeled or measured"):
        Protocol(clock="step", compression=2.0)
    with pytest.raises(ValueError, match="compression"):
        Protocol(clock="measured", compression=0.0)
    assert Protocol(clock="measured").as_dict() == Protocol(clock="measured").as_dict()
    assert "compression" not in Protocol(clock="measured").as_dict()
    assert Protocol(clock="measured", compression=2.0).as_dict()["compression"] == 2.0
