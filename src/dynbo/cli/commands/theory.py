"""``dynbo theory``: BOLT's theory figures (Fig. 1 and 2)."""

from __future__ import annotations

import argparse

NAME = "theory"
SUMMARY = "draw BOLT's theory figures (Fig. 1 and 2)"
DESCRIPTION = (
    "Write BOLT's Fig. 1 (lower-bound regret slope against the sampling frequency) and "
    "Fig. 2 (dataset utility against the dataset size, n* marked) as PNG files; prints "
    "their paths."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="output directory")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from dynbo.report.theory_figures import lower_bound_figure, utility_figure

    out = Path(args.out)
    print(lower_bound_figure(out / "bolt_fig1_lower_bound_slope.png"))
    print(utility_figure(out / "bolt_fig2_dataset_utility.png"))
    return 0
