"""The ``dynbo`` command line: run, bench, list, calibrate, export, report, show.

    dynbo run --benchmark eggholder --policy st-gp-ucb --clock measured --horizon 120
    dynbo bench --suite quick --workers 2 --store results/quick.sqlite
    dynbo bench campaign.toml --scheduler tcp://host:8786
    dynbo list [benchmarks|suites|policies]
    dynbo calibrate --policy st-gp-ucb --sizes 25 50 100 200
    dynbo export --store results/quick.sqlite --format parquet --out results/quick
    dynbo report results/quick.sqlite --out results/quick-report
    dynbo show results/quick.sqlite [--campaign ID] [--format markdown]
    dynbo serve --store results/serve.sqlite --port 8000 [--host 0.0.0.0 --token TOKEN]

Bad arguments end with one line on stderr (``dynbo: error: ...``) and exit status 2; an
interrupt (Ctrl-C) with one line and exit status 130.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sqlite3
import sys
from collections.abc import Sequence
from typing import Any

from dynbo.validation import parse_boolean_text

__all__ = ["main"]

DEFAULT_STORE = "results/dynbo.sqlite"


class CliError(Exception):
    """A user error: printed as one line, exit status 2."""


class Interrupted(Exception):
    """Ctrl-C, with what was kept: printed as one line, exit status 130."""


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


def _options(
    pairs: Sequence[str] | None, what: str, defaults: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``key=value`` pairs; values parsed as JSON when they can be (numbers, lists, true).

    An option whose default is a boolean also takes ``yes/no/on/off/1/0`` (any case);
    any other value for it is left as given, for the policy to reject by name.
    """
    out: dict[str, Any] = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise CliError(f"{what} option {pair!r} is not of the form key=value")
        key, text = pair.split("=", 1)
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        if defaults is not None and isinstance(defaults.get(key), bool):
            word = parse_boolean_text(text)
            if word is not None:
                value = word
        out[key] = value
    return out


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        raise CliError(message)


