"""Suggestions within a deadline: how late ``suggest(t, budget=B)`` answers (JSON).

For each policy (``--policies``) and starting dataset size ``n`` (``--sizes``), the
policy starts from ``wdbo_iteration.prepared_state`` (``n`` observations of its drifting
function in ``[0, 1]^d``, ``d = --dim``, over ``[0, 600]`` s, and two iterations), makes
one budgeted suggestion that is not counted (the policy's first: it has measured no unit
of work yet, so nothing it does can be predicted; reported apart), then ``--suggests``
suggestions with ``budget=B`` (``--budget``, default 0.05 s), one per second, each
answered (so ``n`` grows by one per suggestion when the policy keeps its data; W-DBO
removes what its criterion allows and the budget leaves time for). The policies' default
options are used. Each suggestion's wall time is measured around the call; its
*lateness* is that time minus ``B``.

The promise (``Policy.suggest``): no unit of work starts when its expected cost would
take the call past the budget, so a suggestion is late by at most one unit that took
longer than expected. A *unit* is one piece of work between two budget checks, measured
by the budget itself in that suggestion (``diagnostics.extra["time_budget"]
["largest_unit_seconds"]``, the longest unit of each kind: a likelihood evaluation, the
likelihood's setup, the relevancy criterion, a removal, applying the removals, the
acquisition's setup, a raw-sample batch, a gradient batch). Two counts:

* ``over_budget_plus_one_unit``: lateness above the suggestion's largest unit of any kind;
* ``over_budget_plus_one_evaluation_or_batch`` (the issue's wording): lateness above one
  likelihood evaluation or one acquisition batch, the larger of the two: the larger of
  what this suggestion measured of them (0 when it ran none) and their cost on the row's
  starting state, measured before the row (:func:`unit_costs`: the value and gradient of
  the likelihood, median of 5; an acquisition batch of ``--unit-repeats`` unbudgeted
  suggestions), so that a suggestion whose budget skipped the fit is still allowed one
  evaluation.

Threads are pinned to one (``--threads``). Wall times depend on the machine's load: the
CPU count and the load averages before and after each row are recorded with the results.

    python benchmarks/deadline.py [--policies wdbo,st-gp-ucb] [--sizes 200,400,600,800]
        [--suggests 128] [--budget 0.05] [--output docs/results/deadline.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import time

# importing it pins the thread pools (from --threads) before NumPy and torch load
from wdbo_iteration import machine_record, objective, prepared_state  # isort: skip

import numpy as np  # noqa: E402

from dynbo import deadline  # noqa: E402
from dynbo.models.fit import NegativeLogMarginalLikelihood  # noqa: E402
from dynbo.policies import Policy  # noqa: E402

#: the kinds of unit the issue's target names: a likelihood evaluation, an acquisition batch
EVALUATION_OR_BATCH = (deadline.FIT, deadline.RAW_SAMPLE, deadline.ACQUISITION)
#: lateness histogram edges, milliseconds
EDGES_MS = (-50, -10, -5, -2, 0, 2, 5, 10, 20, 50, 100, 1000)


def unit_costs(policy: Policy, t: float, repeats: int) -> dict[str, float]:
    """Median seconds of one likelihood evaluation and of one acquisition batch on the
    policy's state.

    The evaluation is the value and gradient of the fit's objective at the policy's
    hyperparameters (a fresh point each time: the objective remembers the points it
    has evaluated), what an L-BFGS-B step costs; a Newton step's evaluation with the
    Hessian costs more, so this is the stricter allowance. The batch is
    ``acquisition_seconds / acquisition_evaluations`` of unbudgeted suggestions (the
    state restored after each).
    """
    gp = policy._gp
    objective = NegativeLogMarginalLikelihood(gp)
    theta = objective.pack(gp.hyperparameters)
    objective(theta)  # warm-up
    evaluation, batch = [], []
    for repeat in range(max(5, repeats)):
        start = time.perf_counter()
        objective(theta + 1e-9 * (repeat + 1))
        evaluation.append(time.perf_counter() - start)
    state = policy.state_dict()
    for _ in range(repeats):
        policy.suggest(t)
        diag = policy.diagnostics
        if diag.acquisition_evaluations:
            batch.append(diag.acquisition_seconds / diag.acquisition_evaluations)
        policy.load_state_dict(state)
    return {
        "likelihood_evaluation": float(np.median(evaluation)),
        "acquisition_batch": float(np.median(batch)) if batch else 0.0,
    }


def one_suggest(
    policy: Policy, t: float, budget: float, allowance: float = 0.0
) -> tuple[dict, object]:
    """Time one budgeted suggestion: its record and the query (``allowance``: the row's
    measured cost of one likelihood evaluation or acquisition batch, seconds)."""
    size = policy.dataset_size
    start = time.perf_counter()
    query = policy.suggest(t, budget=budget)
    seconds = time.perf_counter() - start
    diag = policy.diagnostics
    report = diag.extra["time_budget"]
    largest = report["largest_unit_seconds"]
    return {
        "n": size,
        "lateness": seconds - budget,
        "unit": max(largest.values(), default=0.0),
        "unit_kind": max(largest, key=largest.get) if largest else None,
        "evaluation_or_batch": max(allowance, *(largest.get(k, 0.0) for k in EVALUATION_OR_BATCH)),
        "cut": sorted({s["where"] for s in report["spent_at"]}),
        "fallback": str(diag.extra.get("acquisition_cut", "")).startswith("skipped"),
        "removed": diag.removed,
    }, query


def quantiles(values: np.ndarray) -> dict[str, float]:
    qs = {"min": 0.0, "p5": 0.05, "p25": 0.25, "median": 0.5, "p75": 0.75, "p95": 0.95}
    out = {k: float(np.quantile(values, q)) for k, q in qs.items()}
    out.update(p99=float(np.quantile(values, 0.99)), max=float(values.max()))
    return out


def summary(records: list[dict]) -> dict:
    """Counts and distributions of a list of suggestion records."""
    late = np.array([r["lateness"] for r in records])
    unit = np.array([r["unit"] for r in records])
    evaluation = np.array([r["evaluation_or_batch"] for r in records])
    over_unit = late > unit
    over_evaluation = late > evaluation
    histogram = np.histogram(1e3 * late, bins=(-np.inf, *EDGES_MS, np.inf))[0]
    cuts = collections.Counter(kind for r in records for kind in r["cut"])
    return {
        "suggests": len(records),
        "over_budget": int(np.sum(late > 0)),
        "over_budget_plus_one_unit": int(np.sum(over_unit)),
        "over_budget_plus_one_evaluation_or_batch": int(np.sum(over_evaluation)),
        "lateness_seconds": quantiles(late),
        "lateness_histogram_ms": {
            "edges": ["-inf", *EDGES_MS, "inf"],
            "counts": [int(c) for c in histogram],
        },
        "largest_unit_seconds": quantiles(unit),
        "largest_unit_kind": dict(collections.Counter(str(r["unit_kind"]) for r in records)),
        "excess_over_one_unit_seconds": sorted(float(x) for x in (late - unit)[over_unit]),
        "longest_unit_kind_when_over_one_evaluation_or_batch": dict(
            collections.Counter(
                str(r["unit_kind"]) for r, over in zip(records, over_evaluation) if over
            )
        ),
        "excess_over_one_evaluation_or_batch_seconds": sorted(
            float(x) for x in (late - evaluation)[over_evaluation]
        ),
        "suggests_with_a_cut_of": dict(sorted(cuts.items())),
        "fit_cut_or_skipped": sum(
            bool({deadline.FIT, deadline.LIKELIHOOD_SETUP} & set(r["cut"])) for r in records
        ),
        "answered_the_newest_observation": int(sum(r["fallback"] for r in records)),
    }


def measure(name: str, n: int, args: argparse.Namespace) -> tuple[dict, list[dict]]:
    load_before = os.getloadavg()
    policy = Policy.from_state_dict(prepared_state(n, args.dim, seed=n, policy_name=name))
    rng = np.random.default_rng(n)
    t = 602.0
    costs = unit_costs(policy, t, args.unit_repeats)
    allowance = max(costs.values())
    first, query = one_suggest(policy, t, args.budget)  # no unit measured before it
    policy.observe(query.x, t, objective(query.x, t))
    records = []
    for _ in range(args.suggests):
        t += 1.0
        record, query = one_suggest(policy, t, args.budget, allowance)
        records.append(record)
        x = np.asarray(query.x)
        policy.observe(x, t, objective(x, t) + 0.05 * rng.standard_normal())
    sizes = [r["n"] for r in records]
    row = {
        "policy": name,
        "n_start": n,
        "dataset_size": {"min": min(sizes), "max": max(sizes)},
        "unit_seconds_unbudgeted": costs,
        **summary(records),
        "first_budgeted_suggest": {
            k: first[k] for k in ("lateness", "unit", "unit_kind", "evaluation_or_batch", "cut")
        },
        "load_average_1_5_15_min_before": [round(v, 2) for v in load_before],
        "load_average_1_5_15_min_after": [round(v, 2) for v in os.getloadavg()],
    }
    print(
        f"{name} n={n}: over budget {row['over_budget']}, over budget + one unit "
        f"{row['over_budget_plus_one_unit']}, + one evaluation or batch "
        f"{row['over_budget_plus_one_evaluation_or_batch']} of {len(records)}; "
        f"median lateness {1e3 * row['lateness_seconds']['median']:.1f} ms, load "
        f"{row['load_average_1_5_15_min_after'][0]}",
        flush=True,
    )
    return row, records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default="wdbo,st-gp-ucb")
    parser.add_argument("--sizes", default="200,400,600,800")
    parser.add_argument("--suggests", type=int, default=128)
    parser.add_argument("--budget", type=float, default=0.05)
    parser.add_argument("--dim", type=int, default=3)
    parser.add_argument("--unit-repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output", default="docs/results/deadline.json")
    args = parser.parse_args()
    load_before = os.getloadavg()
    started = time.perf_counter()
    rows, records = [], []
    for name in args.policies.split(","):
        for n in args.sizes.split(","):
            row, row_records = measure(name, int(n), args)
            rows.append(row)
            records += row_records
    in_range = [r for r in records if 200 <= r["n"] <= 800]
    output = {
        "script": "benchmarks/deadline.py",
        "budget_seconds": args.budget,
        "dimension": args.dim,
        "unit": (
            "the longest single unit of work between two budget checks in that suggestion, "
            "as its budget measured it (largest_unit_seconds); evaluation_or_batch: the "
            "longest likelihood evaluation or acquisition batch only"
        ),
        **summary(records),
        "dataset_size_200_to_800": summary(in_range) if in_range else None,
        "rows": rows,
        "script_seconds": time.perf_counter() - started,
        "machine": machine_record(args.threads, load_before),
        "niceness": os.nice(0),
    }
    text = json.dumps(output, indent=1)
    print(
        f"{output['suggests']} suggests: over budget {output['over_budget']}, "
        f"+ one unit {output['over_budget_plus_one_unit']}, + one evaluation or batch "
        f"{output['over_budget_plus_one_evaluation_or_batch']}"
    )
    if args.output:
        with open(args.output, "w") as handle:
            handle.write(text + "\n")


if __name__ == "__main__":
    main()
