"""The ``dynbo`` command line: run, bench, tune, list, calibrate, export, report, show, theory,
reproduce, data, serve.

    dynbo run --benchmark eggholder --policy st-gp-ucb --clock measured --horizon 120
    dynbo bench --suite quick --workers 2 --store results/quick.sqlite
    dynbo bench campaign.toml --scheduler tcp://host:8786
    dynbo tune campaign.toml --tuning-seeds 100-104 --budget 20 --out tuned.toml
    dynbo list [benchmarks|suites|policies]
    dynbo calibrate --policy st-gp-ucb --sizes 25 50 100 200
    dynbo export results/quick.sqlite --format parquet --out results/quick
    dynbo report results/quick.sqlite --out results/quick-report
    dynbo show results/quick.sqlite [--campaign ID] [--format markdown]
    dynbo serve --store results/serve.sqlite --port 8000 [--host 0.0.0.0 --token TOKEN]

The commands that read a store (``show``, ``report``, ``export``) take it positionally or
as ``--store``. Bad arguments end with one line on stderr (``dynbo: error: ...``) and exit
status 2; an interrupt (Ctrl-C) with one line and exit status 130.

Layout: :mod:`dynbo.cli.app` builds the parser and holds :func:`main` and
:func:`console_main`; :mod:`dynbo.cli.common` the errors, argument types and output
helpers; :mod:`dynbo.cli.commands` one module per command, each importing what its
command needs only when it runs, so that ``--version`` and ``--help`` never import torch.
"""

from __future__ import annotations

from dynbo.cli.app import build_parser, console_main, main
from dynbo.cli.commands.reproduce import REPRODUCTION_NAMES
from dynbo.cli.common import DEFAULT_STORE, CliError, Interrupted

__all__ = [
    "main",
    "console_main",
    "build_parser",
    "CliError",
    "Interrupted",
    "DEFAULT_STORE",
    "REPRODUCTION_NAMES",
]
