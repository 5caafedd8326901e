"""``dynbo data``: download and cache a data set."""

from __future__ import annotations

import argparse
import json

NAME = "data"
SUMMARY = "download and cache a data set"
DESCRIPTION = (
    "Download a data set the benchmarks can use into the cache directory (--data-dir, "
    "else $DYNBO_DATA_DIR, else ~/.cache/dynbo), once; prints the cached file's path "
    "and what it holds. intel-lab: the raw Intel Lab readings (~34 MB), for "
    "`--benchmark-option source=raw` of the temperature benchmark."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", choices=["intel-lab"], help="the data set")
    parser.add_argument("--data-dir", help="cache directory")
    parser.add_argument("--url", help="download from here instead of the data set's home page")


def run(args: argparse.Namespace) -> int:
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
