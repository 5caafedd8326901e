"""Suggestions within a deadline: how late ``suggest(t, budget=B)`` answers (JSON).

For each policy (``--policies``) and dataset size ``n`` (``--sizes``), the policy starts
from ``wdbo_iteration.prepared_state`` (``n`` observations of its drifting function in
``[0, 1]^d``, ``d = --dim``, over ``[0, 600]`` s, and two iterations), then makes
``--suggests`` suggestions with ``budget=B`` (``--budget``, default 0.05 s), one per
second, each answered (so ``n`` grows by one per suggestion when the policy keeps its
data; W-DBO removes what its criterion allows). The policies' default options are used.
Each suggestion's wall time is measured around the call; its *lateness* is the time
minus ``B``.

The promise (``Policy.suggest``): each loop stops within one unit of work after the
budget (a likelihood evaluation, an acquisition batch, a removal), with a fixed part on
top (a factorization, the first acquisition batch). The unit costs at each size are
measured from unbudgeted suggestions of the same state, repeated ``--unit-repeats``
times: one likelihood evaluation = ``fit_seconds / fit_evaluations``, one acquisition
batch = ``acquisition_seconds / acquisition_evaluations`` (medians). A suggestion counts
as *over* when its lateness exceeds the larger of the two.

Threads are pinned to one (``--threads``); one untimed budgeted suggestion warms each
state up. Wall times depend on the machine's load, recorded with the results.

    python benchmarks/deadline.py [--policies wdbo,st-gp-ucb] [--sizes 200,400,600,800]
        [--suggests 125] [--budget 0.05] [--output docs/results/deadline.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

# importing it pins the thread pools (from --threads) before NumPy and torch load
from wdbo_iteration import machine_record, objective, prepared_state  # isort: skip

import numpy as np  # noqa: E402

from dynbo.policies import Policy  # noqa: E402


def unit_costs(policy, t: float, repeats: int) -> dict[str, float]:
    """Median seconds of one likelihood evaluation and one acquisition batch, from
    unbudgeted suggestions of the same state (restored after each)."""
    state = policy.state_dict()
    evaluation, batch = [], []
    for _ in range(repeats):
        policy.suggest(t)
        diag = policy.diagnostics
        if diag.fit_evaluations:
            evaluation.append(diag.fit_seconds / diag.fit_evaluations)
        if diag.acquisition_evaluations:
            batch.append(diag.acquisition_seconds / diag.acquisition_evaluations)
        policy.load_state_dict(state)
    return {
        "likelihood_evaluation": statistics.median(evaluation) if evaluation else 0.0,
        "acquisition_batch": statistics.median(batch) if batch else 0.0,
    }


def measure(name: str, n: int, args: argparse.Namespace) -> dict:
    policy = Policy.from_state_dict(prepared_state(n, args.dim, seed=n, policy_name=name))
    rng = np.random.default_rng(n)
    t = 602.0
    costs = unit_costs(policy, t, args.unit_repeats)
    allowed = max(costs.values())
    policy.suggest(t, budget=args.budget)  # warm-up, answered below like the others
    query = policy.pending[-1]
    policy.observe(query[0], t, objective(query[0], t))
    lateness, sizes, cut = [], [], 0
    for _ in range(args.suggests):
        t += 1.0
        sizes.append(policy.dataset_size)
        start = time.perf_counter()
        query = policy.suggest(t, budget=args.budget)
        elapsed = time.perf_counter() - start
        lateness.append(elapsed - args.budget)
        cut += bool(policy.diagnostics.extra.get("time_budget", {}).get("spent_at"))
        x = np.asarray(query.x)
        policy.observe(x, t, objective(x, t) + 0.05 * rng.standard_normal())
    late = np.asarray(lateness)
    return {
        "policy": name,
        "n_start": n,
        "dataset_size": {"min": int(min(sizes)), "max": int(max(sizes))},
        "suggests": args.suggests,
        "cut_by_the_budget": cut,
        "unit_seconds": costs,
        "allowed_lateness_seconds": allowed,
        "over_budget_plus_one_unit": int(np.sum(late > allowed)),
        "over_budget": int(np.sum(late > 0)),
        "lateness_seconds": {
            "median": float(np.median(late)),
            "p95": float(np.quantile(late, 0.95)),
            "max": float(late.max()),
        },
        "seconds": {
            "median": float(np.median(late) + args.budget),
            "max": float(late.max() + args.budget),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default="wdbo,st-gp-ucb")
    parser.add_argument("--sizes", default="200,400,600,800")
    parser.add_argument("--suggests", type=int, default=125)
    parser.add_argument("--budget", type=float, default=0.05)
    parser.add_argument("--dim", type=int, default=3)
    parser.add_argument("--unit-repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output", default="docs/results/deadline.json")
    args = parser.parse_args()
    load_before = os.getloadavg()
    started = time.perf_counter()
    rows = [
        measure(name, int(n), args)
        for name in args.policies.split(",")
        for n in args.sizes.split(",")
    ]
    total = sum(r["suggests"] for r in rows)
    output = {
        "script": "benchmarks/deadline.py",
        "budget_seconds": args.budget,
        "dimension": args.dim,
        "suggests": total,
        "over_budget_plus_one_unit": sum(r["over_budget_plus_one_unit"] for r in rows),
        "over_budget": sum(r["over_budget"] for r in rows),
        "largest_lateness_seconds": max(r["lateness_seconds"]["max"] for r in rows),
        "rows": rows,
        "script_seconds": time.perf_counter() - started,
        "machine": machine_record(args.threads, load_before),
    }
    text = json.dumps(output, indent=2)
    print(text)
    if args.output:
        with open(args.output, "w") as handle:
            handle.write(text + "\n")


if __name__ == "__main__":
    main()
