"""What the speed work buys under the measured clock: queries and regret before and after (JSON).

Issue 27 made W-DBO's and BOLT's iterations cheaper: the per-iteration fit
(``fit_strategy="warm-newton"``, the default, against the former ``"two-start"``) and
the removal loop in batches (``batched_removals = True``, the default, against the
paper's loop one removal at a time, which makes the same choices). Under the measured
clock the policy's computing advances the clock, so a cheaper iteration means more
queries in the same horizon. This script runs both versions of W-DBO and BOLT
("before": two-start fit and one removal at a time; "after": the defaults) on
``--benchmarks`` of the ``bolt`` suite (BOLT Table 2's noise and cost; by default one
cheap evaluation, ``c = 0.05`` s, one ``0.1`` s and one ``0.5`` s) x ``--seeds``
seeds, measured clock, ``T = --horizon`` s, one thread, in this one process, one run
after the other, the order of the two versions alternating from seed to seed, so that
both see the same machine and its load. It records per run the queries, the average
regret (noise-free, per query), the time-averaged regret and the mean response time, and
per benchmark and policy the paired differences (after - before) over seeds.

The paper's horizon is 600 s; a 600 s measured-clock run computes for up to 600 s, so
the default horizon is shorter (60 s: 60 runs take up to an hour). A shorter horizon
changes W-DBO's and BOLT's dataset sizes: the JSON says which horizon was used.

``--clock modeled`` is the control: under the modeled clock (the campaigns' ``R(n)``)
the computing advances nothing, so speed buys nothing by construction, and the
removal loop makes the same choices either way; what remains between the two versions
is the fit's own effect (the warm-started fit does not always end in the two-start
fit's basin, ``benchmarks/fit_speed.py``). ``--policies`` chooses the policies (any
policy takes ``fit_strategy``; the removal loop is W-DBO's and BOLT's).

    python benchmarks/what_it_buys.py [--seeds 5] [--horizon 60] [--clock measured]
        [--benchmarks ackley hartmann6 shekel] [--policies wdbo bolt]
        [--out docs/results/what_it_buys.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from dynbo.benchmarks.registry import suite  # noqa: E402
from dynbo.harness import Protocol, RunSpec  # noqa: E402
from dynbo.harness.campaign import DEFAULT_RESPONSE_TIME  # noqa: E402
from dynbo.harness.loop import execute  # noqa: E402
from dynbo.policies import available  # noqa: E402
from dynbo.policies.bolt import BOLT  # noqa: E402
from dynbo.policies.wdbo import WDBO  # noqa: E402

POLICIES = ("wdbo", "bolt")
VERSIONS = {
    # the fit option and the removal loop of each version
    "before": ({"fit_strategy": "two-start"}, False),
    "after": ({}, True),
}


def _run(spec: RunSpec, batched: bool) -> dict:
    WDBO.batched_removals = BOLT.batched_removals = batched
    try:
        result = execute(spec)
    finally:
        WDBO.batched_removals = BOLT.batched_removals = True
    if result.status != "done":
        raise SystemExit(f"run failed: {spec.policy} {spec.benchmark} {spec.seed}: {result.error}")
    summary = result.summary
    return {
        "queries": int(summary["queries"]),
        "average_regret": float(summary["average_regret"]),
        "time_averaged_regret": float(summary["time_averaged_regret"]),
        "mean_response_time": float(summary["mean_response_time"]),
        "max_dataset_size": int(summary["max_dataset_size"]),
        "wall_seconds": float(result.wall_seconds),
    }


def _mean_se(values: list[float]) -> dict[str, float]:
    array = np.asarray(values, dtype=float)
    se = float(array.std(ddof=1) / np.sqrt(array.size)) if array.size > 1 else float("nan")
    return {"mean": float(array.mean()), "se": se, "n": int(array.size)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--horizon", type=float, default=60.0)
    parser.add_argument("--benchmarks", nargs="+", default=["ackley", "hartmann6", "shekel"])
    parser.add_argument("--policies", nargs="+", default=list(POLICIES))
    parser.add_argument("--clock", choices=("measured", "modeled"), default="measured")
    parser.add_argument("--out", default="docs/results/what_it_buys.json")
    args = parser.parse_args()
    policies = args.policies
    unknown_policies = sorted(set(policies) - set(available()))
    if unknown_policies:
        parser.error(f"unknown policies: {unknown_policies}; choose from {available()}")
    torch.set_num_threads(1)
    entries = {e.label: e for e in suite("bolt").entries}
    unknown = sorted(set(args.benchmarks) - set(entries))
    if unknown:
        parser.error(f"not in the bolt suite: {unknown}; choose from {sorted(entries)}")
    if args.clock == "measured":
        protocol = Protocol(clock="measured", horizon=args.horizon, threads=1)
    else:
        protocol = Protocol(
            clock="modeled", response_time=DEFAULT_RESPONSE_TIME, horizon=args.horizon, threads=1
        )
    load_before = os.getloadavg()
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    started = time.perf_counter()
    runs = []
    for label in args.benchmarks:
        entry = entries[label]
        for policy in policies:
            for seed in range(args.seeds):
                order = list(VERSIONS) if seed % 2 == 0 else list(reversed(VERSIONS))
                for version in order:
                    options, batched = VERSIONS[version]
                    spec = RunSpec(
                        benchmark=entry.benchmark,
                        policy=policy,
                        seed=seed,
                        protocol=protocol,
                        benchmark_options={**entry.options, "horizon": args.horizon},
                        policy_options={**entry.policy_options.get(policy, {}), **options},
                        label=label,
                    )
                    record = {"benchmark": label, "policy": policy, "seed": seed}
                    record |= {"version": version, **_run(spec, batched)}
                    runs.append(record)
                    print(json.dumps(record), flush=True)
    paired = {}
    for label in args.benchmarks:
        for policy in policies:
            by = {
                (r["seed"], r["version"]): r
                for r in runs
                if r["benchmark"] == label and r["policy"] == policy
            }
            seeds = range(args.seeds)
            row = {}
            for key in ("queries", "average_regret", "time_averaged_regret", "mean_response_time"):
                before = [by[(s, "before")][key] for s in seeds]
                after = [by[(s, "after")][key] for s in seeds]
                row[key] = {
                    "before": _mean_se(before),
                    "after": _mean_se(after),
                    "after_minus_before": _mean_se([a - b for a, b in zip(after, before)]),
                }
            paired[f"{label} {policy}"] = row
    output = {
        "script": "benchmarks/what_it_buys.py",
        "commit": commit,
        "clock": args.clock,
        "response_time_coefficients": None if args.clock == "measured" else DEFAULT_RESPONSE_TIME,
        "policies": policies,
        "horizon_seconds": args.horizon,
        "seeds": args.seeds,
        "versions": {
            "before": "fit_strategy='two-start', removals one at a time (the paper's loop)",
            "after": "the defaults: fit_strategy='warm-newton', removals in batches",
        },
        "threads": 1,
        "cpus": os.cpu_count(),
        "load_average_before": list(load_before),
        "load_average_after": list(os.getloadavg()),
        "load_note": (
            "the two versions ran one after the other in one process, alternating, so they "
            "shared the machine's load; a load average near the CPU count means other work "
            "shared the cores and every response time is longer than on an idle machine"
        ),
        "script_seconds": time.perf_counter() - started,
        "paired": paired,
        "runs": runs,
    }
    text = json.dumps(output, indent=2)
    with open(args.out, "w") as handle:
        handle.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