class _Help(argparse.HelpFormatter):
    """Show each option's default (where it has one worth showing)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        shown = default is not None and default is not False and default is not argparse.SUPPRESS
        if shown and action.option_strings and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


#: the reproductions `dynbo reproduce` runs (dynbo.reproductions.available())
REPRODUCTION_NAMES = (
    "bolt-table3",
    "wdbo-table2",
    "bogunovic-fig2",
    "et-gp-ucb-temperature",
    "w-sparq-rkhs",
)


def _parser() -> argparse.ArgumentParser:
    from dynbo import __version__

    # written out, not read from dynbo.reproductions: that import loads torch, which
    # every command (--help too) would then wait for; a test keeps the two lists equal
    reproduction_names = REPRODUCTION_NAMES

    parser = _Parser(
        prog="dynbo",
        description="Time-varying Bayesian optimization: policies, benchmarks and a "
        "reproducible benchmark harness.",
        formatter_class=_Help,
    )
    parser.add_argument("--version", action="version", version=f"dynbo {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def add(name: str, summary: str, description: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=summary, description=description, formatter_class=_Help)

    clocks = ["wall", "measured", "modeled", "step"]
    clock_help = (
        "how time advances: wall (real time), measured (the policy's measured response "
        "time advances a virtual clock), modeled (R(n) from --response-time; replays "
        "exactly), step (one step per query)"
    )
    run = add(
        "run",
        "one benchmark x one policy, with live progress",
        "Run one policy on one benchmark for one seed and print its summary as JSON.",
    )
    run.add_argument("--benchmark", required=True, help="benchmark name (see `dynbo list`)")
    run.add_argument("--policy", required=True, help="policy name (see `dynbo list`)")
    run.add_argument("--seed", type=_non_negative_int, default=0, help="the run's seed")
    run.add_argument("--clock", default="measured", choices=clocks, help=clock_help)
    run.add_argument(
        "--horizon",
        type=_positive_float,
        help="T, in the benchmark's time unit (seconds, or steps); default: the benchmark's",
    )
    run.add_argument(
        "--warmup",
        type=_non_negative_int,
        default=15,
        help="warm-up observations, uniform in space and in the first 1/40 of the horizon",
    )
    run.add_argument(
        "--response-time",
        type=float,
        nargs=4,
        metavar=("C0", "C1", "C2", "C3"),
        help="R(n) = C0 + C1 n + C2 n^2 + C3 n^3 seconds for the modeled clock "
        "(default: this machine's calibration, else 0.05 + 2e-7 n^3)",
    )
    run.add_argument("--benchmark-option", action="append", metavar="KEY=VALUE", help="repeatable")
    run.add_argument(
        "--policy-option",
        action="append",
        metavar="KEY=VALUE",
        help="repeatable; values are JSON (numbers, lists, true/false) or plain text",
    )
    run.add_argument("--store", help="also save the run into this result store (SQLite)")
    run.add_argument("--quiet", action="store_true", help="no live progress")

    bench = add(
        "bench",
        "run a campaign into the result store",
        "Run a campaign (benchmarks x policies x seeds) into an SQLite result store. "
        "Rerunning the same command resumes: stored runs are skipped. The campaign file "
        "format is documented in docs/campaigns.md.",
    )
    bench.add_argument("config", nargs="?", help="campaign TOML file (see docs/campaigns.md)")
    bench.add_argument(
        "--suite", action="append", help="a suite of `dynbo list suites` (instead of a config)"
    )
    bench.add_argument("--store", default=DEFAULT_STORE, help="result store (SQLite file)")
    bench.add_argument("--workers", type=_positive_int, default=1, help="local worker processes")
    bench.add_argument(
        "--scheduler", help="Dask scheduler address, e.g. tcp://host:8786 (overrides --workers)"
    )
    bench.add_argument(
        "--retry-failed", action="store_true", help="also rerun runs stored as failed"
    )
    bench.add_argument("--no-progress", action="store_true", help="no progress bar")

    lister = add("list", "benchmarks, suites and policies", "List what dynbo provides.")
    lister.add_argument(
        "what", nargs="?", default="all", choices=["all", "benchmarks", "suites", "policies"]
    )

    cal = add(
        "calibrate",
        "fit this machine's response-time model R(n)",
        "Time a policy's iterations at several dataset sizes and fit the cubic R(n) the "
        "modeled clock uses.",
    )
    cal.add_argument("--policy", default="st-gp-ucb", help="policy to time")
    cal.add_argument(
        "--sizes",
        type=_positive_int,
        nargs="+",
        default=[25, 50, 100, 200, 400],
        help="dataset sizes to time",
    )
    cal.add_argument("--dim", type=_positive_int, default=3, help="spatial dimension")
    cal.add_argument("--repeats", type=_positive_int, default=3, help="timed calls per size")
    cal.add_argument("--output", help="where to write the model (default: the user cache)")

    export = add(
        "export",
        "export runs and iterations to CSV or Parquet",
        "Write the runs and iterations tables of a store (opened read-only) to files.",
    )
    export.add_argument("--store", default=DEFAULT_STORE, help="result store (SQLite file)")
    export.add_argument("--format", default="csv", choices=["csv", "parquet"], help="file format")
    export.add_argument("--out", required=True, help="output directory")
    export.add_argument("--campaign", help="only this campaign id")
    report = add(
        "report",
        "write a campaign's HTML report (tables and figures)",
        "Read a store (read-only) and write one self-contained HTML page with the "
        "campaign's tables and figures, plus its Markdown and LaTeX table; prints the "
        "page's path.",
    )
    report.add_argument("store", help="result store (SQLite file)")
    report.add_argument("--campaign", help="campaign id or unique prefix (default: the newest)")
    report.add_argument("--out", required=True, help="output directory")
    report.add_argument(
        "--animate",
        action="store_true",
        help="add a GIF of one run per policy variant on each 1-D benchmark (re-runs it)",
    )
    show = add(
        "show",
        "list a store's campaigns and print one's table",
        "List the campaigns of a store (read-only) and print the table of one of them "
        "(the newest unless --campaign) without running anything.",
    )
    show.add_argument("store", help="result store (SQLite file)")
    show.add_argument("--campaign", help="campaign id or unique prefix (default: the newest)")
    show.add_argument(
        "--metric",
        default="average_regret",
        help="run summary metric: average_regret, time_averaged_regret, cumulative_regret, "
        "queries, mean_response_time, final_dataset_size, max_dataset_size",
    )
    show.add_argument(
        "--format",
        default="text",
        choices=["text", "markdown", "latex", "html"],
        help="how the table is printed",
    )
    theory = add(
        "theory",
        "draw BOLT's theory figures (Fig. 1 and 2)",
        "Write BOLT's Fig. 1 (lower-bound regret slope against the sampling frequency) and "
        "Fig. 2 (dataset utility against the dataset size, n* marked) as PNG files; prints "
        "their paths.",
    )
    theory.add_argument("--out", required=True, help="output directory")
    reproduce = add(
        "reproduce",
        "rerun a paper's headline experiment and compare with its numbers",
        "Run a paper's experiment (a campaign shipped with dynbo: "
        f"{', '.join(reproduction_names)}) into a store, resumably "
        "like `dynbo bench`, then write the HTML report with the paper's published "
        "numbers beside the measured ones and print its path. --seeds and --horizon run "
        "a cheaper version; "
        "--dry-run prints the number of runs and a rough time estimate. See "
        "docs/reproductions.md.",
    )
    reproduce.add_argument("name", help=", ".join(reproduction_names))
    reproduce.add_argument(
        "--seeds", type=_positive_int, help="run seeds 0..N-1 (default: the paper's number)"
    )
    reproduce.add_argument(
        "--horizon",
        type=_positive_float,
        help="T in seconds (steps for the step clock) instead of the paper's",
    )
    reproduce.add_argument("--workers", type=_positive_int, default=1, help="worker processes")
    reproduce.add_argument("--store", help="result store (default: results/NAME.sqlite)")
    reproduce.add_argument("--out", help="report directory (default: results/NAME-report)")
    reproduce.add_argument(
        "--dry-run", action="store_true", help="print the runs and a time estimate; run nothing"
    )
    data = add(
        "data",
        "download and cache a data set",
        "Download a data set the benchmarks can use into the cache directory (--data-dir, "
        "else $DYNBO_DATA_DIR, else ~/.cache/dynbo), once; prints the cached file's path "
        "and what it holds. intel-lab: the raw Intel Lab readings (~34 MB), for "
        "`--benchmark-option source=raw` of the temperature benchmark.",
    )
    data.add_argument("name", choices=["intel-lab"], help="the data set")
    data.add_argument("--data-dir", help="cache directory")
    data.add_argument("--url", help="download from here instead of the data set's home page")
    server = add(
        "serve",
        "an HTTP/JSON ask/tell service for live systems (crash-safe)",
        "Serve studies over HTTP/JSON (FastAPI on uvicorn: pip install 'dynbo[serve]'): "
        "create, suggest, observe, history (JSON, CSV), GET /openapi.json, and a dashboard "
        "at /. Every accepted observation is committed to the store before it is answered; "
        "after a crash, a restart rebuilds every study exactly. Binding to an address that "
        "is not loopback requires --token. See docs/live.md.",
    )
    server.add_argument("--store", default="results/serve.sqlite", help="service store (SQLite)")
    server.add_argument("--host", default="127.0.0.1", help="address to bind")
    server.add_argument(
        "--port", type=_port, default=8000, help="TCP port (0: any free port, announced at start)"
    )
    server.add_argument(
        "--token", help="bearer token every request must carry (default: $DYNBO_TOKEN)"
    )
    server.add_argument(
        "--checkpoint-every",
        type=_positive_int,
        default=10,
        help="checkpoint a study's policy state every N observations (and at shutdown)",
    )
    server.add_argument(
        "--no-refit",
        action="store_true",
        help="do not refit the hyperparameters in the background after an observation",
    )
    server.add_argument(
        "--workers", type=_positive_int, default=4, help="threads running the studies' policies"
    )
    server.add_argument(
        "--max-body", type=_positive_int, default=1 << 20, help="largest request body (bytes)"
    )
    return parser


def _port(text: str) -> int:
    value = _non_negative_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"expected a port 0..65535, got {text!r}")
    return value


def _cmd_data(args: argparse.Namespace) -> int:
    from dynbo.benchmarks import intel_lab

    options = {"url": args.url} if args.url else {}
    path = intel_lab.fetch_raw(args.data_dir, **options)
    table = intel_lab.read_raw(path)
    print(
        json.dumps(
            {
                "path": str(path),
                "motes": len(table.motes),
                "bins_10min": int(table.temperature.shape[1]),
                "readings_kept": int(table.counts.sum()),
                "start": None if table.start is None else table.start.isoformat(),
            }
        )
    )
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from dynbo import benchmarks
    from dynbo.harness import RunSpec, Store, execute, make_protocol
    from dynbo.harness.loop import benchmark_options, check_clock_advances, make_run_policy
    from dynbo.policies import available, option_defaults, policy_class

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
    policy_options = _options(
        args.policy_option, "policy", option_defaults(policy_class(args.policy))
    )
    spec = RunSpec(
        benchmark=args.benchmark,
        policy=args.policy,
        seed=args.seed,
        protocol=protocol,
        benchmark_options=bench_options,
        policy_options=policy_options,
    )
    try:
        # as the run builds it: with the run's seed and horizon where the benchmark takes them
        bench = benchmarks.get(args.benchmark, **benchmark_options(spec))
    except TypeError as err:
        raise CliError(str(err)) from None
    horizon = protocol.horizon or bench.horizon
    # build the policy once now, as the run will (with what the benchmark tells it), so
    # that a bad option is an error, not a failed run
    make_run_policy(spec, bench, horizon)
    check_clock_advances(protocol, float(bench.cost if protocol.cost is None else protocol.cost))
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

    try:
        result = execute(spec, on_iteration=None if args.quiet else show, benchmark=bench)
    finally:
        if not args.quiet:
            print(file=sys.stderr)  # end the progress line (also on Ctrl-C)
    if store is not None:
        with store:
            store.save_run(result)
            _register_single_run(store, spec)
    print(json.dumps({"run_id": spec.run_id, "status": result.status, **result.summary}, indent=2))
    if result.status != "done":
        print(f"dynbo: run failed: {(result.error or '').splitlines()[0]}", file=sys.stderr)
        return 1
    return 0


def _register_single_run(store: Any, spec: Any) -> None:
    """Store ``spec``'s run as a campaign of its own, so that ``show``, ``report`` and
    ``export`` find it like any other (its configuration rebuilds exactly this run)."""
    from dynbo.harness.campaign import Campaign

    name = f"run: {spec.policy} on {spec.benchmark} (seed {spec.seed})"
    protocol = {k: v for k, v in spec.protocol.as_dict().items() if v is not None}
    config = {
        "name": name,
        "benchmarks": [{"name": spec.benchmark, "options": dict(spec.benchmark_options)}],
        "policies": [{"name": spec.policy, "options": dict(spec.policy_options)}],
        "seeds": [spec.seed],
        "protocol": protocol,
    }
    campaign = Campaign(name=name, specs=(spec,), config=config)
    store.add_campaign(campaign.campaign_id, name, config)
    store.link(campaign.campaign_id, [spec.run_id])


def _check_scheduler_address(address: str) -> None:
    """A Dask scheduler address that is well formed (``tcp://host:port``), before any store.

    Whether a scheduler answers there is only known when the campaign connects.
    """
    try:
        from distributed.comm.addressing import parse_address, parse_host_port
    except ImportError:  # the campaign reports the missing extra itself
        return
    try:
        _, location = parse_address(address)
        if "://" not in address or address.startswith(("tcp://", "tls://")):
            parse_host_port(location)
    except (TypeError, ValueError) as err:
        raise CliError(f"--scheduler {address!r}: {err}") from None


def _cmd_bench(args: argparse.Namespace) -> int:
    from dynbo.harness import (
        Store,
        build_campaign,
        connect_scheduler,
        load_campaign,
        run_campaign,
        validate_campaign,
    )

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
    # every run's configuration is checked before the store is created or touched
    validate_campaign(campaign)
    client = None
    if args.scheduler:
        _check_scheduler_address(args.scheduler)
        # connected before the store is created or touched
        client = connect_scheduler(args.scheduler)
    try:
        with Store(args.store) as store:
            try:
                outcome = run_campaign(
                    campaign,
                    store,
                    workers=args.workers,
                    scheduler=client,
                    retry_failed=args.retry_failed,
                    progress=not args.no_progress,
                )
            except KeyboardInterrupt:
                raise Interrupted(
                    f"finished runs are stored in {args.store}; run the same command to resume"
                ) from None
            _print_campaign_outcome(campaign, outcome, store, args.store)
    finally:
        if client is not None:
            client.close()
    return 0 if outcome.failed == 0 else 1


def _print_campaign_outcome(campaign: Any, outcome: Any, store: Any, path: str) -> None:
    """What ``dynbo bench`` prints when a campaign ends: counts, failures, the summary table."""
    from dynbo.report.tables import summary_table

    print(
        f"campaign {campaign.name} ({outcome.campaign_id}): {outcome.total} runs, "
        f"{outcome.skipped} already stored, {outcome.done} done, {outcome.failed} failed; "
        f"store: {path}"
    )
    for run_id, message in outcome.failures:
        print(f"  failed {run_id}: {message}")
    config = next(c["config"] for c in store.campaigns() if c["campaign_id"] == outcome.campaign_id)
    print(summary_table(store.runs(outcome.campaign_id), config=config))


def _cmd_list(args: argparse.Namespace) -> int:
    from dynbo import benchmarks
    from dynbo.policies import available, policy_class

    if args.what in ("all", "benchmarks"):
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
        _print_table(("name", "d", "noise", "c (s)", "horizon", "source"), rows, "llrrrl")
        print("benchmark options (a campaign entry's 'options', dynbo run --benchmark-option):")
        rows = [(name, ", ".join(benchmarks.options(name))) for name in benchmarks.names()]
        _print_table(("name", "options"), rows, "ll")
    if args.what in ("all", "suites"):
        print("suites:")
        rows = []
        for name in benchmarks.suites():
            suite = benchmarks.suite(name)
            labels = ", ".join(e.label for e in suite.entries)
            rows.append((name, suite.clock, str(suite.seeds), labels))
        _print_table(("name", "clock", "seeds", "benchmarks"), rows, "llrl")
    if args.what in ("all", "policies"):
        print("policies:")
        rows = [(name, policy_class(name).reference) for name in available()]
        _print_table(("name", "algorithm"), rows, "ll")
    return 0


def _print_table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> None:
    """Columns as wide as their longest cell (the last column is not padded)."""
    widths = [max(len(r[j]) for r in [header, *rows]) for j in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        parts = []
        for j, cell in enumerate(cells):
            if j == len(cells) - 1:
                parts.append(cell)
            elif align[j] == "r":
                parts.append(cell.rjust(widths[j]))
            else:
                parts.append(cell.ljust(widths[j]))
        return "  " + "  ".join(parts)

    print(line(header))
    for row in rows:
        print(line(row))


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from dynbo.harness.calibrate import calibrate, calibration_target, save_calibration
    from dynbo.policies import available

    if args.policy not in available():
        raise CliError(f"unknown policy {args.policy!r}; available: {', '.join(available())}")
    try:
        calibration_target(args.output)  # before minutes of measuring
    except ValueError as err:
        raise CliError(str(err)) from None
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
    from dynbo.report.html import choose_campaign

    if not Path(args.store).exists():
        raise CliError(f"no result store at {args.store}")
    with Store(args.store, read_only=True) as store:
        campaign_id = None
        if args.campaign is not None:  # an id or a unique prefix, as `show` and `report`
            campaign_id = choose_campaign(store, args.campaign)["campaign_id"]
        for path in store.export(args.out, args.format, campaign_id):
            print(path)
    return 0


def _existing_store(path: str) -> None:
    from pathlib import Path

    if not Path(path).is_file():
        raise CliError(f"no result store at {path}")


def _cmd_report(args: argparse.Namespace) -> int:
    from dynbo.report.html import write_report

    _existing_store(args.store)
    print(write_report(args.store, args.out, args.campaign, animate=args.animate))
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    import datetime as dt

    from dynbo.harness import Store
    from dynbo.report.html import choose_campaign
    from dynbo.report.tables import METRICS, build_table, summary_table

    _existing_store(args.store)
    with Store(args.store, read_only=True) as store:
        campaigns = store.campaigns()
        campaign = choose_campaign(store, args.campaign)
        runs = store.runs(campaign["campaign_id"])
    known = {k for r in runs if r["status"] == "done" for k in (r["summary"] or {})}
    if known and args.metric not in known:
        # a misspelled metric must not read as "no finished runs"
        raise CliError(
            f"unknown metric {args.metric!r}; the finished runs have: "
            + ", ".join(sorted(k for k in known if k in METRICS) or sorted(known))
        )
    for c in campaigns:
        when = dt.datetime.fromtimestamp(c["created_at"], dt.timezone.utc)
        mark = "*" if c is campaign or c["campaign_id"] == campaign["campaign_id"] else " "
        print(
            f"{mark} {c['campaign_id'][:12]}  {c['name']:<24} {when:%Y-%m-%d %H:%M}  "
            f"{c['done']} done, {c['failed']} failed, {c['linked']} linked"
        )
    print()
    try:
        table = build_table(runs, args.metric, campaign["config"])
    except ValueError:
        table = None  # no value to tabulate: the text view says why, in every format
    if args.format == "text" or table is None:
        print(summary_table(runs, args.metric, campaign["config"]))
        return 0
    print({"markdown": table.markdown, "latex": table.latex, "html": table.html}[args.format]())
    return 0


def _cmd_theory(args: argparse.Namespace) -> int:
    from pathlib import Path

    from dynbo.report.theory_figures import lower_bound_figure, utility_figure

    out = Path(args.out)
    print(lower_bound_figure(out / "bolt_fig1_lower_bound_slope.png"))
    print(utility_figure(out / "bolt_fig2_dataset_utility.png"))
    return 0


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from pathlib import Path

    from dynbo import reproductions
    from dynbo.harness import Store, run_campaign, validate_campaign
    from dynbo.report.html import check_report_folder, write_report
    from dynbo.report.tables import build_table

    campaign = reproductions.campaign_for(args.name, seeds=args.seeds, horizon=args.horizon)
    store_path = args.store or f"results/{args.name}.sqlite"
    out_dir = Path(args.out or f"results/{args.name}-report")
    check_report_folder(out_dir)  # found now, not after hours of runs
    print(f"{campaign.name}: {reproductions.describe(args.name)}")
    if campaign.skipped_policies:
        print(
            "note: not in this version, left out of the campaign: "
            + ", ".join(campaign.skipped_policies),
            file=sys.stderr,
        )
    print(reproductions.estimate(campaign, workers=args.workers).describe())
    if args.dry_run:
        if Path(store_path).is_file():
            with Store(store_path, read_only=True) as store:
                done = store.completed_run_ids(include_failed=True)
            stored = sum(spec.run_id in done for spec in campaign.specs)
            print(f"{stored} of them already in {store_path}")
        print("dry run: nothing was run")
        return 0
    # every run's configuration is checked before the store is created or touched
    validate_campaign(campaign)
    with Store(store_path) as store:
        try:
            outcome = run_campaign(
                campaign, store, workers=args.workers, progress=sys.stderr.isatty()
            )
        except KeyboardInterrupt:
            raise Interrupted(
                f"finished runs are stored in {store_path}; run the same command to resume"
            ) from None
        print(
            f"campaign {campaign.name} ({outcome.campaign_id}): {outcome.total} runs, "
            f"{outcome.skipped} already stored, {outcome.done} done, {outcome.failed} failed; "
            f"store: {store_path}"
        )
        for run_id, message in outcome.failures:
            print(f"  failed {run_id}: {message}")
        runs = store.runs(outcome.campaign_id)
    overrides = [f"{k}={v:g}" for k, v in (("seeds", args.seeds), ("horizon", args.horizon)) if v]
    note = (
        f"Measured with the cheaper overrides {', '.join(overrides)}, not the paper's protocol."
        if overrides
        else None
    )
    extra_html, markdown = reproductions.comparison(
        args.name, build_table(runs, "average_regret", campaign.config), note
    )
    page = write_report(
        store_path,
        out_dir,
        outcome.campaign_id,
        extra_html=extra_html,
    )
    (page.parent / "paper_table.md").write_text(markdown, encoding="utf-8")
    print(page)
    return 0 if outcome.failed == 0 else 1


def _cmd_serve(args: argparse.Namespace) -> int:
    import importlib.util
    import ipaddress
    import os

    from_env = args.token is None
    token = args.token if not from_env else os.environ.get("DYNBO_TOKEN") or None
    if token is not None and not token.strip():
        raise CliError(f"{'DYNBO_TOKEN' if from_env else '--token'} must not be empty")
    # an IPv6 address as written in a URL, "[::1]", is the address "::1"
    host = args.host[1:-1] if args.host.startswith("[") and args.host.endswith("]") else args.host
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and token is None:
        raise CliError(
            f"binding to {host} (not a loopback address) requires --token (or DYNBO_TOKEN)"
        )
    missing = [m for m in ("fastapi", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        raise CliError(f"dynbo serve needs {' and '.join(missing)}: pip install 'dynbo[serve]'")
    import socket

    from dynbo.service.app import check_token, serve
    from dynbo.service.storage import ServiceStore

    try:
        check_token(token)
    except ValueError as err:
        raise CliError(f"{'DYNBO_TOKEN' if from_env else '--token'}: {err}") from None
    # the address and the store are checked here, where a failure is one line, not in
    # uvicorn's startup, where it is a logged traceback (and a store file left behind);
    # the socket opened here is the one served (port 0: the free port it got, announced)
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.create_server((host, args.port), family=family)
    except OSError as err:
        raise CliError(f"cannot listen on {host}:{args.port}: {err}") from None
    try:
        try:
            ServiceStore(args.store).close()
        except ValueError as err:
            raise CliError(str(err)) from None
        serve(
            args.store,
            token=token,
            checkpoint_every=args.checkpoint_every,
            refit=not args.no_refit,
            workers=args.workers,
            max_body=args.max_body,
            sock=sock,
        )
    finally:
        sock.close()
    return 0


_COMMANDS = {
    "run": _cmd_run,
    "bench": _cmd_bench,
    "list": _cmd_list,
    "calibrate": _cmd_calibrate,
    "export": _cmd_export,
    "report": _cmd_report,
    "show": _cmd_show,
    "theory": _cmd_theory,
    "reproduce": _cmd_reproduce,
    "data": _cmd_data,
    "serve": _cmd_serve,
}


def _describe(err: BaseException) -> str:
    """One line for an error: an OSError says what failed on which path, in words."""
    if isinstance(err, OSError) and err.strerror:
        where = err.filename if err.filename is not None else ""
        other = f" -> {err.filename2}" if getattr(err, "filename2", None) else ""
        return f"{err.strerror}: {where}{other}" if where else err.strerror
    # a message over several lines (a parser's, with the text and a caret) is joined,
    # so that the one line is never blank and keeps what the first line does not say
    text = " ".join(line.strip() for line in str(err).splitlines() if line.strip())
    if len(text) > 1000:
        text = f"{text[:1000]}... ({len(text)} characters)"
    return text or type(err).__name__


#: arguments that name files or folders (an empty one is refused)
_PATH_ARGUMENTS = ("store", "out", "output", "data_dir", "config")


def _stdout_closed() -> bool:
    """Whether standard output is a pipe whose reader has gone away; if so, point it at
    /dev/null, so that the interpreter's final flush stays quiet."""
    import select

    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        # the write end of a pipe without a reader reports an error condition
        closed = any(event & select.POLLERR for _, event in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # not a real file (a test's capture)
        return False
    if closed:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
    return closed


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dynbo`` command; returns the exit status."""
    try:
        args = _parser().parse_args(argv)
        for name in _PATH_ARGUMENTS:
            if getattr(args, name, None) == "":
                # Path("") is the working directory and SQLite's "" a throwaway database:
                # an empty path would write where nobody asked, or nowhere
                raise CliError(f"the {name.replace('_', '-')} path is empty")
        return _COMMANDS[args.command](args)
    except BrokenPipeError as err:
        if not _stdout_closed():  # another pipe (a worker's, a cluster's): an error
            print(f"dynbo: error: {_describe(err)}", file=sys.stderr)
            return 2
        # the reader of our output went away (`dynbo show | head -1`): not an error
        return 141  # 128 + SIGPIPE, what a shell reports for a killed writer
    except (CliError, ValueError, TypeError, OSError, sqlite3.Error) as err:
        print(f"dynbo: error: {_describe(err)}", file=sys.stderr)
        return 2
    except Interrupted as err:
        print(f"dynbo: interrupted: {err}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("dynbo: interrupted", file=sys.stderr)
        return 130


def console_main() -> None:
    """The ``dynbo`` command: :func:`main`'s status becomes the process's exit status.

    An interrupted command (status 130) ends at once with ``os._exit`` after its line is
    printed: at a normal interpreter exit, a worker pool whose workers were terminated
    under it can block the exit-time join of its manager thread for ever (seen in CI:
    ``dynbo bench`` alive 15 minutes after Ctrl-C, its workers gone). What a campaign
    stores is committed run by run, and SQLite keeps a file consistent however its
    process ends.
    """
    code = main()
    if code == 130:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    console_main()
