"""Seconds of W-DBO's removal loop in torch steps against their candidates per step (JSON).

A torch removal step (:class:`dynbo.relevancy.criterion._RemovalBatch`, the steps a GPU
runs, captured in a CUDA graph there) needs one O(n^2) product ``P q`` per removal. With
``c > 0`` candidates per step (``criterion._candidates_per_step``: 2 on a CPU; on a GPU 0
where ``P`` fits its L2 cache, else 8) a batch of ``k`` steps makes those products
for its ``c k`` least relevant observations before its first step, in one matrix
product, and a step whose choice is not among them (a miss) ends the batch after its
removal; with ``c = 0`` each step makes its own product, one read of all of ``P``. This
script times the loop with each of ``--per-step`` in place of the default.

For each ``--sizes`` n, the W-DBO state of ``gpu.py`` (:func:`gpu.prepared_state`: fixed
hyperparameters, two untimed iterations) on ``--device``; then the removal loop of the
next iteration (``removal_loop.py``'s :func:`removal_loop.run_loop`, speculative: torch
steps on any device; the criterion built before the clock, which starts and stops with
the device's queue empty), ``--repeats`` times after one untimed warm-up, the settings
alternating in order from one repeat to the next within one process. Per setting: the
median, minimum and maximum seconds and, of one loop, the batches, the steps computed
and the misses. ``same_removals`` says whether every setting removed the same
observations in the same order (the products are the same quantities summed in another
order, so a choice between relevancies equal to rounding could go the other way; the
script reports it, it does not assume it).

The thread pools are pinned to ``--threads`` before NumPy and torch load; the JSON
records the machine's load before and after.

    python benchmarks/removal_candidates.py [--sizes 600 1500 3000]
        [--per-step 0 1 2 4 8] [--repeats 3] [--device cpu] [--threads 1]
        [--out docs/results/removal_candidates.json]
"""

from __future__ import annotations

import argparse

# importing it pins the thread pools (from --threads) before NumPy and torch load
import wdbo_iteration  # noqa: F401  # isort: skip

from gpu import parse_state_arguments, prepared_state, state_arguments  # noqa: E402
from removal_compaction import alternate, report_sizes  # noqa: E402
from removal_loop import run_loop  # noqa: E402

import dynbo.relevancy.criterion as criterion  # noqa: E402


def one_loop(state: dict, per_step: int) -> tuple[float, list[float], dict]:
    """``(seconds, removal times, counts)`` of one loop with ``per_step`` candidates."""
    rule = criterion._candidates_per_step
    criterion._candidates_per_step = lambda P: per_step
    loops: list[criterion.Removals] = []
    real = criterion.WassersteinRelevancy.remove_least_relevant

    def spy(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        loops.append(real(self, *args, **kwargs))
        return loops[-1]

    criterion.WassersteinRelevancy.remove_least_relevant = spy  # type: ignore[method-assign]
    try:
        seconds, outcome, _, _ = run_loop(state, batched=True, speculative=True)
    finally:
        criterion._candidates_per_step = rule
        criterion.WassersteinRelevancy.remove_least_relevant = real  # type: ignore[method-assign]
    counts = {
        "batches": sum(r.batches for r in loops),
        "steps": sum(r.steps for r in loops),
        "misses": sum(r.misses for r in loops),
    }
    return seconds, list(outcome.times), counts


def measure(n: int, args: argparse.Namespace) -> dict[str, object]:
    """Every setting's loop on the W-DBO state entering with about ``n`` observations."""
    state = prepared_state("wdbo", n - 2, args.dim, args.seed, args.device)
    return alternate(state, list(args.per_step), args.repeats, one_loop, "candidates_per_step")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    state_arguments(parser, [600, 1500, 3000])
    parser.set_defaults(repeats=3)
    parser.add_argument("--per-step", type=int, nargs="+", default=[0, 1, 2, 4, 8])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    args = parse_state_arguments(parser, argv)
    if not all(c >= 0 for c in args.per_step):
        parser.error("--per-step must be >= 0")
    settings = {
        "default_candidates_per_step": {
            "cpu": criterion._CANDIDATES_PER_STEP,
            "cuda": criterion._CUDA_CANDIDATES_PER_STEP,
            "cuda_without_candidates": "where P fits the GPU's L2 cache",
        }
    }
    report_sizes("removal_candidates", settings, args, measure)


if __name__ == "__main__":
    main()
