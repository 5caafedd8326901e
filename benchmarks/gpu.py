"""W-DBO, BOLT and ST-GP-UCB iterations and the relevancies on a GPU and on one CPU thread (JSON).

For each dataset size n (``--sizes``) and each of W-DBO, BOLT and ST-GP-UCB, a prepared
state: ``n - 2`` observations of ``wdbo_iteration.py``'s drifting function in
``d = --dim`` (uniform times in [0, 600] s, noise sd 0.05) under fixed hyperparameters
(:data:`FIXED_HYPERPARAMETERS`, ``learn_hyperparameters=False``), then two untimed
iterations at 600 s and 601 s, each query answered half a second later, as in
``wdbo_iteration.py``: the next iteration enters with n observations (fewer for W-DBO
where its first two removal loops dropped some). The hyperparameters are fixed so that
the states are the same on both devices: a fit on each would stop at hyperparameters
that differ in the last digits, and everything after would differ with them; the timed
iteration is therefore the removal loop (W-DBO; BOLT removes nothing until it has seen
``min_response_points = 4`` dataset sizes, so here its iteration is ST-GP-UCB's plus
its bookkeeping) and the acquisition search, without a fit. The observations enter the
GP with one factorization (``SpatioTemporalGP.set_data``) rather than n ``observe``
calls, each of which copies the n x n factor: that is O(n^3) copies, minutes at
n = 10,000 on a CPU, for the same state.

A whole W-DBO iteration, its fit included (``wdbo_fit``), is timed from a second W-DBO
state prepared on the device as above but with the hyperparameters learned
(``learn=True``: the iteration at 600 s fits them from the fixed ones, cold, the one at
601 s warm), so that the timed iteration's fit starts warm from the previous optimum,
as in a run (``fit_evaluations``; ``prepare_seconds`` includes the cold fit). Its
state is loaded as it is on the CPU for the second pass, and its posteriors enter the
agreement; its timed fits run on each device and may stop at optima that differ in
the last digits, so its query can differ between the devices where the others agree.

Measured, in two passes:

1. On ``--device`` (default ``cuda``), size by size: the states are prepared there
   (``prepare_seconds``); the next iteration, ``suggest(602)``, is timed ``--repeats``
   times from the saved state after one untimed warm-up, each bracketed by
   ``torch.cuda.synchronize()`` (``seconds``: median, min, max; the split into
   cleaning and acquisition is the policy's own clock, which queued GPU kernels can
   shift between the phases); the n relevancies of the ST-GP-UCB state's GP at 602 s
   (``WassersteinRelevancy.from_gp(gp, 602).relevancies()``, O(n^3)) likewise; and the
   agreement with the CPU in float64 (``agreement``): the same states loaded on both
   devices, the maximum relative difference of the posterior mean (relative to the
   largest ``|mean|``: a mean that crosses zero has no relative digits of its own) and
   of the posterior variance (elementwise) at 256 uniform points at 602 s, and of the
   relevancies (elementwise and relative to the largest). The CPU side of the agreement
   uses every core.
2. On one CPU thread of the same machine (``torch.set_num_threads(1)``, the BLAS and
   OpenMP pools pinned before torch loads), size by size, the same iterations and
   relevancies from the same states, with ``speedup`` = CPU seconds / device seconds
   and the largest difference between the queries chosen on the two devices
   (``query_max_abs_diff``, in the unit box).

With ``--device cpu`` (a smoke check) the first pass runs on every core and the second
on one. Each measurement first asks whether it fits (:class:`TimeAllowance`): on the
CPU its warm-up and one timed run must fit ``--max-seconds``, and every measurement
must fit the time left of ``--total-seconds``, as predicted from the same measurement
at the smaller sizes (a power law through the last two, a cubic from one). A
measurement that does not fit, or runs out of memory, is skipped with a note; the
repeats after the warm-up are cut to those that fit. Before the first size, one untimed
preparation at the smallest size warms the device (``warm_up_seconds``). Start with a small size: a
measurement has no prediction at the first size it runs at. The JSON is written to
``--out`` after every size, so a run stopped midway keeps what it measured.

A session with a GPU (the device tool's ``run``: one command, ``timeout_s=400``, on a
machine whose python3 has torch, botorch, gpytorch, scipy and threadpoolctl; files come
back from ``$OUT``) runs, from the repository root, the CUDA tests (about a minute on an
H200), ``removal_candidates.py`` (how many candidates per step the removal batches'
products take, about a minute) and this script (``--total-seconds 170``: the script
stops starting measurements after that and skips the rest with a note;
``--max-seconds 15`` skips the CPU thread's W-DBO above n = 1000), each under a
``timeout`` so that what they wrote comes back within a lease of 15 minutes::

    export PYTHONPATH=src PYTHONUNBUFFERED=1; timeout 90 python3 -m pytest -q \
        -p no:randomly -rs tests/test_cuda.py 2>&1 | tee $OUT/test_cuda.log | tail -2; \
        timeout 100 python3 benchmarks/removal_candidates.py --device cuda \
        --sizes 1000 2000 4000 10000 --per-step 0 4 8 16 --repeats 3 \
        --out $OUT/removal_candidates_cuda.json > /dev/null; timeout 220 python3 \
        benchmarks/gpu.py --device cuda --sizes 200 1000 5000 10000 --repeats 3 \
        --max-seconds 15 --total-seconds 170 --out $OUT/gpu.json > $OUT/gpu.stdout

then keeps the returned ``gpu.json`` as ``docs/results/gpu.json`` and writes its
numbers, with the card, into ``docs/results.md`` (section "GPU").
``removal_compaction.py --device cuda --sizes 1000 10000`` (about a minute) compares
when the removal loop compacts its storage there.

    python benchmarks/gpu.py [--device cuda] [--sizes 200 1000 5000 10000] [--dim 2]
        [--repeats 3] [--max-seconds 60] [--total-seconds 420] [--seed 0] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# importing it pins the BLAS/OpenMP pools to one thread before NumPy and torch load
from wdbo_iteration import device_name, machine_record, objective, synchronize  # isort: skip

import numpy as np  # noqa: E402
import torch  # noqa: E402

from dynbo.models import SpatioTemporalGP  # noqa: E402
from dynbo.policies import Policy, make  # noqa: E402
from dynbo.relevancy import WassersteinRelevancy  # noqa: E402

POLICIES = ("wdbo", "bolt", "st-gp-ucb")
#: in standardized target units, unit-box space and seconds; a 60 s memory over the
#: 600 s of data, so that W-DBO finds old observations to remove
FIXED_HYPERPARAMETERS = {
    "outputscale": 1.0,
    "lengthscale_space": 0.3,
    "lengthscale_time": 60.0,
    "noise": 0.01,
}
HORIZON = 600.0  # seconds spanned by the observations
UNTIMED_AT = (600.0, 601.0)  # the prepared iterations (wdbo_iteration.py's)
TIMED_AT = 602.0  # the timed iteration and the time of the relevancies and posteriors
AGREEMENT_POINTS = 256


def policy_options(device: str, learn: bool = False) -> dict[str, Any]:
    """The options of every policy here: fixed hyperparameters (``learn``: learned from
    the fixed ones on), the horizon as time unit."""
    return {
        "time_scale": HORIZON,
        "learn_hyperparameters": learn,
        "initial_hyperparameters": dict(FIXED_HYPERPARAMETERS),
        "device": device,
    }


def on_device(state: dict, device: str) -> Policy:
    """The policy of ``state`` rebuilt with its model on ``device`` (the same tensors)."""
    return Policy.from_state_dict({**state, "config": {**state["config"], "device": device}})


def prepared_state(
    name: str, n: int, dim: int, seed: int, device: str, learn: bool = False
) -> dict:
    """The state of policy ``name`` that holds ``n`` observations and ran two iterations.

    ``n`` observations of :func:`wdbo_iteration.objective` at uniform times in
    [0, 600] s (noise sd 0.05, the same draw for every policy of a seed), put into the
    GP with one factorization on ``device``; then iterations at 600 s and 601 s, each
    query observed 0.5 s later. The state (CPU tensors) loads on any device. ``learn``:
    the hyperparameters are learned from the fixed ones on (the first iteration's fit
    starts cold, the second's warm; so does the next one's, as in a run).
    """
    rng = np.random.default_rng(seed)
    times = np.sort(rng.uniform(0.0, HORIZON, n))
    points = rng.uniform(0.0, 1.0, (n, dim))
    values = np.array([objective(x, t) for x, t in zip(points, times)])
    values += 0.05 * rng.standard_normal(n)
    bounds = [[0.0] * dim, [1.0] * dim]
    policy = make(name, bounds=bounds, seed=seed, **policy_options(device, learn))
    # the first observation through the API sets the clocks and bookkeeping as a run
    # does; the rest replace the data and the GP in the saved state
    policy.observe(points[0], float(times[0]), float(values[0]))
    state = policy.state_dict()
    gp = SpatioTemporalGP(
        policy.kernel, policy.hyperparameters, dtype=torch.float64, device=policy.device
    )
    x = torch.as_tensor(points, dtype=torch.float64)
    t = torch.as_tensor(times, dtype=torch.float64)
    y = torch.as_tensor(values, dtype=torch.float64)
    # the unit box is the box here, so the GP's inputs are the points and the times
    gp.set_data(torch.cat([x, t[:, None]], 1), y)
    state["data"] = {"x": x, "t": t, "y": y}
    state["gp"] = gp.state_dict()
    state["last_observe_time"] = float(times[-1])
    policy = on_device(state, device)
    for at in UNTIMED_AT:
        query = policy.suggest(at)
        policy.observe(query.x, at + 0.5, objective(query.x, at + 0.5))
    return policy.state_dict()


@contextlib.contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """Run the block with ``count`` torch intra-op threads, then restore the count."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def out_of_memory(err: BaseException) -> bool:
    """Whether ``err`` is an allocation failure (GPU or host), not a bug to raise."""
    if isinstance(err, (MemoryError, torch.cuda.OutOfMemoryError)):
        return True
    text = str(err).lower()
    return isinstance(err, RuntimeError) and ("out of memory" in text or "can't allocate" in text)


