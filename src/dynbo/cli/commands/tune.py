"""``dynbo tune``: choose each policy's settings on tuning seeds, write the campaign to evaluate."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from dynbo.cli.common import DEFAULT_STORE, CliError, positive_int

NAME = "tune"
SUMMARY = "tune each policy's settings on seeds apart from the evaluation seeds"
DESCRIPTION = (
    "For a campaign or suite, run BUDGET candidate settings of every policy (its own "
    "settings, then a scrambled Sobol design over its declared tunable options) on every "
    "benchmark and every tuning seed, as one campaign stored like any other (rerunning "
    "resumes), choose each policy's best by the OVERALL score of the metric, and write "
    "the evaluation campaign with the chosen settings and how they were chosen "
    "(docs/tuning.md). The tuning seeds must be apart from the campaign's seeds."
)


def seed_list(text: str) -> list[int]:
    """``"100-104"``, ``"3,7,9-11"``: the seeds a range list names (``argparse`` type)."""
    seeds: list[int] = []
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        try:
            first = int(low)
            last = int(high) if dash else first
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected seeds such as 100-104 or 3,7,9-11, got {text!r}"
            ) from None
        if first < 0 or last < first:
            raise argparse.ArgumentTypeError(
                f"expected non-negative seeds and ranges low-high with low <= high, got {text!r}"
            )
        if last - first >= 100_000:
            raise argparse.ArgumentTypeError(f"the range {part.strip()} lists too many seeds")
        seeds += range(first, last + 1)
    return seeds


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", nargs="?", help="campaign TOML file (see docs/campaigns.md)")
    parser.add_argument(
        "--suite", action="append", help="a suite of `dynbo list suites` (instead of a config)"
    )
    parser.add_argument(
        "--tuning-seeds",
        type=seed_list,
        required=True,
        metavar="SEEDS",
        help="seeds of the tuning runs, e.g. 100-104 (none of them an evaluation seed)",
    )
    parser.add_argument(
        "--budget", type=positive_int, required=True, help="candidate settings per policy"
    )
    parser.add_argument("--out", required=True, help="the evaluation campaign to write (TOML file)")
    parser.add_argument(
        "--store", default=DEFAULT_STORE, help="result store of the tuning runs (SQLite file)"
    )
    parser.add_argument("--workers", type=positive_int, default=1, help="local worker processes")
    parser.add_argument(
        "--metric",
        choices=("average_regret", "time_averaged_regret"),
        default="average_regret",
        help="the run summary minimized",
    )
    parser.add_argument(
        "--retry-failed", action="store_true", help="also rerun tuning runs stored as failed"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress on stderr")


def run(args: argparse.Namespace) -> int:
    from dynbo.cli.commands.bench import note_skipped_policies, run_with_progress
    from dynbo.harness import Store, build_campaign, load_campaign
    from dynbo.harness.tune import finish_tuning, plan_tuning, write_campaign

    if args.config is None and not args.suite:
        raise CliError("give a campaign config file or --suite NAME")
    if args.config is not None and args.suite:
        raise CliError("give either a config file or --suite, not both")
    out = Path(args.out)
    if out.is_dir():
        raise CliError(f"--out {args.out} is a directory; give the campaign file to write")
    if not (out.parent if str(out.parent) else Path(".")).is_dir():
        raise CliError(f"--out {args.out}: no such directory {out.parent}")
    if args.config is not None and os.path.exists(args.out):
        if os.path.samefile(args.config, args.out):
            raise CliError("--out names the campaign file being tuned; write another file")
    campaign = (
        load_campaign(args.config)
        if args.config is not None
        else build_campaign({"suites": args.suite})
    )
    note_skipped_policies(campaign)
    # every check (seeds apart, budget, each candidate's options) before the store is touched
    plan = plan_tuning(
        campaign, tuning_seeds=args.tuning_seeds, budget=args.budget, metric=args.metric
    )
    with Store(args.store) as store:
        outcome = run_with_progress(
            plan.campaign,
            store,
            args.store,
            show_progress=not args.no_progress,
            workers=args.workers,
            retry_failed=args.retry_failed,
        )
        result = finish_tuning(plan, store, outcome)
    write_campaign(result.config, out)
    print(
        f"tuning campaign {plan.campaign.name} ({outcome.campaign_id}): {outcome.total} runs, "
        f"{outcome.skipped} already stored, {outcome.done} done, {outcome.failed} failed; "
        f"store: {args.store}"
    )
    for run_id, message in outcome.failures:
        print(f"  failed {run_id}: {message}")
    for choice in result.choices:
        settings = choice.candidates[choice.chosen]
        chosen = ", ".join(f"{k} = {v}" for k, v in settings.items()) or "its own settings"
        print(
            f"  {choice.heading}: candidate {choice.chosen} of {len(choice.scores)} "
            f"({chosen}), score {choice.scores[choice.chosen]:.3f} "
            f"(own settings: {choice.scores[0]:.3f})"
        )
    print(f"wrote {out}; evaluate with: dynbo bench {out} --store STORE")
    sys.stdout.flush()
    return 0 if outcome.failed == 0 else 1
