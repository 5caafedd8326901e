"""W-DBO with 1, 2 and 4 simulated devices on three ``bolt``-suite benchmarks (JSON).

One W-DBO policy keeps ``q`` devices busy (``Protocol.devices``, the event simulation of
``dynbo.harness.devices``) under the modeled clock, ``R(n) = 0.05 + 2e-7 n^3`` s (the
harness's default model, BOLT's worked example), so that every run replays exactly on
any machine. Benchmarks: ``hartmann3`` (d = 2, c = 1 s), ``powell`` (d = 3, c = 1 s) and
``eggholder`` (d = 1, c = 0.05 s) with the suite's noise variances and costs (BOLT Table
2): the suite's two synthetic functions with the costliest evaluations, hence the fewest
queries to compute, and the lowest-dimensional of those whose cost (0.05 s) is no longer
than the policy's shortest response, where a device waits for the policy rather than the
reverse (about ``1 + c / D`` devices keep busy).

Horizon: ``T = 60`` s instead of the suite's 600 s, so that the 46 runs take under half
an hour on one core (``script_wall_seconds`` in the JSON: 1410 s on a shared 2-core
machine, one thread per run). This does change W-DBO's regime: the benchmark's time axis is mapped
onto ``[0, T]``, so the function changes ten times faster per second while ``c`` and
``R(n)`` stay as they are, which is the 600 s protocol with evaluations and responses ten
times slower (one device then makes about a tenth of the queries per change of the
function). The JSON's ``horizon_check`` runs hartmann3 with one device at both horizons
(one seed) to show how much.

Per run: queries (and per device), average regret (per query, at its landing time),
time-averaged regret (per device, held until that device's next landing: docs/harness.md,
"Several devices"), dataset sizes, mean response time. Runs go to a result store first
(``--store``), so an interrupted script resumes where it stopped.

    nice python benchmarks/devices.py [--seeds 5] [--horizon 60] [--store results/devices.sqlite]
        [--out docs/results/devices.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from dynbo.benchmarks import suite
from dynbo.harness import Store, build_campaign, run_campaign

POLICY = "wdbo"
BENCHMARKS = ("hartmann3", "powell", "eggholder")
DEVICES = (1, 2, 4)
#: R(n) = 0.05 + 2e-7 n^3 s: the harness's default modeled clock
RESPONSE_TIME = (0.05, 0.0, 0.0, 2e-7)
FULL_HORIZON = 600.0


def entries(horizon: float) -> list[dict[str, Any]]:
    """The chosen ``bolt`` entries as campaign benchmark entries with horizon ``T``."""
    chosen = {entry.label: entry for entry in suite("bolt").entries}
    return [
        {
            "name": chosen[label].benchmark,
            "options": {**chosen[label].options, "horizon": horizon},
            "label": label,
        }
        for label in BENCHMARKS
    ]


def campaign_config(
    name: str, benchmarks: list[dict[str, Any]], seeds: list[int], horizon: float, devices: int
) -> dict[str, Any]:
    """A campaign of W-DBO on ``benchmarks`` with ``devices`` devices (modeled clock)."""
    return {
        "name": name,
        "benchmarks": benchmarks,
        "policies": [POLICY],
        "seeds": seeds,
        "protocol": {
            "clock": "modeled",
            "horizon": horizon,
            "response_time": list(RESPONSE_TIME),
            "devices": devices,
        },
    }


def run_rows(store: Store, run_ids: set[str]) -> list[dict[str, Any]]:
    """One row per stored run of ``run_ids``: its summary and queries per device."""
    frame = store.iterations_frame()
    frame = frame[(frame["warmup"] == 0) & frame["run_id"].isin(run_ids)]
    per_device: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for run_id, extra in zip(frame["run_id"], frame["extra"]):
        per_device[run_id][int(json.loads(extra).get("device", 0))] += 1
    rows = []
    for run in store.runs():
        if run["run_id"] not in run_ids:
            continue
        if run["status"] != "done":
            raise RuntimeError(f"run {run['run_id']} failed: {run['error']}")
        summary, protocol = run["summary"], run["protocol"]
        devices = int(protocol.get("devices", 1))
        counts = per_device[run["run_id"]]
        rows.append(
            {
                "benchmark": run["label"],
                "devices": devices,
                "horizon": float(protocol["horizon"]),
                "seed": int(run["seed"]),
                "queries": int(summary["queries"]),
                "queries_per_device": [counts.get(j, 0) for j in range(devices)],
                "average_regret": summary["average_regret"],
                "time_averaged_regret": summary["time_averaged_regret"],
                "mean_response_time": summary["mean_response_time"],
                "max_dataset_size": summary["max_dataset_size"],
                "final_dataset_size": summary["final_dataset_size"],
                "wall_seconds": run["wall_seconds"],
            }
        )
    return sorted(rows, key=lambda r: (BENCHMARKS.index(r["benchmark"]), r["devices"], r["seed"]))


def mean_se(values: list[float]) -> tuple[float, float]:
    """Mean and standard error (``ddof = 1``) of ``values``."""
    array = np.asarray(values, dtype=float)
    se = float(array.std(ddof=1) / math.sqrt(array.size)) if array.size > 1 else float("nan")
    return float(array.mean()), se


def table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per benchmark and device count: means and standard errors over seeds, and the
    comparison with one device seed by seed (same seed: same warm-up and noise stream)."""
    by_key = defaultdict(list)
    for row in rows:
        by_key[(row["benchmark"], row["devices"])].append(row)
    out = []
    for (bench, devices), group in sorted(
        by_key.items(), key=lambda kv: (BENCHMARKS.index(kv[0][0]), kv[0][1])
    ):
        one = {r["seed"]: r for r in by_key[(bench, 1)]}
        entry: dict[str, Any] = {"benchmark": bench, "devices": devices, "seeds": len(group)}
        for metric in (
            "queries",
            "average_regret",
            "time_averaged_regret",
            "mean_response_time",
            "max_dataset_size",
        ):
            entry[f"{metric}_mean"], entry[f"{metric}_se"] = mean_se([r[metric] for r in group])
        paired = [r for r in group if r["seed"] in one]
        entry["queries_ratio_to_one_device"] = float(
            np.mean([r["queries"] / one[r["seed"]]["queries"] for r in paired])
        )
        for metric in ("average_regret", "time_averaged_regret"):
            entry[f"{metric}_ratio_to_one_device"] = float(
                np.mean([r[metric] / one[r["seed"]][metric] for r in paired])
            )
            entry[f"seeds_{metric}_below_one_device"] = sum(
                r[metric] < one[r["seed"]][metric] for r in paired
            )
        entry["devices_used_mean"] = float(
            np.mean([sum(1 for c in r["queries_per_device"] if c > 0) for r in group])
        )
        out.append(entry)
    return out


