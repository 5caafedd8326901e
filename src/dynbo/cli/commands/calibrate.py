"""``dynbo calibrate``: fit this machine's response-time model R(n)."""

from __future__ import annotations

import argparse
import json

from dynbo.cli.common import CliError, positive_int

NAME = "calibrate"
SUMMARY = "fit this machine's response-time model R(n)"
DESCRIPTION = (
    "Time a policy's iterations at several dataset sizes and fit the cubic R(n) the "
    "modeled clock uses."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", default="st-gp-ucb", help="policy to time")
    parser.add_argument(
        "--sizes",
        type=positive_int,
        nargs="+",
        default=[25, 50, 100, 200, 400],
        help="dataset sizes to time",
    )
    parser.add_argument("--dim", type=positive_int, default=3, help="spatial dimension")
    parser.add_argument("--repeats", type=positive_int, default=3, help="timed calls per size")
    parser.add_argument("--output", help="where to write the model (default: the user cache)")


def run(args: argparse.Namespace) -> int:
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
