"""Every policy and the relevancy criterion on CUDA against the CPU (skipped without CUDA),
and ``benchmarks/gpu.py`` and ``wdbo_iteration.py --rounds`` end to end on the CPU (issue 27)."""

import json
import math
import statistics
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from dynbo.models import Hyperparameters, KernelSpec, SpatioTemporalGP
from dynbo.policies import available, make, policy_class
from dynbo.relevancy import WassersteinRelevancy

REPOSITORY = Path(__file__).resolve().parents[1]
BOUNDS = [[0.0, 0.0], [1.0, 1.0]]
#: a small acquisition search: the test compares devices, not the search
SEARCH = {"raw_samples": 64, "restarts": 2, "acquisition_iterations": 50}
#: L-BFGS-B stops on a relative improvement, so float64 sums taken in another order (a
#: GPU's reductions) can stop it one step earlier or later: queries agree to about the
#: last step's length, not to the last digit (unit box, where a step near an optimum is
#: well below 1e-3)
QUERY_TOLERANCE = 1e-3
#: relevancies of a well-conditioned GP (noise 1e-2 of a unit outputscale, n = 150)
RELEVANCY_TOLERANCE = 1e-10

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def drifting(x: np.ndarray, t: float) -> float:
    return float(np.sin(6 * x[0] + t / 4) * np.cos(4 * x[1] - t / 6) + 0.5 * x.sum())


def run_side_by_side(name: str, device: str, steps: int = 4) -> list[tuple[np.ndarray, ...]]:
    """``(CPU query, device query)`` of each step of policy ``name``, both told the same data.

    Both copies observe the same five warm-up points; each step asks both for a query at
    the same time, and both observe the CPU query's value at its point (the device copy
    at its own point, so that a query differing in the last digits is still its own
    request), so that a difference cannot compound through the data.
    """
    options = dict(SEARCH)
    if policy_class(name).known_noise:  # UI-TVBO is told the noise variance of y
        options["noise_variance"] = 0.01
    on_cpu = make(name, bounds=BOUNDS, seed=0, device="cpu", **options)
    on_device = make(name, bounds=BOUNDS, seed=0, device=device, **options)
    rng = np.random.default_rng(0)
    for k in range(5):
        x = rng.uniform(0.0, 1.0, 2)
        for policy in (on_cpu, on_device):
            policy.observe(x, float(k), drifting(x, float(k)))
    pairs = []
    t = 5.0
    for _ in range(steps):
        a, b = on_cpu.suggest(t), on_device.suggest(t)
        pairs.append((a.x, b.x, np.array([a.t]), np.array([b.t])))
        at = max(a.t, t) + 0.5
        y = drifting(a.x, at)
        on_cpu.observe(a.x, at, y)
        on_device.observe(b.x, at, y)
        if len(a.additional):  # SparQ's fresh evaluations of past points
            pairs.append((a.additional, b.additional))
            values = [drifting(x, at) for x in a.additional]
            on_cpu.observe_additional(a.additional, at, values)
            on_device.observe_additional(b.additional, at, values)
        t = at + 0.5
    return pairs


@requires_cuda
@pytest.mark.parametrize("name", available())
def test_every_policy_suggests_on_cuda_what_it_suggests_on_the_cpu(name):
    for cpu_side, cuda_side, *times in run_side_by_side(name, "cuda"):
        assert cpu_side.shape == cuda_side.shape
        np.testing.assert_allclose(cuda_side, cpu_side, rtol=0, atol=QUERY_TOLERANCE)
        if times:
            np.testing.assert_allclose(times[1], times[0], rtol=1e-9)