def main() -> None:
    """Run (or resume) the campaigns into the store and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--horizon", type=float, default=60.0)
    parser.add_argument("--store", default="results/devices.sqlite")
    parser.add_argument("--out", default="docs/results/devices.json")
    parser.add_argument(
        "--no-horizon-check", action="store_true", help="skip the one-seed T = 600 s run"
    )
    args = parser.parse_args()
    seeds = list(range(args.seeds))
    Path(args.store).parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    campaigns = [
        build_campaign(
            campaign_config(f"devices-{q}", entries(args.horizon), seeds, args.horizon, q)
        )
        for q in DEVICES
    ]
    check = None
    if not args.no_horizon_check:
        check = build_campaign(
            campaign_config(
                "devices-horizon-check",
                [e for e in entries(FULL_HORIZON) if e["label"] == BENCHMARKS[0]],
                [0],
                FULL_HORIZON,
                1,
            )
        )
    with Store(args.store) as store:
        for campaign in campaigns + ([check] if check is not None else []):
            outcome = run_campaign(campaign, store, progress=False)
            print(f"{campaign.name}: {outcome.done} run, {outcome.skipped} stored", flush=True)
        rows = run_rows(store, {s.run_id for c in campaigns for s in c.specs})
        check_rows = run_rows(store, {s.run_id for s in check.specs}) if check else []
    result: dict[str, Any] = {
        "what": "W-DBO with 1, 2 and 4 simulated devices (Protocol.devices), modeled clock",
        "command": "nice python benchmarks/devices.py "
        f"--seeds {args.seeds} --horizon {args.horizon:g}",
        "policy": POLICY,
        "policy_options": {},
        "clock": "modeled",
        "response_time": list(RESPONSE_TIME),
        "horizon": args.horizon,
        "seeds": seeds,
        "devices": list(DEVICES),
        "benchmarks": [
            {"label": e["label"], "name": e["name"], **e["options"]} for e in entries(args.horizon)
        ],
        "table": table(rows),
        "runs": rows,
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "threads_per_run": 1,
        },
        "script_wall_seconds": time.perf_counter() - started,
    }
    if check_rows:
        short = [
            r
            for r in rows
            if r["benchmark"] == BENCHMARKS[0] and r["devices"] == 1 and r["seed"] == 0
        ]
        result["horizon_check"] = {
            "what": f"{BENCHMARKS[0]}, one device, seed 0, at T = {FULL_HORIZON:g} s and "
            f"T = {args.horizon:g} s",
            "runs": check_rows + short,
        }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out} ({time.perf_counter() - started:.0f} s)")
    for entry in result["table"]:
        print(
            f"{entry['benchmark']:10s} q={entry['devices']}  queries {entry['queries_mean']:7.1f}"
            f"  avg regret {entry['average_regret_mean']:.4g} +- {entry['average_regret_se']:.2g}"
            f"  time-avg {entry['time_averaged_regret_mean']:.4g}"
            f" +- {entry['time_averaged_regret_se']:.2g}"
        )


if __name__ == "__main__":
    main()