class TimeAllowance:
    """Which measurements fit, from what the same measurement took at smaller sizes.

    A measurement on the CPU must fit ``max_seconds`` (its warm-up and one timed run);
    every one, and the preparation, must fit the time left of ``total_seconds``. One run
    at n is predicted by a power law in n through the measurement's last two sizes, its
    exponent clamped to [1, 3] (a cubic from one size): the relevancies and the
    factorizations are O(n^3), the acquisition O(n^2) per evaluation, and a GPU's times
    grow more slowly than either while its kernels are too small to fill it.
    """

    def __init__(self, max_seconds: float, total_seconds: float) -> None:
        self.max_seconds = max_seconds
        self.total_seconds = total_seconds
        self.started = time.perf_counter()
        self._history: dict[str, list[tuple[int, float]]] = {}  # key -> (n, seconds)

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def predicted(self, key: str, n: int) -> tuple[float, float] | None:
        """Seconds of one run of ``key`` at ``n`` and the exponent used (``None`` before
        its first size)."""
        history = self._history.get(key)
        if not history:
            return None
        size, seconds = history[-1]
        exponent = 3.0
        if len(history) >= 2:
            before, earlier = history[-2]
            if before != size and earlier > 0 and seconds > 0:
                growth = math.log(seconds / earlier) / math.log(size / before)
                exponent = min(3.0, max(1.0, growth))
        return seconds * (n / size) ** exponent, exponent

    def refusal(self, key: str, n: int, runs: int = 2, capped: bool = True) -> str | None:
        """Why ``runs`` runs of ``key`` at ``n`` do not fit (``None``: they do);
        ``capped``: ``max_seconds`` applies (a measurement on the CPU)."""
        left = self.total_seconds - self.elapsed()
        if left <= 0:
            return f"--total-seconds {self.total_seconds:g} spent"
        prediction = self.predicted(key, n)
        if prediction is None:
            return None
        one, exponent = prediction
        how = f"predicted {one:.3g} s per run x {runs} (n^{exponent:.2f} from n = "
        how += f"{self._history[key][-1][0]})"
        if capped and runs * one > self.max_seconds:
            return f"{how} over --max-seconds {self.max_seconds:g}"
        if runs * one > left:
            return f"{how} over the {left:.0f} s left of --total-seconds"
        return None

    def record(self, key: str, n: int, seconds: float) -> None:
        self._history.setdefault(key, []).append((n, seconds))

    def repeats_that_fit(self, one: float, spent: float, wanted: int, capped: bool) -> int:
        """Timed repeats of ``one`` s each that fit after ``spent`` s (at least 1)."""
        room = self.total_seconds - self.elapsed()
        if capped:
            room = min(room, self.max_seconds - spent)
        return max(1, min(wanted, int(room // max(one, 1e-9))))


def timed_runs(
    setup: Callable[[], Any],
    work: Callable[[Any], Any],
    device: str,
    repeats: int,
    allowance: TimeAllowance,
    key: str,
    n: int,
) -> tuple[dict[str, Any], list[Any]]:
    """Time ``work(setup())`` after one untimed warm-up, synchronized on the device.

    Returns:
        ``(row, outputs)``: the row has ``seconds`` (median), ``seconds_min``,
        ``seconds_max``, ``repeats`` (those run, ``repeats_cut`` when fewer than asked),
        or ``skipped`` with the reason; ``outputs`` are ``work``'s results of the timed
        runs.
    """
    capped = torch.device(device).type == "cpu"
    refusal = allowance.refusal(key, n, capped=capped)
    if refusal is not None:
        return {"skipped": refusal}, []
    seconds: list[float] = []
    outputs: list[Any] = []
    runs = repeats + 1
    try:
        while len(seconds) < runs:
            subject = setup()
            synchronize(device)
            start = time.perf_counter()
            output = work(subject)
            synchronize(device)
            seconds.append(time.perf_counter() - start)
            outputs.append(output)
            if len(seconds) == 1:  # the warm-up, dearer than the rest: sizes the repeats
                runs = 1 + allowance.repeats_that_fit(seconds[0], seconds[0], repeats, capped)
    except Exception as err:  # noqa: BLE001 - only an allocation failure is a skip
        if not out_of_memory(err):
            raise
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        return {"skipped": f"out of memory on {device}: {str(err).splitlines()[0]}"}, []
    timed = seconds[1:]  # the first run is the warm-up (allocator, caches, lazy imports)
    allowance.record(key, n, statistics.median(timed))
    row: dict[str, Any] = {
        "seconds": statistics.median(timed),
        "seconds_min": min(timed),
        "seconds_max": max(timed),
        "warm_up_seconds": seconds[0],
        "repeats": len(timed),
    }
    if len(timed) < repeats:
        row["repeats_cut"] = f"{len(timed)} of {repeats} fit the time allowed"
    return row, outputs[1:]


def time_iteration(
    state: dict,
    device: str,
    repeats: int,
    allowance: TimeAllowance,
    key: str,
    n: int,
) -> dict[str, Any]:
    """The timed ``suggest(602)`` from ``state`` on ``device`` (:func:`timed_runs`'s row,
    with the policy's split, the size entering, the removals, the fit's likelihood
    evaluations and the query)."""

    def iterate(policy: Policy) -> tuple[int, Any, np.ndarray]:
        entering = policy.dataset_size
        query = policy.suggest(TIMED_AT)
        return entering, policy.diagnostics, np.asarray(query.x, dtype=float)

    row, outputs = timed_runs(
        lambda: on_device(state, device), iterate, device, repeats, allowance, key, n
    )
    if not outputs:
        return row
    entering, diagnostics, query = outputs[-1]
    splits = [d for _, d, _ in outputs]
    return {
        **row,
        "n": entering,
        "removed": int(diagnostics.removed),
        "cleaning_seconds": statistics.median(d.cleaning_seconds for d in splits),
        "acquisition_seconds": statistics.median(d.acquisition_seconds for d in splits),
        "fit_seconds": statistics.median(d.fit_seconds for d in splits),
        "fit_evaluations": int(diagnostics.fit_evaluations),
        "acquisition_evaluations": int(diagnostics.acquisition_evaluations),
        "query": query.tolist(),
    }


def time_fitted(
    prepared: dict[str, dict],
    args: argparse.Namespace,
    device: str,
    allowance: TimeAllowance,
    n: int,
) -> dict[str, Any]:
    """W-DBO's iteration with its fit on ``device``: the state of :func:`prepared_state`
    with ``learn=True`` (kept in ``prepared["wdbo_fit"]`` for the CPU pass; skipped with
    a note where its preparation does not fit the time left or the device's memory)."""
    refusal = allowance.refusal(f"fit-prepare@{device}", n, runs=1, capped=False)
    if refusal is not None:
        return {"skipped": f"preparing the state: {refusal}"}
    start = time.perf_counter()
    try:
        prepared["wdbo_fit"] = prepared_state(
            "wdbo", n - 2, args.dim, args.seed, device, learn=True
        )
    except Exception as err:  # noqa: BLE001 - only an allocation failure is a skip
        if not out_of_memory(err):
            raise
        return {"skipped": f"preparing the state: out of memory on {device}"}
    synchronize(device)
    seconds = time.perf_counter() - start
    allowance.record(f"fit-prepare@{device}", n, seconds)
    row = time_iteration(prepared["wdbo_fit"], device, args.repeats, allowance, f"fit@{device}", n)
    return {**row, "prepare_seconds": seconds}


def time_relevancies(
    state: dict, device: str, repeats: int, allowance: TimeAllowance, key: str, n: int
) -> tuple[dict[str, Any], torch.Tensor | None]:
    """All n relevancies of ``state``'s GP at 602 s on ``device``: the row and the values
    (on the CPU; ``None`` when skipped)."""
    gp = on_device(state, device).model
    row, outputs = timed_runs(
        lambda: gp,
        lambda model: WassersteinRelevancy.from_gp(model, TIMED_AT).relevancies(),
        device,
        repeats,
        allowance,
        key,
        n,
    )
    values = outputs[-1].cpu() if outputs else None
    return ({**row, "n": gp.n} if outputs else row), values


def relative_differences(values: torch.Tensor, reference: torch.Tensor) -> dict[str, float]:
    """``elementwise``: max ``|a - b| / |b|``; ``normwise``: max ``|a - b|`` / max ``|b|``."""
    a, b = values.to(torch.float64).cpu(), reference.to(torch.float64).cpu()
    gap = (a - b).abs()
    return {
        "elementwise": float((gap / b.abs().clamp_min(1e-300)).max()),
        "normwise": float(gap.max() / b.abs().max().clamp_min(1e-300)),
    }


def agreement(
    states: dict[str, dict],
    device: str,
    device_relevancies: torch.Tensor | None,
    allowance: TimeAllowance,
    n: int,
    seed: int,
) -> dict[str, Any]:
    """How far ``device`` is from the CPU (every core) on the same states, in float64.

    Per policy the posterior mean (``normwise``) and variance (``elementwise``) at
    :data:`AGREEMENT_POINTS` uniform points at 602 s; the relevancies of the ST-GP-UCB
    state's GP (both measures) when they were computed on ``device``.
    """
    dim = int(next(iter(states.values()))["data"]["x"].shape[1])
    points = np.random.default_rng(seed + 1).uniform(0.0, 1.0, (AGREEMENT_POINTS, dim))
    out: dict[str, Any] = {"points": AGREEMENT_POINTS}
    with torch_threads(os.cpu_count() or 1):
        for name, state in states.items():
            mean_device, var_device = on_device(state, device).predict(points, TIMED_AT)
            mean_cpu, var_cpu = on_device(state, "cpu").predict(points, TIMED_AT)
            out[name] = {
                "posterior_mean_max_rel_diff": relative_differences(
                    torch.as_tensor(mean_device), torch.as_tensor(mean_cpu)
                )["normwise"],
                "posterior_variance_max_rel_diff": relative_differences(
                    torch.as_tensor(var_device), torch.as_tensor(var_cpu)
                )["elementwise"],
            }
        if device_relevancies is None:
            out["relevancies"] = {"skipped": f"not computed on {device}"}
            return out
        refusal = allowance.refusal("relevancies@cpu-all-cores", n, runs=1)
        if refusal is not None:
            out["relevancies"] = {"skipped": refusal}
            return out
        start = time.perf_counter()
        gp = on_device(states["st-gp-ucb"], "cpu").model
        reference = WassersteinRelevancy.from_gp(gp, TIMED_AT).relevancies()
        allowance.record("relevancies@cpu-all-cores", n, time.perf_counter() - start)
    diff = relative_differences(device_relevancies, reference)
    out["relevancies"] = {
        "max_rel_diff": diff["elementwise"],
        "normwise_rel_diff": diff["normwise"],
    }
    return out


def write(report: dict[str, Any], out: Path | None) -> None:
    """Write the report so far to ``out`` (if given): a stopped run keeps its sizes."""
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")


def state_arguments(parser: argparse.ArgumentParser, sizes: list[int]) -> None:
    """The options of a script that times :func:`prepared_state`'s states (shared with
    ``removal_profile.py``, ``removal_compaction.py`` and ``removal_candidates.py``):
    ``--sizes`` (default ``sizes``), ``--dim``, ``--seed``, ``--repeats`` and ``--out``."""
    parser.add_argument("--sizes", type=int, nargs="+", default=sizes)
    parser.add_argument("--dim", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)


def parse_state_arguments(
    parser: argparse.ArgumentParser, argv: list[str] | None
) -> argparse.Namespace:
    """``parser``'s arguments, with those of :func:`state_arguments` checked."""
    args = parser.parse_args(argv)
    if min(args.sizes) < 4:
        parser.error("--sizes must be at least 4 (two observed, two prepared iterations)")
    if args.repeats < 1:
        parser.error("--repeats must be at least 1 (after the warm-up)")
    return args


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="torch device timed against the CPU")
    state_arguments(parser, [200, 1000, 5000, 10000])
    parser.add_argument("--max-seconds", type=float, default=60.0)
    parser.add_argument("--total-seconds", type=float, default=420.0)
    args = parse_state_arguments(parser, argv)
    device = str(torch.device(args.device))
    device_threads = (os.cpu_count() or 1) if torch.device(device).type == "cpu" else 1
    load_before = os.getloadavg()
    allowance = TimeAllowance(args.max_seconds, args.total_seconds)
    report: dict[str, Any] = {
        "benchmark": "gpu",
        **machine_record(1, load_before, device),
        "cpu_name": device_name("cpu"),
        "device_threads": device_threads,
        "command": " ".join(["python", "benchmarks/gpu.py", *sys.argv[1:]]),
        "dtype": "float64",
        "dim": args.dim,
        "policies": list(POLICIES),
        "hyperparameters": FIXED_HYPERPARAMETERS,
        "repeats": args.repeats,
        "max_seconds": args.max_seconds,
        "total_seconds": args.total_seconds,
        "sizes": [],
    }
    states: dict[int, dict[str, dict]] = {}
    cuda = torch.device(device).type == "cuda"

    # an untimed preparation at the smallest size first: the device's first use (context,
    # kernel loading, allocator) took 2.5 s of W-DBO's preparation at n = 200 on an H200,
    # and the cubic predicted from it refused every larger size
    start = time.perf_counter()
    with torch_threads(device_threads):
        for name in POLICIES:
            prepared_state(name, min(args.sizes) - 2, args.dim, args.seed, device)
    synchronize(device)
    report["warm_up_seconds"] = time.perf_counter() - start

    # pass 1: the device, and the agreement with the CPU, size by size
    for n in sorted(args.sizes):
        entry: dict[str, Any] = {"n": n}
        report["sizes"].append(entry)
        if cuda:
            torch.cuda.reset_peak_memory_stats(device)
        # the preparation is needed whatever it costs: only the time left limits it
        refusal = allowance.refusal(f"prepare@{device}", n, runs=1, capped=False)
        if refusal is not None:
            entry["skipped"] = f"preparing the states: {refusal}"
            write(report, args.out)
            continue
        prepared: dict[str, dict] = {}
        prepare_seconds: dict[str, float] = {}
        try:
            with torch_threads(device_threads):
                for name in POLICIES:
                    start = time.perf_counter()
                    prepared[name] = prepared_state(name, n - 2, args.dim, args.seed, device)
                    synchronize(device)
                    prepare_seconds[name] = time.perf_counter() - start
        except Exception as err:  # noqa: BLE001 - only an allocation failure is a skip
            if not out_of_memory(err):
                raise
            entry["skipped"] = f"preparing the states: out of memory on {device}"
            write(report, args.out)
            continue
        allowance.record(f"prepare@{device}", n, sum(prepare_seconds.values()))
        states[n] = prepared
        entry["prepare_seconds"] = prepare_seconds
        timings: dict[str, Any] = {}
        with torch_threads(device_threads):
            for name in POLICIES:
                timings[name] = time_iteration(
                    prepared[name], device, args.repeats, allowance, f"{name}@{device}", n
                )
            timings["relevancies"], relevancies = time_relevancies(
                prepared["st-gp-ucb"], device, args.repeats, allowance, f"rel@{device}", n
            )
            timings["wdbo_fit"] = time_fitted(prepared, args, device, allowance, n)
        entry["on_device"] = timings
        if cuda:
            entry["peak_gpu_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
        entry["agreement"] = agreement(prepared, device, relevancies, allowance, n, args.seed)
        write(report, args.out)

    # pass 2: one CPU thread, from the same states
    for entry in report["sizes"]:
        n = entry["n"]
        if n not in states:
            continue
        timings = {}
        with torch_threads(1):
            for name in POLICIES:
                timings[name] = time_iteration(
                    states[n][name], "cpu", args.repeats, allowance, f"{name}@cpu-1", n
                )
            timings["relevancies"], _ = time_relevancies(
                states[n]["st-gp-ucb"], "cpu", args.repeats, allowance, "rel@cpu-1", n
            )
            if "wdbo_fit" in states[n]:
                timings["wdbo_fit"] = time_iteration(
                    states[n]["wdbo_fit"], "cpu", args.repeats, allowance, "fit@cpu-1", n
                )
        entry["on_cpu_1_thread"] = timings
        speedup, queries = {}, {}
        for key, mine in entry["on_device"].items():
            theirs = timings[key]
            if "seconds" in mine and "seconds" in theirs:
                speedup[key] = theirs["seconds"] / mine["seconds"]
            if "query" in mine and "query" in theirs:
                gap = np.abs(np.subtract(mine["query"], theirs["query"])).max()
                queries[key] = float(gap)
        entry["speedup"] = speedup
        entry["agreement"]["query_max_abs_diff"] = queries
        write(report, args.out)
        del states[n]  # the largest states hold n x n factors

    report["load_average_1_5_15_min_after"] = [round(v, 2) for v in os.getloadavg()]
    report["elapsed_seconds"] = allowance.elapsed()
    write(report, args.out)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
