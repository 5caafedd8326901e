"""ET-GP-UCB after a reset: do the kept hyperparameters keep their units? (JSON on stdout)

Runs the `bolt` suite's entries (BOLT Table 2 settings, T = 600 s) under the modeled clock
for ET-GP-UCB and GP-UCB (the reference it should be close to) and writes, per run, the
average regret, the number of resets, the dataset size after the first reset (its median
and largest value from then on) and the number of queries. Before the standardization kept
the hyperparameters' units, ET-GP-UCB on Powell (seed 0) reset 340 times and never held
more than 2 observations after its first trigger.

    python benchmarks/et_reset_units.py --benchmarks powell griewank --seeds 0 1 2 \
        --store results/bolt-table3-modeled.sqlite --out docs/results/et_reset_units.json

Any policy of the suite (or a reference player) runs the same way, e.g. Griewank at the
full horizon:

    python benchmarks/et_reset_units.py --benchmarks griewank \
        --policies gp-ucb wdbo random oracle-lag --seeds 0 1 --out docs/results/griewank_600s.json

The runs are those of ``benchmarks/reproduction_rerun.py bolt-table3 --clock modeled``
(the same identity): with ``--store``, a run that store already holds is read from it
instead of being run again.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import numpy as np

from dynbo.benchmarks.registry import suite
from dynbo.harness import Protocol, RunSpec, execute
from dynbo.harness.campaign import DEFAULT_RESPONSE_TIME
from dynbo.harness.store import ITERATION_COLUMNS, Store


def summarize(iterations: list[dict], summary: dict) -> dict:
    loop = [r for r in iterations if not r["warmup"]]
    tail = max(1, len(loop) // 5)
    resets = [r["k"] for r in loop if r.get("reset")]
    after = [r["dataset_size"] for r in loop if resets and r["k"] >= resets[0]]
    return {
        "queries": len(loop),
        "average_regret": summary["average_regret"],
        "time_averaged_regret": summary["time_averaged_regret"],
        "resets": len(resets),
        "first_reset_iteration": resets[0] if resets else None,
        "median_size_after_first_reset": float(np.median(after)) if after else None,
        "max_size_after_first_reset": max(after) if after else None,
        "final_dataset_size": summary["final_dataset_size"],
        # where the queries went and what the model believed at the end
        "median_regret_last_fifth": float(np.median([r["regret"] for r in loop[-tail:]]))
        if loop
        else None,
        "largest_abs_coordinate_last_fifth": float(
            np.median([np.abs(json.loads(r["x"])).max() for r in loop[-tail:]])
        )
        if loop
        else None,
        "final_hyperparameters": json.loads(loop[-1]["hyperparameters"])
        if loop and loop[-1].get("hyperparameters")
        else None,
    }


def stored(store: Store | None, spec: RunSpec) -> tuple[list[dict], dict] | None:
    """The iterations and summary of ``spec``'s run if ``store`` holds it finished."""
    if store is None or spec.run_id not in store.completed_run_ids():
        return None
    run = next(r for r in store.runs() if r["run_id"] == spec.run_id)
    rows = store.iteration_rows([spec.run_id])
    iterations = [dict(zip(ITERATION_COLUMNS, row)) for row in rows]
    return iterations, run["summary"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", nargs="+", default=["powell"])
    parser.add_argument("--policies", nargs="+", default=["et-gp-ucb", "gp-ucb"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--store", help="read the runs this result store holds")
    parser.add_argument("--out", help="write the JSON here too")
    args = parser.parse_args()
    entries = {e.label or e.benchmark: e for e in suite("bolt").entries}
    protocol = Protocol(clock="modeled", response_time=DEFAULT_RESPONSE_TIME, warmup=15)
    runs = []
    store = Store(args.store, read_only=True) if args.store else None
    for label in args.benchmarks:
        entry = entries[label]
        for policy in args.policies:
            for seed in args.seeds:
                spec = RunSpec(
                    benchmark=entry.benchmark,
                    policy=policy,
                    seed=seed,
                    protocol=protocol,
                    benchmark_options=dict(entry.options),
                    policy_options=dict(entry.policy_options.get(policy, {})),
                    label=label,
                )
                row = {"benchmark": label, "policy": policy, "seed": seed}
                found = stored(store, spec)
                if found is None:
                    result = execute(spec)
                    found = (result.iterations, result.summary)
                    row["status"] = result.status
                row.update(summarize(*found))
                runs.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    out = {
        "script": "benchmarks/et_reset_units.py",
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"python": platform.python_version(), "processor": platform.machine()},
        "protocol": protocol.as_dict(),
        "runs": runs,
    }
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")


if __name__ == "__main__":
    main()
