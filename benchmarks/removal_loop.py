"""Seconds and tensor operations of W-DBO's removal loop: one removal at a time vs batches (JSON).

For each n, the state of ``wdbo_iteration.py`` (a W-DBO policy that observed ``n - 2``
points of a drifting function over [0, 600] s and ran two iterations, so that its
removal budget has grown) is loaded, the relevancy criterion is built at the next
iteration's time (602 s, the policy's hyperparameters as saved) and the removal loop is
run from there, to its end, by both loops of :mod:`dynbo.policies.removal`:

* ``one_at_a_time``: the paper's loop as written (every relevancy recomputed and the
  criterion and the GP downdated after each removal);
* ``batched``: the default, removals in batches with the same choices.

Each loop is timed ``--repeats`` times from the same state after one untimed warm-up,
the two alternating, and the median (with the minimum and maximum) kept; the time
includes removing the observations from the policy's data and GP, not the criterion's
construction (``criterion_seconds``, the same for both). The script checks that both
loops removed the same observations in the same order, and records the largest
differences of the relevancies, the budget and the posterior.

Tensor operations per removal are counted with a ``TorchDispatchMode`` (every aten
operation the loop dispatches, as ``torch.profiler`` would list them on a CPU):
``kernels`` leaves out views (no computation, no kernel on a GPU) and ``host_syncs``
counts the operations that make a GPU wait for its queue (reading a scalar,
``nonzero``). Four variants: the one-at-a-time loop as it runs on a CPU (below 512
observations its relevancy algebra runs in NumPy, which the count does not see), the
same with the torch path it takes on a GPU, the batched loop on a CPU (its steps run in
NumPy on views of the batch's tensors, which the count does not see either: what it
counts is the batches' setup and commits), and the batched loop in the speculative mode
it uses on a GPU (batches computed to their end before one read-back each; torch
steps on any device, every operation counted).

Timings depend on the machine and its load: the JSON records the load average before and
after and the number of CPUs; a load average near the CPU count means other work shared
the cores and the times are upper bounds.

    python benchmarks/removal_loop.py [--sizes 200 400 1000] [--repeats 3] [--threads 1]
        [--out docs/results/removal_loop.json]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import statistics
import time
from pathlib import Path

# importing it pins the thread pools (from --threads) before NumPy and torch load
from wdbo_iteration import machine_record, prepared_state, synchronize  # isort: skip

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import dynbo.relevancy.criterion as criterion  # noqa: E402
from dynbo.policies import Policy  # noqa: E402
from dynbo.policies.removal import RemovalOutcome, remove_least_relevant  # noqa: E402
from dynbo.relevancy import WassersteinRelevancy  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: the time of the iteration whose removal loop is measured (wdbo_iteration.py's)
PRESENT = 602.0
#: aten operations that only make a view or read metadata: no computation, no kernel
VIEWS = frozenset(
    "alias as_strided detach diagonal expand lift_fresh numpy_T permute select slice "
    "split squeeze t transpose unbind unsqueeze view _reshape_alias _unsafe_view".split()
)
#: aten operations that make a GPU's host wait for the device queue
SYNCS = frozenset(["_local_scalar_dense", "nonzero"])


class OperationCount(TorchDispatchMode):
    """Counts every aten operation dispatched inside the ``with`` block, by name."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        name = func.overloadpacket.__name__
        self.counts[name] = self.counts.get(name, 0) + 1
        return func(*args, **(kwargs or {}))

    def per_removal(self, removals: int) -> dict[str, float]:
        """Operations, kernel-launching operations and host syncs per removal."""
        total = sum(self.counts.values())
        views = sum(c for name, c in self.counts.items() if name in VIEWS)
        syncs = sum(c for name, c in self.counts.items() if name in SYNCS)
        per = max(removals, 1)
        return {
            "operations": round(total / per, 2),
            "kernels": round((total - views) / per, 2),
            "host_syncs": round(syncs / per, 3),
        }


def run_loop(
    state: dict,
    *,
    batched: bool,
    speculative: bool | None = None,
    counter: OperationCount | None = None,
) -> tuple[float, RemovalOutcome, Policy, WassersteinRelevancy]:
    """Seconds of one removal loop from ``state`` (the criterion built before the clock,
    which starts and stops with the device's queue empty).

    ``counter`` counts the loop's operations (only the loop's).
    """
    policy = Policy.from_state_dict(state)
    relevancy = WassersteinRelevancy.from_gp(policy._gp, max(PRESENT, float(policy._t.max())))
    limit = policy.dataset_size - policy.min_dataset_size
    device = relevancy._P.device
    with counter if counter is not None else contextlib.nullcontext():
        synchronize(device)
        start = time.perf_counter()
        outcome = remove_least_relevant(
            policy,
            relevancy,
            limit=limit,
            budget=policy.budget,
            batched=batched,
            speculative=speculative,
        )
        synchronize(device)
        elapsed = time.perf_counter() - start
    return elapsed, outcome, policy, relevancy


