"""``dynbo bench``: run a campaign into the result store."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dynbo.cli.common import (
    DEFAULT_STORE,
    CliError,
    Interrupted,
    campaign_progress,
    is_terminal,
    positive_int,
)

NAME = "bench"
SUMMARY = "run a campaign into the result store"
DESCRIPTION = (
    "Run a campaign (benchmarks x policies x seeds) into an SQLite result store. "
    "Rerunning the same command resumes: stored runs are skipped. The campaign file "
    "format is documented in docs/campaigns.md. Progress goes to stderr: a progress bar "
    "on a terminal, one plain line per finished run when stderr is a file or a pipe."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", nargs="?", help="campaign TOML file (see docs/campaigns.md)")
    parser.add_argument(
        "--suite", action="append", help="a suite of `dynbo list suites` (instead of a config)"
    )
    parser.add_argument("--store", default=DEFAULT_STORE, help="result store (SQLite file)")
    parser.add_argument("--workers", type=positive_int, default=1, help="local worker processes")
    parser.add_argument(
        "--scheduler", help="Dask scheduler address, e.g. tcp://host:8786 (overrides --workers)"
    )
    parser.add_argument(
        "--retry-failed", action="store_true", help="also rerun runs stored as failed"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress on stderr")


def run(args: argparse.Namespace) -> int:
    from dynbo.harness import (
        Store,
        build_campaign,
        connect_scheduler,
        load_campaign,
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
    note_skipped_policies(campaign)
    # every run's configuration is checked before the store is created or touched
    validate_campaign(campaign)
    client = None
    if args.scheduler:
        check_scheduler_address(args.scheduler)
        # connected before the store is created or touched
        client = connect_scheduler(args.scheduler)
    try:
        with Store(args.store) as store:
            outcome = run_with_progress(
                campaign,
                store,
                args.store,
                show_progress=not args.no_progress,
                workers=args.workers,
                scheduler=client,
                retry_failed=args.retry_failed,
            )
            print_campaign_outcome(campaign, outcome, store, args.store)
    finally:
        if client is not None:
            client.close()
    return 0 if outcome.failed == 0 else 1


def note_skipped_policies(campaign: Any) -> None:
    if campaign.skipped_policies:
        print(
            "note: not in this version, left out of the campaign: "
            + ", ".join(campaign.skipped_policies),
            file=sys.stderr,
        )


def run_with_progress(
    campaign: Any,
    store: Any,
    store_path: str,
    *,
    show_progress: bool,
    retry_failed: bool = False,
    **options: Any,
) -> Any:
    """:func:`dynbo.harness.run_campaign` with its progress on stderr: the progress bar on
    a terminal, plain lines elsewhere (no carriage return in a log file); Ctrl-C becomes
    :class:`Interrupted` with what was kept."""
    from dynbo.harness import run_campaign

    bar, on_result = False, None
    if show_progress and is_terminal(sys.stderr):
        bar = True
    elif show_progress:
        stored = store.completed_run_ids(include_failed=not retry_failed)
        total = len({spec.run_id for spec in campaign.specs} - stored)
        on_result = campaign_progress(campaign.name, total)
    try:
        return run_campaign(
            campaign,
            store,
            retry_failed=retry_failed,
            progress=bar,
            on_result=on_result,
            **options,
        )
    except KeyboardInterrupt:
        raise Interrupted(
            f"finished runs are stored in {store_path}; run the same command to resume"
        ) from None


def check_scheduler_address(address: str) -> None:
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


def print_campaign_outcome(campaign: Any, outcome: Any, store: Any, path: str) -> None:
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
