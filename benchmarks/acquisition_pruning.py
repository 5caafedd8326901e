"""What pruning trailing starts changes in the acquisition search: points and steps (JSON).

For each policy, size n and data state (the states of ``policy_speed.py``: n points of
a drifting function over [0, 600] s, two untimed iterations), the next iteration is run
twice from the same saved state: with ``BoxSearch.prune_trailing`` (the default) and
without. The fits are the same (deterministic, same inputs), so any difference is the
search's. Per run the JSON has both queries, their UCB values under that one model, the
loss ``value_unpruned - value_pruned`` (positive: pruning returned a worse point), and
both numbers of batched acquisition calls; ``summary`` has, per policy and size, how
many queries were identical (within ``1e-9`` in the unit box), the largest loss and
the median ratio of calls.

    python benchmarks/acquisition_pruning.py [--sizes 50 200] [--states 20]
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics

# importing it pins the thread pools (from --threads) before NumPy and torch load
from wdbo_iteration import machine_record, prepared_state  # isort: skip

import torch  # noqa: E402
from policy_speed import options_holding, state_arguments  # noqa: E402

from dynbo.policies import Policy, available  # noqa: E402

#: how far apart (unit box, max norm) two queries may be and count as the same point
SAME_POINT = 1e-9


def compare(state: dict, t: float = 602.0) -> dict:
    """The next iteration from ``state`` with and without pruning: points, values, calls."""
    runs, searched = {}, []
    for prune in (True, False):
        policy = Policy.from_state_dict(state)
        policy.search = dataclasses.replace(policy.search, prune_trailing=prune)
        build = policy._acquisition_function

        def keep(time: float, build=build):
            # the acquisition the search maximized (a beta schedule may read the iteration
            # count, which suggest advances: one rebuilt afterwards could differ)
            searched.append(build(time))
            return searched[-1]

        policy._acquisition_function = keep
        query = policy.suggest(t)
        runs[prune] = (policy, query)
    policy, _ = runs[False]
    acquisition = searched[-1]

    def unit(query) -> torch.Tensor:
        point = policy._to_unit(torch.as_tensor(query.x, dtype=policy.dtype).reshape(1, -1))
        if acquisition.time_window is None:
            return point
        # a look-ahead (ABO) searches time too: its last coordinate is the query time
        start, end = acquisition.time_window
        position = 0.0 if end == start else (query.t - start) / (end - start)
        return torch.cat([point, point.new_full((1, 1), position)], dim=1)

    units = {prune: unit(query) for prune, (_, query) in runs.items()}
    with torch.no_grad():
        values = {prune: float(acquisition(unit)[0]) for prune, unit in units.items()}
    distance = float((units[True] - units[False]).abs().max())
    return {
        "same_point": distance <= SAME_POINT,
        "distance": distance,
        "value_pruned": values[True],
        "value_unpruned": values[False],
        "loss": values[False] - values[True],
        "calls_pruned": runs[True][0].diagnostics.acquisition_evaluations,
        "calls_unpruned": runs[False][0].diagnostics.acquisition_evaluations,
    }


def main() -> None:
    args = state_arguments(__doc__.splitlines()[0], [50, 200], 20).parse_args()
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    names = args.policies or available()
    rows, summary = [], []
    for n in args.sizes:
        for name in names:
            mine = []
            for seed in range(args.seed, args.seed + args.states):
                state = prepared_state(n - 2, args.dim, seed, name, options_holding(name, n))
                mine.append({"policy": name, "n": n, "seed": seed, **compare(state)})
            rows.extend(mine)
            with_calls = [r for r in mine if r["calls_unpruned"]]
            summary.append(
                {
                    "policy": name,
                    "n": n,
                    "states": len(mine),
                    "same_point": sum(r["same_point"] for r in mine),
                    "largest_loss": max(r["loss"] for r in mine),
                    "largest_relative_loss": max(
                        r["loss"] / max(abs(r["value_unpruned"]), 1e-300) for r in mine
                    ),
                    "median_calls_pruned": statistics.median(r["calls_pruned"] for r in mine),
                    "median_calls_unpruned": statistics.median(r["calls_unpruned"] for r in mine),
                    "median_calls_ratio": statistics.median(
                        r["calls_pruned"] / r["calls_unpruned"] for r in with_calls
                    )
                    if with_calls
                    else None,
                }
            )
    print(
        json.dumps(
            {
                "benchmark": "acquisition_pruning",
                **machine_record(args.threads, load_before),
                "dim": args.dim,
                "summary": summary,
                "results": rows,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
