"""``dynbo report``: a campaign's HTML report (tables and figures)."""

from __future__ import annotations

import argparse

from dynbo.cli.common import add_store_argument, existing_store

NAME = "report"
SUMMARY = "write a campaign's HTML report (tables and figures)"
DESCRIPTION = (
    "Read a store (read-only) and write one self-contained HTML page with the "
    "campaign's tables and figures, plus its Markdown and LaTeX table; prints the "
    "page's path."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_argument(parser)
    parser.add_argument("--campaign", help="campaign id or unique prefix (default: the newest)")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument(
        "--animate",
        action="store_true",
        help="add a GIF of one run per policy variant on each 1-D benchmark (re-runs it)",
    )


def run(args: argparse.Namespace) -> int:
    from dynbo.report.html import write_report

    existing_store(args.store)
    print(write_report(args.store, args.out, args.campaign, animate=args.animate))
    return 0
