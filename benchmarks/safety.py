"""Safety under drift: violation rates and regrets with and without constraints (JSON).

Two experiments (``docs/safety.md``), each a campaign of the harness (so violations are
counted as every run counts them: a query whose noise-free constraint values at
``(x_k, t_k)`` are below 0 for any constraint):

1. ``moving-hazard`` (an unsafe disc circling the domain; :mod:`dynbo.benchmarks.constrained`):
   each of ``--hazard-policies`` (default W-DBO, whose spatio-temporal GP makes the safe
   set shrink where nothing was confirmed lately, and GP-UCB, whose spatial GP keeps a
   point confirmed safe once safe for ever: SafeOpt's safe set) in ``"safe"`` mode with
   the default ``beta_c`` (seeded by the benchmark's four safe points, which are also the
   warm-up), and without constraints (warm-up: uniform points), ``--hazard-seeds`` seeds
   each, step clock (one query per step), ``T = --hazard-horizon`` steps (the disc
   circles twice, the peak once); W-DBO with each fallback, ``safe_fallback="seed"``
   (the default; the benchmark's seeds are safe at every time) and ``"confirmed"``.
   ``--hazard-first-seed 20`` repeats it on seeds apart from the first run's.
2. ``wlan-min-rate`` (W-DBO's WLAN size, 4 APs and 18 users, a minimum per-user rate of
   1 Mbit/s): W-DBO with the constraint in ``"feasibility"`` mode (no power setting is
   known to be safe at every time, which safe mode needs) and without, ``--wlan-seeds``
   seeds each, modeled clock ``R(n) = 0.5 s`` and ``c = 9.5 s`` (a query every 10 s over
   ``T = 600 s``), the benchmark's noise (``sigma^2 = 1.5``, constraint
   ``sigma^2 = 0.0025``), 15 warm-up points.

Both clocks replay exactly (no measured time). The store is resumable: rerun with the same
``--store`` to finish an interrupted experiment. Prints the JSON and writes it to
``--out``.

    python benchmarks/safety.py [--hazard-seeds 20] [--wlan-seeds 5] [--workers 1]
        [--store FILE] [--out docs/results/safety.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from dynbo.harness import Protocol, RunSpec, Store, run_campaign  # noqa: E402
from dynbo.harness.campaign import Campaign  # noqa: E402

HAZARD_HORIZON = 40.0
WLAN_HORIZON = 600.0
WLAN_OPTIONS = {"access_points": 4, "users": 18, "seed": 0, "min_rate": 1.0}


def _summary(values: list[float]) -> dict[str, float]:
    array = np.asarray(values, dtype=float)
    se = array.std(ddof=1) / np.sqrt(array.size) if array.size > 1 else float("nan")
    return {
        "mean": float(array.mean()),
        "se": float(se),
        "min": float(array.min()),
        "max": float(array.max()),
        "runs": int(array.size),
    }


def _specs(args: argparse.Namespace) -> list[tuple[str, str, RunSpec]]:
    """``(experiment, variant, spec)`` of every run."""
    hazard = Protocol(clock="step", horizon=args.hazard_horizon, warmup=4)
    wlan = Protocol(
        clock="modeled",
        horizon=args.wlan_horizon,
        warmup=15,
        response_time=(0.5, 0.0, 0.0, 0.0),
        cost=9.5,
    )
    # (benchmark, its options, policy, protocol, seeds, the constrained variant's mode)
    experiments = [
        ("moving-hazard", {}, policy, hazard, args.hazard_seeds, "safe")
        for policy in args.hazard_policies.split(",")
    ]
    experiments.append(
        ("wlan-min-rate", WLAN_OPTIONS, "wdbo", wlan, args.wlan_seeds, "feasibility")
    )
    out = []
    for benchmark, bench_options, policy, protocol, seeds, mode in experiments:
        variants = [(mode, {"constraint_mode": mode}), ("unconstrained", {})]
        if benchmark == "moving-hazard" and policy == "wdbo":
            # both fallbacks, each named (so that a run's id does not depend on which is
            # the default): the seeds (the default; safe at every time on this benchmark)
            # and the latest confirmed point
            variants = [
                ("safe", {"constraint_mode": mode, "safe_fallback": "seed"}),
                (
                    "safe confirmed-fallback",
                    {"constraint_mode": mode, "safe_fallback": "confirmed"},
                ),
                ("unconstrained", {}),
            ]
        first = args.hazard_first_seed if benchmark == "moving-hazard" else 0
        for seed in range(first, first + seeds):
            for mode_name, options in variants:
                # one variant per policy and mode on the hazard (two policies there)
                variant = mode_name if benchmark != "moving-hazard" else f"{policy} {mode_name}"
                spec = RunSpec(
                    benchmark=benchmark,
                    policy=policy,
                    seed=seed,
                    protocol=protocol,
                    benchmark_options=bench_options,
                    policy_options=options,
                    label=benchmark,
                )
                out.append((benchmark, variant, spec))
    return out


def _loop_records(store: Store, run_ids: list[str]) -> list[dict]:
    """The loop records of the runs: ``run_id``, ``k``, ``violation`` and the policy's
    ``extra["constraints"]`` diagnostics (``{}`` when it models none)."""
    from dynbo.harness.store import ITERATION_COLUMNS

    index = {name: i for i, name in enumerate(ITERATION_COLUMNS)}
    out = []
    for row in store.iteration_rows(run_ids):
        if row[index["warmup"]]:
            continue
        extra = json.loads(row[index["extra"]] or "{}")
        out.append(
            {
                "run_id": row[index["run_id"]],
                "k": row[index["k"]],
                "violation": row[index["violation"]],
                "constraints": extra.get("constraints") or {},
            }
        )
    return out


def _fallback_breakdown(records: list[dict]) -> dict[str, int]:
    """How many safe-mode queries were the fallback (empty safe set), and how many of
    those and of the others violated."""
    fallback = [r for r in records if r["constraints"].get("fallback") is not None]
    searched = [r for r in records if r["constraints"].get("fallback") is None]
    return {
        "fallback_queries": len(fallback),
        "fallback_violations": int(sum(r["violation"] for r in fallback)),
        "safe_set_queries": len(searched),
        "safe_set_violations": int(sum(r["violation"] for r in searched)),
    }


def _by_quarter(records: list[dict]) -> list[dict[str, int]]:
    """Queries and violations in each quarter of the runs' loops (``k`` over the run's
    number of queries), pooled over the runs: where in a run the violations happen."""
    length: dict[str, int] = {}
    for r in records:
        length[r["run_id"]] = max(length.get(r["run_id"], 0), r["k"])
    out = [{"queries": 0, "violations": 0} for _ in range(4)]
    for r in records:
        quarter = min(3, 4 * (r["k"] - 1) // length[r["run_id"]])
        out[quarter]["queries"] += 1
        out[quarter]["violations"] += int(r["violation"])
    return out


def _commit() -> str | None:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hazard-seeds", type=int, default=20)
    parser.add_argument(
        "--hazard-first-seed",
        type=int,
        default=0,
        help="the hazard's seeds are FIRST .. FIRST + N - 1 (a held-out check: e.g. 20)",
    )
    parser.add_argument("--hazard-horizon", type=float, default=HAZARD_HORIZON)
    parser.add_argument(
        "--hazard-policies", default="wdbo,gp-ucb", help="comma-separated policies (hazard)"
    )
    parser.add_argument("--wlan-seeds", type=int, default=5)
    parser.add_argument("--wlan-horizon", type=float, default=WLAN_HORIZON)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--store", default=None, help="SQLite store (default: a temporary file)")
    parser.add_argument("--out", default="docs/results/safety.json")
    args = parser.parse_args()
    runs = _specs(args)
    variant_of = {spec.run_id: (experiment, variant) for experiment, variant, spec in runs}
    config = {"name": "safety", "note": "benchmarks/safety.py"}
    campaign = Campaign(name="safety", specs=tuple(s for _, _, s in runs), config=config)
    path = args.store or os.path.join(tempfile.mkdtemp(), "safety.sqlite")
    started = time.perf_counter()
    with Store(path) as store:
        run_campaign(campaign, store, workers=args.workers, progress=sys.stderr.isatty())
        stored = store.runs(campaign.campaign_id)
        # the loop records' flags and what the policies said of their constraints
        records = _loop_records(store, [s.run_id for _, _, s in runs])
    safe = [r for r in records if " safe" in variant_of[r["run_id"]][1]]
    beta_c = next((r["constraints"]["beta_c"] for r in safe if r["constraints"]), None)
    elapsed = time.perf_counter() - started
    failed = [r for r in stored if r["status"] != "done"]
    if failed:
        raise SystemExit(f"{len(failed)} runs failed, e.g.: {failed[0]['error']}")
    per_variant: dict[tuple[str, str], list[dict]] = {}
    for run in stored:
        per_variant.setdefault(variant_of[run["run_id"]], []).append(run)
    results: dict[str, dict] = {}
    for (experiment, variant), group in sorted(per_variant.items()):
        group.sort(key=lambda r: r["seed"])
        summaries = [r["summary"] for r in group]
        results.setdefault(experiment, {})[variant] = {
            "policy": group[0]["policy"],
            "policy_options": group[0]["policy_options"],
            "violation_rate": _summary([s["violation_rate"] for s in summaries]),
            "violations_total": int(sum(s["violations"] for s in summaries)),
            "queries_total": int(sum(s["queries"] for s in summaries)),
            "runs_with_a_violation": int(sum(s["violations"] > 0 for s in summaries)),
            "warmup_violations_total": int(sum(s["warmup_violations"] for s in summaries)),
            "average_regret": _summary([s["average_regret"] for s in summaries]),
            "by_quarter_of_the_run": _by_quarter(
                [r for r in records if variant_of[r["run_id"]] == (experiment, variant)]
            ),
            "safe_mode_breakdown": (
                _fallback_breakdown(
                    [r for r in records if variant_of[r["run_id"]] == (experiment, variant)]
                )
                if "safe" in variant
                else None
            ),
            "per_seed": [
                {
                    "seed": r["seed"],
                    "queries": r["summary"]["queries"],
                    "violations": r["summary"]["violations"],
                    "violation_rate": r["summary"]["violation_rate"],
                    "average_regret": r["summary"]["average_regret"],
                }
                for r in group
            ],
        }
    for variants in results.values():
        # the pooled fraction over all queries of all seeds, the target quantity
        for entry in variants.values():
            entry["pooled_violation_fraction"] = entry["violations_total"] / entry["queries_total"]
    output = {
        "benchmark": "safety",
        "script": "benchmarks/safety.py",
        "commit": _commit(),
        "cpus_used": args.workers,
        # from the first run's start to the last run's end, as stored (a resumed or
        # re-aggregated campaign reports the time its runs took, not this process's)
        "wall_seconds": float(
            max(r["finished_at"] for r in stored)
            - min(r["finished_at"] - r["wall_seconds"] for r in stored)
        ),
        "this_process_seconds": elapsed,
        # what one core would take: the runs' own seconds, summed (with several workers
        # the wall time above is shorter)
        "run_seconds_total": float(sum(r["wall_seconds"] for r in stored)),
        "regret_definition": (
            "best feasible value at the query time minus f(x_k, t_k), noise-free; an "
            "infeasible query may score above the feasible optimum (negative regret)"
        ),
        "violation_definition": (
            "a loop query whose noise-free constraint values at (x_k, t_k) are below 0 for "
            "any constraint; warm-up points counted apart"
        ),
        "settings": {
            "moving-hazard": {
                "policies": args.hazard_policies.split(","),
                "clock": "step",
                "horizon_steps": args.hazard_horizon,
                "warmup": 4,
                "seeds": list(
                    range(args.hazard_first_seed, args.hazard_first_seed + args.hazard_seeds)
                ),
                "safe_mode_beta_c": beta_c,
                "safe_mode_beta_c_is": "the policy's default (no beta_c option given)",
                "benchmark_options": "defaults (noise variance 1e-3, constraint noise 1e-4)",
            },
            "wlan-min-rate": {
                "policy": "wdbo",
                "clock": "modeled",
                "response_time_seconds": 0.5,
                "cost_seconds": 9.5,
                "horizon_seconds": args.wlan_horizon,
                "warmup": 15,
                "seeds": args.wlan_seeds,
                "benchmark_options": WLAN_OPTIONS,
                "constraint_mode": "feasibility",
            },
        },
        "results": results,
    }
    text = json.dumps(output, indent=2, sort_keys=False)
    print(text)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(text + "\n")


if __name__ == "__main__":
    main()
