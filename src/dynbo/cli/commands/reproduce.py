"""``dynbo reproduce``: rerun a paper's headline experiment and compare with its numbers."""

from __future__ import annotations

import argparse

from dynbo.cli.common import positive_float, positive_int

NAME = "reproduce"
SUMMARY = "rerun a paper's headline experiment and compare with its numbers"

#: the reproductions `dynbo reproduce` runs (dynbo.reproductions.available()), written
#: out: that import loads torch, which --help would then wait for; a test keeps the two
#: lists equal
REPRODUCTION_NAMES = (
    "bolt-table3",
    "wdbo-table2",
    "bogunovic-fig2",
    "et-gp-ucb-temperature",
    "et-gp-ucb-cartpole",
    "w-sparq-rkhs",
)

DESCRIPTION = (
    "Run a paper's experiment (a campaign shipped with dynbo: "
    f"{', '.join(REPRODUCTION_NAMES)}) into a store, resumably "
    "like `dynbo bench`, then write the HTML report with the paper's published "
    "numbers beside the measured ones and print its path. --seeds and --horizon run "
    "a cheaper version; "
    "--dry-run prints the number of runs and a rough time estimate. See "
    "docs/reproductions.md."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help=", ".join(REPRODUCTION_NAMES))
    parser.add_argument(
        "--seeds", type=positive_int, help="run seeds 0..N-1 (default: the paper's number)"
    )
    parser.add_argument(
        "--horizon",
        type=positive_float,
        help="T in seconds (steps for the step clock) instead of the paper's",
    )
    parser.add_argument("--workers", type=positive_int, default=1, help="worker processes")
    parser.add_argument("--store", help="result store (default: results/NAME.sqlite)")
    parser.add_argument("--out", help="report directory (default: results/NAME-report)")
    parser.add_argument(
        "--dry-run", action="store_true", help="print the runs and a time estimate; run nothing"
    )


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from dynbo import reproductions
    from dynbo.cli.commands.bench import note_skipped_policies, run_with_progress
    from dynbo.harness import Store, validate_campaign
    from dynbo.report.html import check_report_folder, write_report
    from dynbo.report.tables import build_table

    campaign = reproductions.campaign_for(args.name, seeds=args.seeds, horizon=args.horizon)
    store_path = args.store or f"results/{args.name}.sqlite"
    out_dir = Path(args.out or f"results/{args.name}-report")
    check_report_folder(out_dir)  # found now, not after hours of runs
    print(f"{campaign.name}: {reproductions.describe(args.name)}")
    note_skipped_policies(campaign)
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
        outcome = run_with_progress(
            campaign, store, store_path, show_progress=True, workers=args.workers
        )
        print(
            f"campaign {campaign.name} ({outcome.campaign_id}): {outcome.total} runs, "
            f"{outcome.skipped} already stored, {outcome.done} done, {outcome.failed} failed; "
            f"store: {store_path}"
        )
        for run_id, message in outcome.failures:
            print(f"  failed {run_id}: {message}")
        runs = store.runs(outcome.campaign_id)
    # the campaign's name carries the overrides: "[seeds=1, horizon=30 time-compressed x20]"
    overrides = campaign.name.partition(" [")[2].rstrip("]")
    note = (
        f"Measured with the overrides {overrides}, not the paper's protocol." if overrides else None
    )
    # beside the papers' per-query average, the time-averaged regret of the same runs
    extra_html, markdown = reproductions.comparison(
        args.name,
        build_table(runs, "average_regret", campaign.config),
        note,
        time_averaged=build_table(runs, "time_averaged_regret", campaign.config),
    )
    page = write_report(store_path, out_dir, outcome.campaign_id, extra_html=extra_html)
    (page.parent / "paper_table.md").write_text(markdown, encoding="utf-8")
    print(page)
    return 0 if outcome.failed == 0 else 1
