"""SparQ's ``Q`` under its approximation condition against ``ceil(ln(t + 1))`` on ``rkhs`` (JSON).

The ``rkhs`` suite's kernel (SE, variance 0.5, lengthscale 0.03 of the domain's width,
noise variance 0.01: :func:`dynbo.benchmarks.registry.rkhs_options`) over ``N`` distinct
past inputs drawn uniformly without replacement from its 1001-point grid; for each ``N``
and ``eta``, the smallest ``Q`` with ``E[tr(K - U)] / sigma^2 <= eta`` over the Q-DPP
(:func:`dynbo.kdpp.approximation_size`) beside the default rule's ``ceil(ln(N + 1))``
(``N`` past inputs after ``N`` steps when no input repeats). Uniform inputs are a spread-out
design: a run that concentrates its queries near the optimum needs fewer. Seconds.

    python benchmarks/sparq_query_count.py [--out docs/results/sparq_query_count.json]
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np

from dynbo.kdpp import approximation_size


def rkhs_kernel(points: np.ndarray) -> np.ndarray:
    """``(N, N)`` the suite's prior covariance over points of the unit interval."""
    d = points[:, None] - points[None, :]
    return 0.5 * np.exp(-0.5 * d**2 / 0.03**2)


def main() -> None:
    """Write the table of chosen sizes as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/results/sparq_query_count.json")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 25, 50, 100, 250, 500])
    parser.add_argument("--etas", type=float, nargs="+", default=[0.1, 1.0, 10.0])
    parser.add_argument("--draws", type=int, default=5, help="input sets per size")
    args = parser.parse_args()
    grid = np.linspace(0.0, 1.0, 1001)
    noise = 0.01
    rows = []
    for n in args.sizes:
        for eta in args.etas:
            sizes = []
            for draw in range(args.draws):
                rng = np.random.default_rng(draw)
                points = rng.choice(grid, size=n, replace=False)
                sizes.append(approximation_size(rkhs_kernel(points), eta * noise)[0])
            rows.append(
                {
                    "past_inputs": n,
                    "eta": eta,
                    "approximation_q": sizes,
                    "approximation_q_mean": float(np.mean(sizes)),
                    "log_rule_q": math.ceil(math.log(n + 1)),
                }
            )
    result = {
        "what": "SparQ's Q: approximation condition (Prop. 3.2) vs ceil(ln(t + 1)), rkhs kernel",
        "kernel": {"family": "se", "outputscale": 0.5, "lengthscale": 0.03, "noise": noise},
        "inputs": "distinct, uniform without replacement on the 1001-point grid of [0, 1]",
        "draws": args.draws,
        "rows": rows,
    }
    with open(args.out, "w") as handle:
        json.dump(result, handle, indent=1)
        handle.write("\n")
    for row in rows:
        print(row["past_inputs"], row["eta"], row["approximation_q_mean"], row["log_rule_q"])


if __name__ == "__main__":
    main()
