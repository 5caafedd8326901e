"""Seconds of W-DBO's removal loop against when its storage is compacted (JSON).

The batched removal loop (:meth:`dynbo.relevancy.WassersteinRelevancy.remove_least_relevant`)
works in place on the criterion's ``(n, n)`` storage and each removal step reads all of
the storage's ``P`` (one matrix-vector product), dead rows included; compacting the
storage copies the live part once (``P``, ``Q`` and ``C``; on CUDA the loop then
captures its step again). The loop compacts before a batch once fewer than
``criterion._COMPACT_BELOW`` of the storage's rows are live; this script times the loop
with each of ``--fractions`` in its place.

For each ``--sizes`` n, the W-DBO state of ``gpu.py`` (:func:`gpu.prepared_state`: fixed
hyperparameters, two untimed iterations, so that the removal budget has grown) on
``--device``; then the removal loop of the next iteration (at 602 s, the criterion built
before the clock, the observations removed from the policy's GP included: ``removal_loop.py``'s
:func:`removal_loop.run_loop`), ``--repeats`` times after one untimed warm-up, the
fractions alternating in order from one repeat to the next within one process, so
that a drift of the machine's speed meets every fraction alike. Per fraction: the
median, minimum and maximum seconds, the compactions and (CUDA) captures of one loop.
``same_removals`` says whether every fraction removed the same observations in the same
order (a compaction sums the same products in another order, so a choice between
relevancies equal to rounding could go the other way; the script reports it, it does
not assume it).

The thread pools are pinned to ``--threads`` before NumPy and torch load; the JSON
records the machine's load before and after (a load near the CPU count means other work
shared the cores and the times are upper bounds).

    python benchmarks/removal_compaction.py [--sizes 200 600 1500 3000]
        [--fractions 0.5 0.75 0.9] [--repeats 5] [--device cpu] [--threads 1]
        [--out docs/results/removal_compaction.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections.abc import Callable

# importing it pins the thread pools (from --threads) before NumPy and torch load
from wdbo_iteration import machine_record  # isort: skip

import torch  # noqa: E402
from gpu import parse_state_arguments, prepared_state, state_arguments  # noqa: E402
from removal_loop import run_loop  # noqa: E402

import dynbo.relevancy.criterion as criterion  # noqa: E402


class Counted:
    """Counts the calls of ``owner.name`` (a function or method) while installed."""

    def __init__(self, owner: object, name: str) -> None:
        self.owner, self.name, self.calls = owner, name, 0
        self.original = getattr(owner, name)

    def __enter__(self) -> Counted:
        original = self.original

        def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
            self.calls += 1
            return original(*args, **kwargs)

        setattr(self.owner, self.name, counted)
        return self

    def __exit__(self, *exc: object) -> None:
        setattr(self.owner, self.name, self.original)


def one_loop(state: dict, fraction: float) -> tuple[float, list[float], dict[str, int]]:
    """``(seconds, removal times, counts)`` of one loop with ``fraction``: its
    compactions and captures."""
    saved = criterion._COMPACT_BELOW
    criterion._COMPACT_BELOW = fraction
    try:
        with (
            Counted(criterion.WassersteinRelevancy, "_compact") as compactions,
            Counted(criterion, "_capture") as captures,
        ):
            seconds, outcome, _, _ = run_loop(state, batched=True)
    finally:
        criterion._COMPACT_BELOW = saved
    counts = {"compactions": compactions.calls, "captures": captures.calls}
    return seconds, list(outcome.times), counts


def alternate(
    state: dict,
    settings: list,
    repeats: int,
    one_loop: Callable[[dict, object], tuple[float, list[float], dict[str, int]]],
    key: str,
) -> dict[str, object]:
    """Each of ``settings``' loop on ``state``, ``repeats`` times after one untimed
    warm-up, in alternating order from one repeat to the next (a drift of the machine's
    speed meets every setting alike): per setting (named ``key`` in its row) the median,
    minimum and maximum seconds and the counts of one loop; ``same_removals``: whether
    every setting removed the same observations in the same order."""
    seconds: dict[object, list[float]] = {setting: [] for setting in settings}
    removed: dict[object, list[float]] = {}
    counts: dict[object, dict[str, int]] = {}
    for repeat in range(repeats + 1):
        for setting in settings if repeat % 2 else settings[::-1]:
            elapsed, times, counts[setting] = one_loop(state, setting)
            if repeat:  # the first repeat is the warm-up
                seconds[setting].append(elapsed)
            removed[setting] = times
    first = removed[settings[0]]
    return {
        "n": len(state["data"]["t"]),
        "removals": len(first),
        "same_removals": all(times == first for times in removed.values()),
        "settings": [
            {
                key: setting,
                "seconds": statistics.median(seconds[setting]),
                "seconds_min": min(seconds[setting]),
                "seconds_max": max(seconds[setting]),
                **counts[setting],
            }
            for setting in settings
        ],
        "repeats": repeats,
    }


def measure(n: int, args: argparse.Namespace) -> dict[str, object]:
    """Every fraction's loop on the W-DBO state entering with about ``n`` observations."""
    state = prepared_state("wdbo", n - 2, args.dim, args.seed, args.device)
    size = alternate(state, list(args.fractions), args.repeats, one_loop, "compact_below")
    size["fractions"] = size.pop("settings")
    return size


def report_sizes(
    name: str,
    settings: dict[str, object],
    args: argparse.Namespace,
    measure: Callable[[int, argparse.Namespace], dict[str, object]],
) -> None:
    """Benchmark ``name``'s report: its ``settings``, then ``measure(n, args)`` for each
    of ``args.sizes`` on ``args.threads`` torch threads, with the machine's record; the
    JSON goes to ``args.out`` after every size (a run stopped midway keeps its sizes)
    and to stdout at the end."""
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    report: dict[str, object] = {
        "benchmark": name,
        "command": " ".join([f"benchmarks/{name}.py", *sys.argv[1:]]),
        **settings,
        "sizes": [],
    }
    for n in args.sizes:
        report["sizes"].append(measure(n, args))  # type: ignore[attr-defined]
        report.update(machine_record(args.threads, load_before, args.device))
        text = json.dumps(report, indent=1)
        if args.out is not None:
            args.out.write_text(text + "\n")
    print(text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    state_arguments(parser, [200, 600, 1500, 3000])
    parser.set_defaults(repeats=5)
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.5, 0.75, 0.9])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    args = parse_state_arguments(parser, argv)
    if not all(0.0 < f <= 1.0 for f in args.fractions):
        parser.error("--fractions must be in (0, 1]")
    report_sizes(
        "removal_compaction", {"default_compact_below": criterion._COMPACT_BELOW}, args, measure
    )


if __name__ == "__main__":
    main()
