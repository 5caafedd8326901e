"""``dynbo list``: benchmarks, suites and policies."""

from __future__ import annotations

import argparse

from dynbo.cli.common import print_table

NAME = "list"
SUMMARY = "benchmarks, suites and policies"
DESCRIPTION = "List what dynbo provides."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "what", nargs="?", default="all", choices=["all", "benchmarks", "suites", "policies"]
    )


def run(args: argparse.Namespace) -> int:
    if args.what in ("all", "benchmarks"):
        _benchmarks()
    if args.what in ("all", "suites"):
        _suites()
    if args.what in ("all", "policies"):
        _policies()
    return 0


def _benchmarks() -> None:
    from dynbo import benchmarks

    infos = [benchmarks.get(name).info() for name in benchmarks.names()]
    rows = [
        (
            i.name,
            str(i.dim),
            f"{i.noise_variance:.4g}",
            f"{i.cost:.3g}",
            f"{i.horizon:g} {i.time_unit}",
            i.reference,
        )
        for i in infos
    ]
    print("benchmarks (d: spatial dimension; noise: variance; c: seconds per evaluation):")
    print_table(("name", "d", "noise", "c (s)", "horizon", "source"), rows, "llrrrl")
    print("benchmark options (a campaign entry's 'options', dynbo run --benchmark-option):")
    rows = [(name, ", ".join(benchmarks.options(name))) for name in benchmarks.names()]
    print_table(("name", "options"), rows, "ll")


def _suites() -> None:
    from dynbo import benchmarks

    print("suites:")
    rows = []
    for name in benchmarks.suites():
        suite = benchmarks.suite(name)
        labels = ", ".join(e.label for e in suite.entries)
        rows.append((name, suite.clock, str(suite.seeds), labels))
    print_table(("name", "clock", "seeds", "benchmarks"), rows, "llrl")


def _policies() -> None:
    from dynbo.policies import available, policy_class

    print("policies:")
    rows = [(name, policy_class(name).reference) for name in available()]
    print_table(("name", "algorithm"), rows, "ll")
