"""Does latency-aware acquisition lower W-DBO's and BOLT's average regret? (JSON)

W-DBO and BOLT, each with the papers' acquisition time (``acquisition_time="now"``)
and latency-aware (``"response"``: the acquisition is maximized at ``t + D_hat``,
``D_hat`` the policy's fitted delay), on three benchmarks of the ``bolt`` suite (BOLT
Table 2's noise and cost) under the measured clock, ``--seeds`` seeds each. Prints per
benchmark and policy the mean +- standard error over seeds of the average regret for
both modes and of the paired difference (response - now; negative: the option helps),
and, per seed, the difference relative to the benchmark's mean regret under "now"
averaged over the benchmarks (mean +- standard error over seeds).

The paper's horizon is 600 s; ``--horizon`` shortens it (a 600 s measured-clock run
takes up to 600 s of computation: 60 runs are 10 hours on one core). The store is
resumable: rerun with the same ``--store`` to finish an interrupted experiment.

    python benchmarks/latency_aware.py [--seeds 5] [--horizon 600] [--workers 2]
        [--benchmarks eggholder hartmann3 ackley] [--store FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from dynbo.benchmarks.registry import suite  # noqa: E402
from dynbo.harness import Store, build_campaign, run_campaign  # noqa: E402
from dynbo.harness.campaign import Campaign  # noqa: E402

POLICIES = ("wdbo", "bolt")
MODES = ("now", "response")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--horizon", type=float, default=600.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--benchmarks", nargs="+", default=["eggholder", "hartmann3", "ackley"])
    parser.add_argument("--store", default=None, help="SQLite store (default: a temporary file)")
    args = parser.parse_args()
    entries = {e.label: e for e in suite("bolt").entries}
    unknown = sorted(set(args.benchmarks) - set(entries))
    if unknown:
        parser.error(f"not in the bolt suite: {unknown}; choose from {sorted(entries)}")
    config = {
        "name": "latency-aware",
        "benchmarks": [
            {
                "name": entries[b].benchmark,
                "label": b,
                "options": {**entries[b].options, "horizon": args.horizon},
            }
            for b in args.benchmarks
        ],
        "policies": list(POLICIES),
        "seeds": args.seeds,
        "protocol": {"clock": "measured", "horizon": args.horizon},
    }
    base = build_campaign(config)
    specs, mode_of = [], {}
    for spec in base.specs:
        for mode in MODES:
            options = {} if mode == "now" else {"acquisition_time": "response"}
            variant = dataclasses.replace(spec, policy_options=options)
            mode_of[variant.run_id] = mode
            specs.append(variant)
    campaign = Campaign(name=base.name, specs=tuple(specs), config=config)
    path = args.store or os.path.join(tempfile.mkdtemp(), "latency.sqlite")
    with Store(path) as store:
        run_campaign(campaign, store, workers=args.workers, progress=sys.stderr.isatty())
        frame = store.iterations_frame(campaign.campaign_id)
    frame = frame[frame["warmup"] == 0].copy()
    frame["mode"] = frame["run_id"].map(mode_of)
    average = frame.groupby(["benchmark", "policy", "mode", "seed"])["regret"].mean()

    def summary(values: np.ndarray) -> dict[str, float]:
        se = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else float("nan")
        return {"mean": float(values.mean()), "se": float(se), "runs": int(len(values))}

    results: dict[str, dict] = {}
    overall: dict[str, dict[str, list]] = {}
    for bench in args.benchmarks:
        for policy in POLICIES:
            now = average.loc[(bench, policy, "now")]
            response = average.loc[(bench, policy, "response")]
            seeds = sorted(set(now.index) & set(response.index))
            diff = response.loc[seeds].to_numpy() - now.loc[seeds].to_numpy()
            results.setdefault(bench, {})[policy] = {
                "now": summary(now.to_numpy()),
                "response": summary(response.to_numpy()),
                "response_minus_now": summary(diff),
            }
            # benchmarks have different scales: the change relative to the mean of "now"
            # on that benchmark, per seed, then averaged over the benchmarks
            overall.setdefault(policy, {"relative": []})["relative"].append(
                diff / now.to_numpy().mean()
            )
    across = {
        policy: summary(np.mean(np.stack(v["relative"]), axis=0)) for policy, v in overall.items()
    }
    print(
        json.dumps(
            {
                "benchmark": "latency_aware_acquisition",
                "clock": "measured",
                "horizon_seconds": args.horizon,
                "seeds": args.seeds,
                "cpus": os.cpu_count(),
                "results": results,
                "relative_change_averaged_over_benchmarks": across,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
