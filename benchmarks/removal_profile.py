"""Where a W-DBO iteration's time goes on a device: the removal loop's kernels (JSON).

For each ``--sizes`` n, the W-DBO state of ``gpu.py`` (:func:`gpu.prepared_state`,
fixed hyperparameters) on ``--device``, then ``suggest(602)`` from that state:

- ``seconds``: wall time of one iteration (after one untimed warm-up), with the
  removal steps replayed from a CUDA graph of one step (the default) and with every
  step run eagerly (``eager_seconds``), each the median of ``--repeats``; ``captures``:
  the graphs captured in one iteration (one per storage size: a compaction moves the
  storage);
- ``profile``: one more iteration under ``torch.profiler``: the device kernels that took
  the most time (name, calls, total milliseconds), the sum over all kernels
  (``kernel_ms``, against the profiled iteration's wall ``profiled_ms``: a loop whose
  kernels sum to much less than its wall time is bound by the host), and the host
  operations with the most self time.

It measures one iteration, not a distribution: it says what to speed up next, and
``gpu.py`` is the benchmark of record. On a CPU it runs as a smoke check (no graphs,
no device kernels).

    python benchmarks/removal_profile.py [--device cuda] [--sizes 1000 10000]
        [--repeats 3] [--top 15] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu import (  # noqa: E402
    TIMED_AT,
    on_device,
    parse_state_arguments,
    prepared_state,
    state_arguments,
)

from dynbo.relevancy import criterion  # noqa: E402


def synchronize(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def timed(state: dict, device: str, repeats: int) -> tuple[list[float], Any]:
    """Wall seconds of ``repeats`` iterations from ``state`` after one warm-up."""
    seconds = []
    diagnostics = None
    for _ in range(repeats + 1):
        policy = on_device(state, device)
        synchronize(device)
        start = time.perf_counter()
        policy.suggest(TIMED_AT)
        synchronize(device)
        seconds.append(time.perf_counter() - start)
        diagnostics = policy.diagnostics
    return seconds[1:], diagnostics


def profiled(state: dict, device: str, top: int) -> dict[str, Any]:
    """One iteration under torch.profiler: the costliest kernels and host operations."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    cuda = torch.device(device).type == "cuda"
    if cuda:
        activities.append(ProfilerActivity.CUDA)
    policy = on_device(state, device)
    synchronize(device)
    start = time.perf_counter()
    with profile(activities=activities) as prof:
        policy.suggest(TIMED_AT)
        synchronize(device)
    wall = time.perf_counter() - start
    kernels: dict[str, list[float]] = {}
    for event in prof.events():
        if cuda and event.device_type == torch.autograd.DeviceType.CUDA:
            row = kernels.setdefault(event.name, [0, 0.0])
            row[0] += 1
            row[1] += event.device_time_total / 1e3  # microseconds -> ms
    averages = prof.key_averages()
    host = sorted(averages, key=lambda e: e.self_cpu_time_total, reverse=True)[:top]
    return {
        "profiled_ms": wall * 1e3,
        "kernel_ms": sum(ms for _, ms in kernels.values()),
        "kernel_launches": int(sum(calls for calls, _ in kernels.values())),
        "kernels": [
            {"name": name[:120], "calls": int(calls), "ms": ms}
            for name, (calls, ms) in sorted(kernels.items(), key=lambda kv: -kv[1][1])[:top]
        ],
        "host": [
            {"name": e.key[:120], "calls": e.count, "self_ms": e.self_cpu_time_total / 1e3}
            for e in host
        ],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    state_arguments(parser, [1000, 10000])
    parser.add_argument("--top", type=int, default=15)
    args = parse_state_arguments(parser, argv)
    torch.set_default_dtype(torch.float64)
    captures = []
    capture = criterion._capture

    def counted(batch):
        captures.append(batch._relevancy._PQ.shape[1])
        return capture(batch)

    criterion._capture = counted
    report: dict[str, Any] = {
        "benchmark": "removal_profile",
        "device": args.device,
        "device_name": (
            torch.cuda.get_device_name(args.device)
            if torch.device(args.device).type == "cuda"
            else "cpu"
        ),
        "torch": torch.__version__,
        "command": " ".join(sys.argv),
        "sizes": [],
    }
    # the device's first use (context, kernel loading) outside every measurement
    prepared_state("wdbo", min(args.sizes) - 2, args.dim, args.seed, args.device)
    for n in args.sizes:
        state = prepared_state("wdbo", n - 2, args.dim, args.seed, args.device)
        captures.clear()
        seconds, diagnostics = timed(state, args.device, args.repeats)
        per_iteration = len(captures) // (args.repeats + 1)
        supported = criterion._graphs_supported
        criterion._graphs_supported = lambda device: False
        try:
            eager, _ = timed(state, args.device, args.repeats)
        finally:
            criterion._graphs_supported = supported
        report["sizes"].append(
            {
                "n": n,
                "removed": int(diagnostics.removed),
                "seconds": statistics.median(seconds),
                "cleaning_seconds": diagnostics.cleaning_seconds,
                "eager_seconds": statistics.median(eager),
                "captures": per_iteration,
                "profile": profiled(state, args.device, args.top),
            }
        )
        text = json.dumps(report, indent=2)
        if args.out is not None:
            args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