@requires_cuda
def test_a_policy_on_cuda_keeps_its_model_there_and_its_state_loads_on_the_cpu():
    policy = make("wdbo", bounds=BOUNDS, seed=0, device="cuda", **SEARCH)
    rng = np.random.default_rng(1)
    for k in range(6):
        x = rng.uniform(0.0, 1.0, 2)
        policy.observe(x, float(k), drifting(x, float(k)))
    policy.suggest(6.0)
    assert policy.model.cholesky_factor.device.type == "cuda"
    state = policy.state_dict()
    assert all(v.device.type == "cpu" for v in state["gp"].values() if torch.is_tensor(v))
    on_cpu = type(policy).from_state_dict({**state, "config": {**state["config"], "device": "cpu"}})
    points = rng.uniform(0.0, 1.0, (32, 2))
    mean_cuda, var_cuda = policy.predict(points, 6.0)
    mean_cpu, var_cpu = on_cpu.predict(points, 6.0)
    np.testing.assert_allclose(mean_cuda, mean_cpu, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(var_cuda, var_cpu, rtol=1e-10)


def relevancy_gp(device: str, n: int = 150) -> SpatioTemporalGP:
    g = torch.Generator().manual_seed(7)
    x = torch.rand(n, 2, generator=g, dtype=torch.float64)
    t = torch.sort(torch.rand(n, generator=g, dtype=torch.float64) * 600.0).values
    y = torch.sin(6 * x[:, 0]) * torch.cos(t / 60) + 0.1 * torch.randn(
        n, generator=g, dtype=torch.float64
    )
    hyper = Hyperparameters(
        outputscale=1.0, lengthscale_space=(0.3,), lengthscale_time=60.0, noise=0.01
    )
    gp = SpatioTemporalGP(KernelSpec(dim=2), hyper, device=device)
    gp.set_data(torch.cat([x, t[:, None]], 1), y)
    return gp


@requires_cuda
@pytest.mark.parametrize("paper_compat", [False, True])
def test_relevancies_on_cuda_equal_those_on_the_cpu(paper_compat):
    on_cpu = WassersteinRelevancy.from_gp(relevancy_gp("cpu"), 600.0, paper_compat=paper_compat)
    on_cuda = WassersteinRelevancy.from_gp(relevancy_gp("cuda"), 600.0, paper_compat=paper_compat)
    for _ in range(4):  # fresh, then after removals (the rank-one updates)
        reference, values = on_cpu.relevancies(), on_cuda.relevancies()
        assert values.device.type == "cuda"
        relative = ((values.cpu() - reference).abs() / reference.abs()).max()
        assert float(relative) <= RELEVANCY_TOLERANCE
        least = int(torch.argmin(reference))
        assert int(torch.argmin(values)) == least
        on_cpu.remove(least)
        on_cuda.remove(least)


def candidates_above_450_rows(P: torch.Tensor) -> int:
    """The removal steps' candidates per step forced by storage size, not by the L2 rule."""
    return 8 if P.shape[0] > 450 else 0


@requires_cuda
@pytest.mark.parametrize("batch_size", [7, 64])
# a failed capture falls back to eager steps with a warning: here it must fail the test
@pytest.mark.filterwarnings("error:removal steps run without a CUDA graph:RuntimeWarning")
def test_graphed_removal_steps_on_cuda_equal_the_eager_ones_bit_for_bit(batch_size, monkeypatch):
    # the speculative steps replay a captured CUDA graph of one step: the same kernels on
    # the same buffers, so the same removals, relevancies and storage to the last bit;
    # with a stop() that cuts a batch, and compactions (n = 600); with candidates while
    # the storage holds more than 450 rows and none after (the L2 rule would take none
    # at this size), so that a compaction crosses from one to the other
    from dynbo.relevancy import criterion

    monkeypatch.setattr(criterion, "_candidates_per_step", candidates_above_450_rows)

    streams = []
    capture = criterion._capture

    def counted(batch):
        replay = capture(batch)
        streams.append(criterion._CAPTURE_STREAMS[batch._live.device])
        return replay

    monkeypatch.setattr(criterion, "_capture", counted)
    gp = relevancy_gp("cuda", n=600)
    calls = {"eager": 0, "graphed": 0}

    def stop(kind):
        calls[kind] += 1
        return calls[kind] > 400

    results = {}
    for kind, graphed in (("eager", False), ("graphed", True)):
        relevancy = WassersteinRelevancy.from_gp(gp, 600.0)
        removals = relevancy.remove_least_relevant(
            598,
            budget=math.inf,
            batch_size=batch_size,
            stop=lambda k=kind: stop(k),
            graphed=graphed,
        )
        results[kind] = (removals, relevancy.precision.cpu(), relevancy.relevancies().cpu())
    (eager, p_eager, r_eager), (graphed, p_graphed, r_graphed) = results.values()
    assert eager.stopped_by == graphed.stopped_by == "stop"
    assert calls["eager"] == calls["graphed"]
    assert len(eager.indices) == 400
    assert graphed.indices == eager.indices and graphed.origins == eager.origins
    assert graphed.relevancies == eager.relevancies and graphed.budget == eager.budget
    assert torch.equal(p_graphed, p_eager) and torch.equal(r_graphed, r_eager)
    # captured (none in the eager loop), again after the compaction at 300 removals, and
    # always on the device's one capture stream
    assert len(streams) >= 2 and all(stream is streams[0] for stream in streams)
    # and the CPU's loop chooses the same observations (the first 100: later choices
    # between relevancies equal to rounding may differ between devices)
    on_cpu = WassersteinRelevancy.from_gp(relevancy_gp("cpu", n=600), 600.0)
    cpu = on_cpu.remove_least_relevant(100, budget=math.inf)
    assert cpu.indices == eager.indices[:100]
    np.testing.assert_allclose(eager.relevancies[:100], cpu.relevancies, rtol=1e-8, atol=1e-12)


@requires_cuda
def test_cuda_removal_steps_take_candidates_only_where_p_outgrows_the_l2_cache():
    from dynbo.relevancy import criterion

    cache = torch.cuda.get_device_properties(0).L2_cache_size
    fits = int((cache / 8) ** 0.5)
    # expanded views: the sizes without the memory
    small = torch.zeros(1, 1, dtype=torch.float64, device="cuda").expand(fits, fits)
    large = torch.zeros(1, 1, dtype=torch.float64, device="cuda").expand(fits + 1, fits + 1)
    assert criterion._candidates_per_step(small) == 0
    assert criterion._candidates_per_step(large) == criterion._CUDA_CANDIDATES_PER_STEP


@requires_cuda
@pytest.mark.parametrize("graphed", [False, True])
def test_removal_steps_on_cuda_with_candidates_equal_those_without(graphed, monkeypatch):
    # the torch steps take each product P q from one matrix product per batch for its
    # least relevant candidates (section 3 of docs/relevancy.md); with none (0 per step)
    # every step makes its own: the same removals, the relevancies to rounding
    from dynbo.relevancy import criterion

    gp = relevancy_gp("cuda", n=600)
    results = {}
    # (600 observations' P fits the L2 cache, where the rule takes none: forced here)
    for per_step in (0, 1, criterion._CUDA_CANDIDATES_PER_STEP):
        monkeypatch.setattr(criterion, "_candidates_per_step", lambda P, c=per_step: c)
        relevancy = WassersteinRelevancy.from_gp(gp, 600.0)
        removals = relevancy.remove_least_relevant(400, budget=math.inf, graphed=graphed)
        results[per_step] = (removals, relevancy.precision.cpu())
    (direct, p_direct) = results.pop(0)
    assert direct.misses == 0
    for removals, precision in results.values():
        assert removals.indices == direct.indices
        np.testing.assert_allclose(removals.relevancies, direct.relevancies, rtol=1e-8, atol=1e-12)
        scale = float(p_direct.abs().max())
        assert float((precision - p_direct).abs().max()) <= 1e-10 * scale
    assert results[1][0].misses > 0  # one per step misses: the batches end early


@requires_cuda
def test_graphed_removal_loops_in_several_threads_equal_the_eager_one(monkeypatch):
    # the service runs studies in threads: their captures take turns on the device's one
    # capture stream, and a thread's synchronizing calls stay legal while another
    # captures; every loop captures (no fallback) and removes what the eager loop
    # removes, bit for bit (with candidates above 450 rows, as above)
    from dynbo.relevancy import criterion

    monkeypatch.setattr(criterion, "_candidates_per_step", candidates_above_450_rows)

    captured = []
    capture = criterion._capture

    def counted(batch):
        replay = capture(batch)
        captured.append(replay is not None)  # list.append is atomic
        return replay

    monkeypatch.setattr(criterion, "_capture", counted)
    gp = relevancy_gp("cuda", n=600)
    eager = WassersteinRelevancy.from_gp(gp, 600.0).remove_least_relevant(
        400, budget=math.inf, graphed=False
    )
    results, errors = [None] * 4, []

    def run(i):
        try:
            relevancy = WassersteinRelevancy.from_gp(gp, 600.0)
            results[i] = relevancy.remove_least_relevant(400, budget=math.inf, graphed=True)
        except BaseException as err:  # reported below, from the test's thread
            errors.append(err)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(captured) >= 4 and all(captured)
    for removals in results:
        assert removals.indices == eager.indices
        assert removals.relevancies == eager.relevancies


def test_the_gpu_benchmark_runs_end_to_end_on_the_cpu(tmp_path):
    out = tmp_path / "gpu.json"
    result = subprocess.run(
        [
            sys.executable, "benchmarks/gpu.py", "--device", "cpu", "--sizes", "20",
            "--repeats", "1", "--out", str(out),
        ],
        cwd=REPOSITORY, capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    report = json.loads(result.stdout)
    assert json.loads(out.read_text()) == report
    assert report["benchmark"] == "gpu" and report["device"] == "cpu"
    assert {"device_name", "cpu_name", "dtype", "hyperparameters", "elapsed_seconds"} <= set(report)
    [size] = report["sizes"]
    assert size["n"] == 20
    kinds = {"wdbo", "bolt", "st-gp-ucb", "relevancies", "wdbo_fit"}
    for side in ("on_device", "on_cpu_1_thread"):
        assert set(size[side]) == kinds
        for row in size[side].values():
            assert row["repeats"] == 1 and row["seconds"] > 0 and row["n"] <= 21
        # the fixed hyperparameters: no fit; the fitted state: a warm-started fit
        assert size[side]["wdbo"]["fit_evaluations"] == 0
        assert size[side]["wdbo_fit"]["fit_evaluations"] > 0
    assert size["on_device"]["wdbo_fit"]["prepare_seconds"] > 0
    assert set(size["speedup"]) == kinds
    agreement = size["agreement"]
    for name in ("wdbo", "bolt", "st-gp-ucb", "wdbo_fit"):
        # the same device twice: the same numbers
        assert agreement[name]["posterior_mean_max_rel_diff"] < 1e-12
        assert agreement[name]["posterior_variance_max_rel_diff"] < 1e-12
        assert agreement["query_max_abs_diff"][name] < 1e-6
    assert agreement["relevancies"]["max_rel_diff"] < 1e-12
    assert all(math.isfinite(v) for v in size["prepare_seconds"].values())


def test_the_iteration_benchmark_reports_each_round_and_their_median():
    # wdbo_iteration.py --rounds: the speed target is read over rounds spread over time
    result = subprocess.run(
        [
            sys.executable, "benchmarks/wdbo_iteration.py", "--sizes", "14", "--repeats", "1",
            "--rounds", "3",
        ],
        cwd=REPOSITORY, capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    report = json.loads(result.stdout)
    [row] = report["results"]
    assert row["n"] == 14 and len(row["rounds"]) == 3
    for key in ("iteration_seconds", "cholesky_seconds", "iteration_in_choleskys"):
        assert row[key] == statistics.median(r[key] for r in row["rounds"])
    assert row["iteration_seconds_min"] <= row["iteration_seconds"] <= row["iteration_seconds_max"]
    # the same state each round: the same counts
    assert row["removed"] == row["rounds"][0]["removed"] is not None
    assert report["targets"] is None  # no n = 200 in this run
    repeated = subprocess.run(
        [sys.executable, "benchmarks/wdbo_iteration.py", "--sizes", "14", "14"],
        cwd=REPOSITORY, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert repeated.returncode == 2 and "must not repeat" in repeated.stderr


def test_the_removal_profile_runs_end_to_end_on_the_cpu(tmp_path):
    out = tmp_path / "profile.json"
    result = subprocess.run(
        [
            sys.executable, "benchmarks/removal_profile.py", "--device", "cpu", "--sizes", "40",
            "--repeats", "1", "--top", "3", "--out", str(out),
        ],
        cwd=REPOSITORY, capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    report = json.loads(result.stdout)
    assert json.loads(out.read_text()) == report
    [size] = report["sizes"]
    assert size["n"] == 40 and size["captures"] == 0  # no graphs on a CPU
    assert size["seconds"] > 0 and size["eager_seconds"] > 0
    profile = size["profile"]
    assert profile["kernels"] == [] and profile["kernel_ms"] == 0  # no device kernels
    assert 0 < len(profile["host"]) <= 3 and profile["profiled_ms"] > 0
