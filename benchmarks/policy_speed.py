"""Seconds per iteration of every policy at dataset sizes 50, 200, 800 (JSON).

For each policy, size n and state, the policy observes n points of a drifting test
function spread over [0, 600] s (its default options, except one common ``beta`` and that
the policies that drop data are set to hold n: a window above n for SW-GP-UCB, no restart
or reset within the run for BR-/R-GP-UCB (a fixed block) and ET-GP-UCB; see
``options_holding``), runs two untimed iterations, and then times one iteration
(``suggest``: fit, cleaning, acquisition) ``--repeats`` times from the same saved state
after one warm-up repeat. Threads are pinned before NumPy and torch load; the load
average is recorded.

A state is one draw of the data (``--states`` seeds from ``--seed``). How many steps the
optimizers take depends on the draw much more than on the policy: a spatial model that
ignores the drift puts its lengthscale at the floor in some states, and L-BFGS-B then
crawls along the ridges of a rugged UCB for 5-15 times the steps of another state. One
state per policy compares those draws; the comparison here is on the median over the
states of each state's median time (``median_iteration_seconds``), with every state's row
kept in ``results``; ``median_paired_ratio`` is the median over the states of the
policy's time over ST-GP-UCB's on the same state. The states are measured one after
another, every policy in turn on each, so that a drift of the machine's speed over the
run reaches every policy alike. ``slower_than_st_gp_ucb`` lists the policies whose
median exceeds keep-everything ST-GP-UCB's at the same size (W-DBO and BOLT spend extra
time on their removals by design; the baselines should not), with the medians of their
optimizer step counts and per-step costs against ST-GP-UCB's, which say where the time
went.

``--device cuda`` puts every policy's model on the GPU (threads stay pinned for the host
side; each timed ``suggest`` is bracketed by ``torch.cuda.synchronize()``, see
``wdbo_iteration.py``); the JSON names the device (``device_name``).

    python benchmarks/policy_speed.py [--sizes 50 200 800] [--states 5] [--repeats 1]
        [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

# importing it pins the thread pools (from --threads) before NumPy and torch load
from wdbo_iteration import machine_record, measure  # isort: skip

import torch  # noqa: E402

from dynbo.policies import available  # noqa: E402


def options_holding(name: str, n: int) -> dict:
    """Options under which the policy keeps the n points it is given, under one beta.

    Every policy uses the W-DBO/BOLT comparisons' ``beta = 0.2 d log(2n)``: the schedule
    changes the UCB landscape and with it the number of L-BFGS steps of the acquisition
    (the kernel-ridge radius makes it 3-8x slower at n = 50), which is a property of the
    schedule, not of the policy's bookkeeping that this script compares.
    """
    return {
        "beta": "dataset_size",
        **{
            "sw-gp-ucb": {"window": n + 10},
            "br-gp-ucb": {"restart_every": 10**6},
            "r-gp-ucb": {"reset_every": 10**6},
            "et-gp-ucb": {"delta_B": 1e-300},  # a threshold no observation exceeds
            # UI-TVBO takes the known noise variance: the data's (noise sd 0.05)
            "ui-tvbo": {"noise_variance": 0.05**2},
        }.get(name, {}),
    }


SUMMARIZED = (
    "iteration_seconds",
    "fit_seconds",
    "acquisition_seconds",
    "fit_evaluations",
    "acquisition_evaluations",
    "fit_milliseconds_per_evaluation",
    "acquisition_milliseconds_per_evaluation",
)


def summarize(rows: list[dict]) -> dict:
    """Medians over the states of one policy at one size (``None`` where a value is)."""
    out: dict = {"policy": rows[0]["policy"], "n": rows[0]["n"], "states": len(rows)}
    for key in SUMMARIZED:
        values = [r[key] for r in rows if r.get(key) is not None]
        out[f"median_{key}"] = statistics.median(values) if values else None
    return out


def state_arguments(description: str, sizes: list[int], states: int) -> argparse.ArgumentParser:
    """The command line of the scripts that run policies on data states: sizes, policies,
    dimension, number of states, threads and the first state's seed (shared with
    ``acquisition_pruning.py``)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--sizes", type=int, nargs="+", default=sizes)
    parser.add_argument("--policies", nargs="+", default=None)
    parser.add_argument("--dim", type=int, default=2)
    parser.add_argument("--states", type=int, default=states)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    return parser


def main() -> None:
    parser = state_arguments(__doc__.splitlines()[0], [50, 200, 800], 5)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="torch device: cpu, cuda, cuda:1 ...")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    names = args.policies or available()
    rows, summaries = [], []
    for n in args.sizes:
        # state by state, every policy in turn: a slow drift of the machine's speed (heat,
        # other work) then reaches every policy alike instead of the ones measured last
        per_policy: dict[str, list[dict]] = {name: [] for name in names}
        for seed in range(args.seed, args.seed + args.states):
            for name in names:
                row = measure(
                    n - 2,
                    args.dim,
                    args.repeats,
                    seed,
                    name,
                    options_holding(name, n),
                    device=args.device,
                )
                per_policy[name].append({"policy": name, "seed": seed, **row})
        for name in names:
            rows.extend(per_policy[name])
            summary = summarize(per_policy[name])
            if "st-gp-ucb" in per_policy:
                # the same data state, measured minutes apart at most
                summary["median_paired_ratio"] = statistics.median(
                    mine["iteration_seconds"] / theirs["iteration_seconds"]
                    for mine, theirs in zip(per_policy[name], per_policy["st-gp-ucb"])
                )
            summaries.append(summary)
    reference = {r["n"]: r for r in summaries if r["policy"] == "st-gp-ucb"}

    def ratio(row: dict, key: str) -> float | None:
        mine, theirs = row.get(f"median_{key}"), reference[row["n"]].get(f"median_{key}")
        return None if not mine or not theirs else round(mine / theirs, 3)

    slower = [
        {
            "policy": r["policy"],
            "n": r["n"],
            "ratio": ratio(r, "iteration_seconds"),
            "median_paired_ratio": r.get("median_paired_ratio"),
            # a slow iteration either takes more optimizer steps or dearer ones
            "fit_evaluations_ratio": ratio(r, "fit_evaluations"),
            "fit_cost_per_evaluation_ratio": ratio(r, "fit_milliseconds_per_evaluation"),
            "acquisition_evaluations_ratio": ratio(r, "acquisition_evaluations"),
            "acquisition_cost_per_evaluation_ratio": ratio(
                r, "acquisition_milliseconds_per_evaluation"
            ),
        }
        for r in summaries
        if r["n"] in reference
        and r["policy"] not in ("st-gp-ucb", "wdbo", "bolt")
        and r["median_iteration_seconds"] > reference[r["n"]]["median_iteration_seconds"]
    ]
    print(
        json.dumps(
            {
                "benchmark": "policy_speed",
                **machine_record(args.threads, load_before, args.device),
                "dim": args.dim,
                "states": args.states,
                "repeats": args.repeats,
                "summary": summaries,
                "slower_than_st_gp_ucb": slower,
                "results": rows,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
