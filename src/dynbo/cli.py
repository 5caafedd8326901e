"""The ``dynbo`` command line: run, bench, list, calibrate, export.

    dynbo run --benchmark eggholder --policy st-gp-ucb --clock measured --horizon 120
    dynbo bench --suite quick --workers 2 --store results/quick.sqlite
    dynbo bench campaign.toml --scheduler tcp://host:8786
    dynbo list [benchmarks|suites|policies]
    dynbo calibrate --policy st-gp-ucb --sizes 25 50 100 200
    dynbo export --store results/quick.sqlite --format parquet --out results/quick

Bad arguments end with one line on stderr (``dynbo: error: ...``) and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["main"]

DEFAULT_STORE = "results/dynbo.sqlite"


class CliError(Exception):
    """A user error: printed as one line, exit status 2."""


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _integer_at_least(low: int, what: str):  # type: ignore[no-untyped-def]
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected a {what} integer, got {text!r}")
        return value

    return parse


_non_negative_int = _integer_at_least(0, "non-negative")
_positive_int = _integer_at_least(1, "positive")


def _options(pairs: Sequence[str] | None, what: str) -> dict[str, Any]:
    """``key=value`` pairs; values parsed as JSON when they can be (numbers, lists, true)."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise CliError(f"{what} option {pair!r} is not of the form key=value")
        key, value = pair.split("=", 1)
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        raise CliError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="dynbo", description="Time-varying Bayesian optimization.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="one benchmark x one policy, with live progress")
    run.add_argument("--benchmark", required=True)
    run.add_argument("--policy", required=True)
    run.add_argument("--seed", type=_non_negative_int, default=0)
    run.add_argument("--clock", default="measured", choices=["wall", "measured", "modeled", "step"])
    run.add_argument("--horizon", type=_positive_float)
    run.add_argument("--warmup", type=int, default=15)
    run.add_argument("--response-time", type=float, nargs=4, metavar=("C0", "C1", "C2", "C3"))
    run.add_argument("--benchmark-option", action="append", metavar="KEY=VALUE")
    run.add_argument("--policy-option", action="append", metavar="KEY=VALUE")
    run.add_argument("--store", help="also save the run into this result store")
    run.add_argument("--quiet", action="store_true", help="no live progress")

    bench = sub.add_parser("bench", help="run a campaign into the result store")
    bench.add_argument("config", nargs="?", help="campaign TOML file")
    bench.add_argument("--suite", action="append", help="a suite (instead of / besides a config)")
    bench.add_argument("--store", default=DEFAULT_STORE)
    bench.add_argument("--workers", type=_positive_int, default=1)
    bench.add_argument("--scheduler", help="Dask scheduler address, e.g. tcp://host:8786")
    bench.add_argument("--retry-failed", action="store_true")
    bench.add_argument("--no-progress", action="store_true")

    lister = sub.add_parser("list", help="benchmarks, suites and policies")
    lister.add_argument(
        "what", nargs="?", default="all", choices=["all", "benchmarks", "suites", "policies"]
    )

    cal = sub.add_parser("calibrate", help="fit this machine's response-time model R(n)")
    cal.add_argument("--policy", default="st-gp-ucb")
    cal.add_argument("--sizes", type=_positive_int, nargs="+", default=[25, 50, 100, 200, 400])
    cal.add_argument("--dim", type=_positive_int, default=3)
    cal.add_argument("--repeats", type=_positive_int, default=3)
    cal.add_argument("--output", help="where to write the model (default: the user cache)")

    export = sub.add_parser("export", help="export runs and iterations to CSV or Parquet")
    export.add_argument("--store", default=DEFAULT_STORE)
    export.add_argument("--format", default="csv", choices=["csv", "parquet"])
    export.add_argument("--out", required=True, help="output directory")
    export.add_argument("--campaign", help="only this campaign id")
    return parser


