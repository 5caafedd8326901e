"""ET-GP-UCB runs whose dataset collapses to one or two observations (JSON on stdout).

Reads a store (read-only) and, for every ET-GP-UCB run in it, finds the *collapse*: the
last reset after which the dataset never again holds more than 2 observations (none if
the run ends with more). Per run it writes the average regret, the number of resets, the
final and largest dataset size, and, from the collapse on, the steps left, the resets,
the distinct points queried, the median regret, and the median trigger value
``|y - mu(x)|`` and threshold ``kappa_t`` (``diagnostics.extra["trigger"]``), with the
model's outputscale and noise (standardized units) at the collapse. Without a
collapse the same fields over the run's last fifth are given for comparison.

    python benchmarks/et_collapse.py --store results/control-rerun.sqlite \
        --out docs/results/control_et_collapse.json
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np

from dynbo.harness.store import Store

POLICY = "et-gp-ucb"
#: a dataset of at most this many observations from some reset to the end is a collapse
COLLAPSED = 2


def collapse_step(sizes: list[int], resets: list[bool]) -> int | None:
    """Index of the last reset after which every dataset size is at most ``COLLAPSED``
    (``None``: the run ends with more, or never resets)."""
    if not sizes or sizes[-1] > COLLAPSED:
        return None
    start = None
    for i in range(len(sizes) - 1, -1, -1):
        if sizes[i] > COLLAPSED:
            break
        if resets[i]:
            start = i
    return start


def _summary(function, values: list[float]) -> float | None:
    """``function(values)`` as a float (``np.median``, ``np.mean``), ``None`` when empty."""
    return float(function(values)) if values else None


def describe(rows) -> dict:  # noqa: ANN001 - a DataFrame of one run, ordered by step
    sizes = rows["dataset_size"].astype(int).tolist()
    resets = rows["reset"].astype(bool).tolist()
    start = collapse_step(sizes, resets)
    window = rows.iloc[start:] if start is not None else rows.iloc[-max(1, len(rows) // 5) :]
    triggers = [json.loads(e).get("trigger") for e in window["extra"]]
    triggers = [t for t in triggers if t]
    points = {tuple(np.round(json.loads(x), 6)) for x in window["x"]}
    at = json.loads(window["hyperparameters"].iloc[0])
    return {
        "seed": int(rows["seed"].iloc[0]),
        "average_regret": float(rows["regret"].mean()),
        "resets": int(sum(resets)),
        "final_dataset_size": sizes[-1],
        "max_dataset_size": max(sizes),
        "collapsed": start is not None,
        "collapse_step": int(rows["k"].iloc[start]) if start is not None else None,
        "window": "from the collapse" if start is not None else "last fifth",
        "window_steps": len(window),
        "window_resets": int(window["reset"].astype(bool).sum()),
        "window_distinct_points": len(points),
        "window_median_regret": float(window["regret"].median()),
        "window_median_trigger_value": _summary(np.median, [t["value"] for t in triggers]),
        "window_median_trigger_threshold": _summary(np.median, [t["threshold"] for t in triggers]),
        "outputscale_at_window_start": at["outputscale"],
        "noise_at_window_start": at["noise"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with Store(args.store, read_only=True) as store:
        frame = store.iterations_frame()
    frame = frame[(frame["policy"] == POLICY) & ~frame["warmup"].astype(bool)]
    per_benchmark = {}
    for benchmark, runs in frame.groupby("benchmark", sort=True):
        described = [describe(rows.sort_values("k")) for _, rows in runs.groupby("seed", sort=True)]
        collapsed = [r for r in described if r["collapsed"]]
        others = [r for r in described if not r["collapsed"]]
        per_benchmark[benchmark] = {
            "runs": len(described),
            "collapsed_runs": len(collapsed),
            "collapsed_mean_regret": _summary(np.mean, [r["average_regret"] for r in collapsed]),
            "other_mean_regret": _summary(np.mean, [r["average_regret"] for r in others]),
            "per_run": described,
        }
    result = {
        "script": "benchmarks/et_collapse.py",
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"python": platform.python_version(), "processor": platform.machine()},
        "store": args.store,
        "policy": POLICY,
        "collapsed_means": f"the dataset holds at most {COLLAPSED} observations from some "
        "reset to the end of the run",
        "benchmarks": per_benchmark,
    }
    text = json.dumps(result, indent=1)
    with open(args.out, "w", encoding="utf-8") as handle:
        handle.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
