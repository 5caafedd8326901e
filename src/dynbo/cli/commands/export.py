"""``dynbo export``: a store's runs and iterations as CSV or Parquet files."""

from __future__ import annotations

import argparse

from dynbo.cli.common import add_store_argument, existing_store

NAME = "export"
SUMMARY = "export runs and iterations to CSV or Parquet"
DESCRIPTION = (
    "Write the runs and iterations tables of a store (opened read-only) to files. Every "
    "row of the runs table names its campaign (campaign_id): a run that several campaigns "
    "share has one row per campaign (see docs/reports.md)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_argument(parser)
    parser.add_argument("--format", default="csv", choices=["csv", "parquet"], help="file format")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--campaign", help="only this campaign (id or unique prefix)")


def run(args: argparse.Namespace) -> int:
    from dynbo.harness.store import Store
    from dynbo.report.html import choose_campaign

    existing_store(args.store)
    with Store(args.store, read_only=True) as store:
        campaign_id = None
        if args.campaign is not None:  # an id or a unique prefix, as `show` and `report`
            campaign_id = choose_campaign(store, args.campaign)["campaign_id"]
        for path in store.export(args.out, args.format, campaign_id):
            print(path)
    return 0
