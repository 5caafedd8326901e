"""``dynbo run``: one benchmark x one policy, with live progress."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from dynbo.cli.common import (
    CliError,
    RunProgress,
    key_value_options,
    non_negative_int,
    positive_float,
)

NAME = "run"
SUMMARY = "one benchmark x one policy, with live progress"
DESCRIPTION = (
    "Run one policy on one benchmark for one seed and print its summary as JSON. Progress "
    "goes to stderr: one line updated in place on a terminal, plain lines (about a dozen "
    "per run) when stderr is a file or a pipe."
)

CLOCKS = ["wall", "measured", "modeled", "step"]
CLOCK_HELP = (
    "how time advances: wall (real time), measured (the policy's measured response "
    "time advances a virtual clock), modeled (R(n) from --response-time; replays "
    "exactly), step (one step per query)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--benchmark", required=True, help="benchmark name (see `dynbo list`)")
    parser.add_argument("--policy", required=True, help="policy name (see `dynbo list`)")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="the run's seed")
    parser.add_argument("--clock", default="measured", choices=CLOCKS, help=CLOCK_HELP)
    parser.add_argument(
        "--horizon",
        type=positive_float,
        help="T, in the benchmark's time unit (seconds, or steps); default: the benchmark's",
    )
    parser.add_argument(
        "--warmup",
        type=non_negative_int,
        default=15,
        help="warm-up observations, uniform in space and in the first 1/40 of the horizon",
    )
    parser.add_argument(
        "--response-time",
        type=float,
        nargs=4,
        metavar=("C0", "C1", "C2", "C3"),
        help="R(n) = C0 + C1 n + C2 n^2 + C3 n^3 seconds for the modeled clock "
        "(default: this machine's calibration, else 0.05 + 2e-7 n^3)",
    )
    parser.add_argument(
        "--devices",
        type=int,
        default=1,
        metavar="Q",
        help="simulated devices evaluating queries at once (1 to 64; not with the step "
        "clock): one policy keeps Q devices busy (docs/harness.md, Several devices)",
    )
    parser.add_argument(
        "--benchmark-option", action="append", metavar="KEY=VALUE", help="repeatable"
    )
    parser.add_argument(
        "--policy-option",
        action="append",
        metavar="KEY=VALUE",
        help="repeatable; values are JSON (numbers, lists, true/false) or plain text",
    )
    parser.add_argument("--store", help="also save the run into this result store (SQLite)")
    parser.add_argument("--quiet", action="store_true", help="no live progress")


def run(args: argparse.Namespace) -> int:
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
            "devices": args.devices,
        }
    )
    bench_options = key_value_options(args.benchmark_option, "benchmark")
    policy_options = key_value_options(
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

    progress = None if args.quiet else RunProgress(f"{args.policy} on {args.benchmark}", horizon)
    try:
        result = execute(spec, on_iteration=progress, benchmark=bench)
    finally:
        if progress is not None:
            progress.close()  # end the progress line (also on Ctrl-C)
    if store is not None:
        with store:
            store.save_run(result)
            register_single_run(store, spec)
    print(json.dumps({"run_id": spec.run_id, "status": result.status, **result.summary}, indent=2))
    if result.status != "done":
        print(f"dynbo: run failed: {(result.error or '').splitlines()[0]}", file=sys.stderr)
        return 1
    return 0


def register_single_run(store: Any, spec: Any) -> None:
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