def error_against_fresh(policy: Policy, relevancy: WassersteinRelevancy) -> dict[str, float]:
    """The criterion after a loop against one built from a fresh factorization of the
    data left (largest differences of ``P`` and of ``R``, relative to their largest entry).
    """
    fresh_gp = copy.deepcopy(policy._gp)
    fresh_gp.refactorize()
    fresh = WassersteinRelevancy.from_gp(fresh_gp, max(PRESENT, float(policy._t.max())))
    p, p_fresh = relevancy.precision, fresh.precision
    r, r_fresh = relevancy.relevancies(), fresh.relevancies()
    return {
        "precision": float((p - p_fresh).abs().max() / p_fresh.abs().max()),
        "relevancies": float((r - r_fresh).abs().max() / r_fresh.abs().max()),
    }


def count_operations(state: dict, *, batched: bool, **mode) -> dict[str, float]:
    """Operations per removal of one loop (``torch_path``: the criterion's GPU path)."""
    torch_path = mode.pop("torch_path", False)
    saved = criterion._HOST_MAX_STORAGE
    if torch_path:
        criterion._HOST_MAX_STORAGE = 0
    try:
        counter = OperationCount()
        _, outcome, _, _ = run_loop(state, batched=batched, counter=counter, **mode)
    finally:
        criterion._HOST_MAX_STORAGE = saved
    return counter.per_removal(len(outcome.times))


def measure(n: int, dim: int, repeats: int, seed: int) -> dict[str, object]:
    """Both loops on the state entering with ``n`` observations: seconds, counts, agreement."""
    state = prepared_state(n - 2, dim, seed)
    policy = Policy.from_state_dict(state)
    start = time.perf_counter()
    WassersteinRelevancy.from_gp(policy._gp, max(PRESENT, float(policy._t.max())))
    criterion_seconds = time.perf_counter() - start
    seconds: dict[str, list[float]] = {"one_at_a_time": [], "batched": []}
    outcomes: dict[str, tuple[RemovalOutcome, Policy, WassersteinRelevancy]] = {}
    for repeat in range(repeats + 1):
        for name in seconds:
            elapsed, outcome, after, relevancy = run_loop(state, batched=name == "batched")
            if repeat:  # the first repeat is the warm-up
                seconds[name].append(elapsed)
            outcomes[name] = (outcome, after, relevancy)
    (old, old_policy, _), (new, new_policy, _) = outcomes["one_at_a_time"], outcomes["batched"]
    rng = np.random.default_rng(seed)
    test = old_policy._gp_inputs(
        torch.tensor(rng.uniform(0, 1, (64, dim)), dtype=torch.float64),
        torch.full((64,), PRESENT, dtype=torch.float64),
    )
    means = [p.model.predict(test.to(p.model.inputs.dtype))[0] for p in (old_policy, new_policy)]
    removals = len(old.times)
    median = {name: statistics.median(values) for name, values in seconds.items()}
    return {
        "n": policy.dataset_size,
        "removals": removals,
        "budget_before": policy.budget,
        "criterion_seconds": criterion_seconds,
        **{
            f"{name}_seconds{suffix}": f(values)
            for name, values in seconds.items()
            for suffix, f in (("", statistics.median), ("_min", min), ("_max", max))
        },
        "one_at_a_time_ms_per_removal": 1e3 * median["one_at_a_time"] / max(removals, 1),
        "batched_ms_per_removal": 1e3 * median["batched"] / max(removals, 1),
        "speedup": median["one_at_a_time"] / median["batched"],
        "repeats": repeats,
        "same_removals_in_same_order": old.times == new.times,
        "max_relevancy_relative_difference": max(
            (abs(a - b) / a for a, b in zip(old.relevancies, new.relevancies) if a > 0),
            default=0.0,
        ),
        "budget_relative_difference": abs(old.budget - new.budget) / old.budget,
        "posterior_mean_max_abs_difference": float((means[0] - means[1]).abs().max()),
        "criterion_after_the_loop_against_a_fresh_factorization": {
            name: error_against_fresh(after, relevancy)
            for name, (_, after, relevancy) in outcomes.items()
        },
        "operations_per_removal": {
            "one_at_a_time_cpu": count_operations(state, batched=False),
            "one_at_a_time_torch_path": count_operations(state, batched=False, torch_path=True),
            "batched_cpu": count_operations(state, batched=True),
            "batched_speculative": count_operations(state, batched=True, speculative=True),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 400, 1000])
    parser.add_argument("--dim", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out", default=str(ROOT / "docs" / "results" / "removal_loop.json"), help="JSON file"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(args.threads)
    load_before = os.getloadavg()
    results = [measure(n, args.dim, args.repeats, args.seed) for n in args.sizes]
    text = json.dumps(
        {
            "benchmark": "removal_loop",
            **machine_record(args.threads, load_before),
            "dim": args.dim,
            "seed": args.seed,
            "results": results,
        },
        indent=2,
    )
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
