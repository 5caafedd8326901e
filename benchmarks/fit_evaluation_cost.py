"""Seconds of one likelihood evaluation of the fit against the dataset size, in torch and
in NumPy (JSON).

An evaluation of :class:`~dynbo.models.fit.NegativeLogMarginalLikelihood` costs a fixed
part (Python, one tensor allocation or library call after another: the same at every
size) plus arithmetic that grows as ``n^2`` (the elementwise passes) and ``n^3`` (the
Cholesky factorization and the inverse). On small datasets the fixed part is most of
it, and a torch operation's fixed part is several times a NumPy one's: the fit therefore
evaluates in NumPy on a CPU up to ``_NUMPY_LARGEST`` observations (value and gradient)
and ``_NUMPY_HESSIAN_LARGEST`` (with the Hessian; ``dynbo.models.fit``). This script
measures the four evaluations at each size:

- ``torch_gradient_seconds``: value and gradient in torch (``_evaluate_torch``; what
  L-BFGS-B asks for);
- ``numpy_gradient_seconds``: the same in NumPy and SciPy's LAPACK (``_evaluate_numpy``),
  here at every size, also beyond the fit's own limit;
- ``torch_hessian_seconds``, ``numpy_hessian_seconds``: value, gradient and Hessian (what
  Newton asks for).

For each size, a W-DBO policy observes ``n`` drifting points
(``wdbo_iteration.prepared_state``; ``n`` in the JSON counts its two extra iterations'
observations) and its GP's objective, with the policy's priors, is evaluated near the
GP's fitted hyperparameters. The sizes are timed in rounds, one size after the other in
each round (the machine's speed drifts over minutes), ``--repeats`` evaluations per size,
kind and round after one warm-up; each field is the median over all of them.

``--threads`` pins the BLAS and OpenMP pools (OpenBLAS's too, which SciPy's LAPACK
uses): with more than one, OpenBLAS runs the factorization, the solves and the
Hessian's matrix products of larger matrices on several threads, whose wake-up costs
more than the evaluation on a loaded machine; the two limits keep the fit below.

    python benchmarks/fit_evaluation_cost.py [--threads 1] [--rounds 5] [--repeats 20]
        [--output docs/results/fit_evaluation_cost.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

# importing it pins the thread pools (from --threads) before NumPy and torch load
from wdbo_iteration import machine_record, prepared_state  # isort: skip

import numpy as np  # noqa: E402

from dynbo.models import fit as fit_module  # noqa: E402
from dynbo.models.fit import NegativeLogMarginalLikelihood  # noqa: E402
from dynbo.policies import Policy  # noqa: E402

SIZES = (8, 16, 32, 48, 64, 80, 96, 112, 128, 160, 200)
KINDS = ("torch_gradient", "numpy_gradient", "torch_hessian", "numpy_hessian")


def objective_of(n: int, seed: int) -> tuple[NegativeLogMarginalLikelihood, np.ndarray]:
    """The fit's objective for a W-DBO policy with ``n`` observations, and its ``theta``."""
    policy = Policy.from_state_dict(prepared_state(n, 3, seed))
    objective = NegativeLogMarginalLikelihood(policy._gp, priors=policy.priors())
    return objective, objective.pack(policy._gp.hyperparameters)


def evaluation(objective: NegativeLogMarginalLikelihood, kind: str):
    """The evaluation ``kind`` (:data:`KINDS`) of ``objective``, a function of ``theta``."""
    with_hessian = kind.endswith("hessian")
    if kind.startswith("torch"):
        return lambda theta: objective._evaluate_torch(theta, with_hessian)

    def in_numpy(theta: np.ndarray) -> None:
        if objective._evaluate_numpy(theta, with_hessian) is None:
            raise RuntimeError("Delta not positive definite: nothing measured")

    return in_numpy


def time_evaluations(evaluate, theta: np.ndarray, repeats: int, rng) -> list[float]:
    """Seconds of ``repeats`` calls of ``evaluate``, each at a new point near ``theta``."""
    evaluate(theta + 1e-3 * rng.standard_normal(theta.size))  # warm-up
    seconds = []
    for _ in range(repeats):
        point = theta + 1e-3 * rng.standard_normal(theta.size)
        start = time.perf_counter()
        evaluate(point)
        seconds.append(time.perf_counter() - start)
    return seconds


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    sizes = sorted(set(args.sizes))
    if args.rounds < 1 or args.repeats < 1:
        parser.error("--rounds and --repeats must be positive")
    load_before = os.getloadavg()
    script_start = time.perf_counter()
    objectives = {n: objective_of(n, args.seed) for n in sizes}
    rng = np.random.default_rng(args.seed)
    samples: dict[tuple[int, str], list[float]] = {(n, k): [] for n in sizes for k in KINDS}
    for _ in range(args.rounds):
        for n in sizes:
            objective, theta = objectives[n]
            for kind in KINDS:
                samples[n, kind] += time_evaluations(
                    evaluation(objective, kind), theta, args.repeats, rng
                )
    rows = []
    for n in sizes:
        row = {"n": objectives[n][0].gp.n}
        row.update({f"{kind}_seconds": statistics.median(samples[n, kind]) for kind in KINDS})
        for what in ("gradient", "hessian"):
            row[f"{what}_torch_over_numpy"] = (
                row[f"torch_{what}_seconds"] / row[f"numpy_{what}_seconds"]
            )
        rows.append(row)
    result = {
        "script": "benchmarks/fit_evaluation_cost.py",
        "arguments": vars(args),
        "kernel": "W-DBO's default (Matern-5/2 in space, Matern-3/2 in time, d = 3), its priors",
        "numpy_largest": fit_module._NUMPY_LARGEST,
        "numpy_hessian_largest": fit_module._NUMPY_HESSIAN_LARGEST,
        "rows": rows,
        "script_seconds": time.perf_counter() - script_start,
        "machine": machine_record(args.threads, load_before),
    }
    text = json.dumps(result, indent=2)
    if args.output:
        with open(args.output, "w") as handle:
            handle.write(text + "\n")
    print(text)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
