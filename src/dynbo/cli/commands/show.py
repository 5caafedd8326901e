"""``dynbo show``: a store's campaigns and one campaign's table."""

from __future__ import annotations

import argparse

from dynbo.cli.common import CliError, add_store_argument, existing_store

NAME = "show"
SUMMARY = "list a store's campaigns and print one's table"
DESCRIPTION = (
    "List the campaigns of a store (read-only) and print the table of one of them "
    "(the newest unless --campaign) without running anything."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_argument(parser)
    parser.add_argument("--campaign", help="campaign id or unique prefix (default: the newest)")
    parser.add_argument(
        "--metric",
        default="average_regret",
        help="run summary metric: average_regret, time_averaged_regret, cumulative_regret, "
        "queries, mean_response_time, final_dataset_size, max_dataset_size",
    )
    parser.add_argument(
        "--format",
        default="text",
        choices=["text", "markdown", "latex", "html"],
        help="how the table is printed",
    )


def run(args: argparse.Namespace) -> int:
    import datetime as dt

    from dynbo.harness.store import Store
    from dynbo.report.html import choose_campaign
    from dynbo.report.tables import METRICS, build_table, summary_table

    existing_store(args.store)
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