def _cmd_run(args: argparse.Namespace) -> int:
    from dynbo import benchmarks
    from dynbo.harness import RunSpec, Store, execute, make_protocol
    from dynbo.policies import available, make

    if args.benchmark not in benchmarks.names():
        raise CliError(f"unknown benchmark {args.benchmark!r}; see `dynbo list benchmarks`")
    if args.policy not in available():
        raise CliError(f"unknown policy {args.policy!r}; available: {', '.join(available())}")
    protocol = make_protocol(
        {
            "clock": args.clock,
            "horizon": args.horizon,
            "warmup": args.warmup,
            "response_time": args.response_time,
        }
    )
    bench_options = _options(args.benchmark_option, "benchmark")
    try:
        bench = benchmarks.get(args.benchmark, **bench_options)
    except TypeError as err:
        raise CliError(str(err)) from None
    policy_options = _options(args.policy_option, "policy")
    # build the policy once now, so that a bad option is an error, not a failed run
    make(args.policy, bounds=bench.bounds, seed=args.seed, **policy_options)
    spec = RunSpec(
        benchmark=args.benchmark,
        policy=args.policy,
        seed=args.seed,
        protocol=protocol,
        benchmark_options=bench_options,
        policy_options=policy_options,
    )
    horizon = protocol.horizon or bench.horizon
    # open the store first: an unwritable path must not cost a whole run
    store = Store(args.store) if args.store else None

    def show(row: dict[str, Any]) -> None:
        print(
            f"\r[{args.policy} on {args.benchmark}] t={row['t']:9.2f}/{horizon:g} "
            f"k={row['k']:5d} n={row['dataset_size']:5d} regret={row['regret']:.4g}   ",
            end="",
            file=sys.stderr,
            flush=True,
        )

    result = execute(spec, on_iteration=None if args.quiet else show, benchmark=bench)
    if not args.quiet:
        print(file=sys.stderr)
    if store is not None:
        with store:
            store.save_run(result)
    print(json.dumps({"run_id": spec.run_id, "status": result.status, **result.summary}, indent=2))
    if result.status != "done":
        print(f"dynbo: run failed: {(result.error or '').splitlines()[0]}", file=sys.stderr)
        return 1
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from dynbo.harness import Store, build_campaign, load_campaign, run_campaign
    from dynbo.report.tables import summary_table

    if args.config is None and not args.suite:
        raise CliError("give a campaign config file or --suite NAME")
    if args.config is not None:
        campaign = load_campaign(args.config)
        if args.suite:
            raise CliError("give either a config file or --suite, not both")
    else:
        campaign = build_campaign({"suites": args.suite})
    if campaign.skipped_policies:
        print(
            "note: not in this version, left out of the campaign: "
            + ", ".join(campaign.skipped_policies),
            file=sys.stderr,
        )
    with Store(args.store) as store:
        outcome = run_campaign(
            campaign,
            store,
            workers=args.workers,
            scheduler=args.scheduler,
            retry_failed=args.retry_failed,
            progress=not args.no_progress,
        )
        print(
            f"campaign {campaign.name} ({outcome.campaign_id}): {outcome.total} runs, "
            f"{outcome.skipped} already stored, {outcome.done} done, {outcome.failed} failed; "
            f"store: {args.store}"
        )
        for run_id, message in outcome.failures:
            print(f"  failed {run_id}: {message}")
        print(summary_table(store.runs(outcome.campaign_id)))
    return 0 if outcome.failed == 0 else 1


def _cmd_list(args: argparse.Namespace) -> int:
    from dynbo import benchmarks
    from dynbo.policies import available, policy_class

    if args.what in ("all", "benchmarks"):
        print("benchmarks:")
        print(f"  {'name':<22}{'d':>3}  {'noise':>9}  {'c (s)':>6}  {'horizon':>9}  source")
        for name in benchmarks.names():
            info = benchmarks.get(name).info()
            print(
                f"  {info.name:<22}{info.dim:>3}  {info.noise_variance:>9.4g}  {info.cost:>6.3g}  "
                f"{info.horizon:>7g} {info.time_unit:<2} {info.reference}"
            )
    if args.what in ("all", "suites"):
        print("suites:")
        for name in benchmarks.suites():
            suite = benchmarks.suite(name)
            labels = ", ".join(e.label for e in suite.entries)
            print(f"  {name:<8} clock={suite.clock:<9} seeds={suite.seeds:<3} {labels}")
    if args.what in ("all", "policies"):
        print("policies:")
        for name in available():
            print(f"  {name:<16} {policy_class(name).reference}")
    return 0


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from dynbo.harness.calibrate import calibrate, save_calibration
    from dynbo.policies import available

    if args.policy not in available():
        raise CliError(f"unknown policy {args.policy!r}; available: {', '.join(available())}")
    model, rows = calibrate(args.policy, args.sizes, dim=args.dim, repeats=args.repeats)
    path = save_calibration(model, args.output, policy=args.policy, dim=args.dim, measurements=rows)
    print(
        json.dumps(
            {"coefficients": list(model.coefficients), "measurements": rows, "path": str(path)},
            indent=2,
        )
    )
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from dynbo.harness import Store

    if not Path(args.store).exists():
        raise CliError(f"no result store at {args.store}")
    with Store(args.store) as store:
        if args.campaign is not None and args.campaign not in store.campaign_ids():
            raise CliError(
                f"no campaign {args.campaign!r} in {args.store}; "
                f"stored: {', '.join(store.campaign_ids()) or 'none'}"
            )
        for path in store.export(args.out, args.format, args.campaign):
            print(path)
    return 0


_COMMANDS = {
    "run": _cmd_run,
    "bench": _cmd_bench,
    "list": _cmd_list,
    "calibrate": _cmd_calibrate,
    "export": _cmd_export,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dynbo`` command; returns the exit status."""
    try:
        args = _parser().parse_args(argv)
        return _COMMANDS[args.command](args)
    except (CliError, ValueError, TypeError, OSError, sqlite3.Error) as err:
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        print(f"dynbo: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dynbo: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
