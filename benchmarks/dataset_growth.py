"""W-DBO and BOLT keep a bounded dataset; keep-everything GP-UCB does not (JSON + figure).

Runs three benchmarks of the ``bolt`` suite for 600 s under the modeled clock
(``R(n) = 0.05 + 2e-7 n^3`` s, BOLT's worked example, plus each benchmark's evaluation
cost) with W-DBO, BOLT and the same spatio-temporal GP-UCB without removal, stores the
iterations, prints per-run dataset sizes and response times (first and last 10 % of the
run), and draws dataset size and response time against time.

    python benchmarks/dataset_growth.py [--store results/growth.sqlite] [--workers 2]
        [--figure docs/figures/dataset_size.png] [--horizon 600]
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from dynbo.harness import Store, build_campaign, run_campaign
from dynbo.report.figures import dataset_size_figure

BENCHMARKS = [
    {"name": "eggholder", "options": {"dim": 1}},
    {"name": "hartmann3", "options": {"dim": 2}},
    {"name": "ackley", "options": {"dim": 3}},
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="results/growth.sqlite")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--figure", default="docs/figures/dataset_size.png")
    parser.add_argument("--horizon", type=float, default=600.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    config = {
        "name": "dataset-growth",
        "benchmarks": [
            {"name": b["name"], "options": {**b["options"], "horizon": args.horizon}}
            for b in BENCHMARKS
        ],
        "policies": ["wdbo", "bolt", "st-gp-ucb"],
        "seeds": [args.seed],
        "protocol": {"clock": "modeled", "response_time": [0.05, 0.0, 0.0, 2e-7]},
    }
    campaign = build_campaign(config)
    with Store(args.store) as store:
        run_campaign(campaign, store, workers=args.workers)
        frame = store.iterations_frame(campaign.campaign_id)
        runs = store.runs(campaign.campaign_id)
    loop = frame[frame["warmup"] == 0]
    summary = []
    for run in runs:
        rows = loop[loop["run_id"] == run["run_id"]]
        tail = rows[rows["t"] >= 0.9 * args.horizon]
        head = rows[rows["t"] <= 0.1 * args.horizon]
        summary.append(
            {
                "benchmark": run["label"],
                "policy": run["policy"],
                "status": run["status"],
                "queries": run["summary"]["queries"],
                "average_regret": run["summary"]["average_regret"],
                "max_dataset_size": run["summary"]["max_dataset_size"],
                "final_dataset_size": run["summary"]["final_dataset_size"],
                "response_time_first_10pct": float(np.mean(head["response_time"])),
                "response_time_last_10pct": float(np.mean(tail["response_time"]))
                if len(tail)
                else None,
                "dataset_size_last_10pct": float(np.mean(tail["dataset_size"]))
                if len(tail)
                else None,
            }
        )
    dataset_size_figure(
        frame, args.figure, title=f"{args.horizon:g} s, modeled clock R(n) = 0.05 + 2e-7 n^3 s"
    )
    print(
        json.dumps(
            {"benchmark": "dataset_growth", "figure": args.figure, "runs": summary}, indent=2
        )
    )


if __name__ == "__main__":
    main()
