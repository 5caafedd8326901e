"""What the command modules share: errors, argument types, the store argument, tables and
progress lines.

Only the standard library is imported here (and by the modules that build the parser):
``dynbo --version`` and every ``--help`` must not wait for torch.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

#: the store `dynbo bench` writes, and the one the reading commands open, by default
DEFAULT_STORE = "results/dynbo.sqlite"


class CliError(Exception):
    """A user error: printed as one line, exit status 2."""


class Interrupted(Exception):
    """Ctrl-C, with what was kept: printed as one line, exit status 130."""


# ---------------------------------------------------------------- argument types
def _finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def positive_float(text: str) -> float:
    value = _finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def non_negative_float(text: str) -> float:
    value = _finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative number, got {text!r}")
    return value


def integer_at_least(low: int, what: str):  # type: ignore[no-untyped-def]
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected a {what} integer, got {text!r}")
        return value

    return parse


non_negative_int = integer_at_least(0, "non-negative")
positive_int = integer_at_least(1, "positive")


def port(text: str) -> int:
    value = non_negative_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"expected a port 0..65535, got {text!r}")
    return value


def key_value_options(
    pairs: Sequence[str] | None, what: str, defaults: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``key=value`` pairs; values parsed as JSON when they can be (numbers, lists, true).

    An option whose default is a boolean also takes ``yes/no/on/off/1/0`` (any case);
    any other value for it is left as given, for the policy to reject by name.
    """
    from dynbo.validation import parse_boolean_text  # imports torch: only when used

    out: dict[str, Any] = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise CliError(f"{what} option {pair!r} is not of the form key=value")
        key, text = pair.split("=", 1)
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        if defaults is not None and isinstance(defaults.get(key), bool):
            word = parse_boolean_text(text)
            if word is not None:
                value = word
        out[key] = value
    return out


# ---------------------------------------------------------------- the store argument
def add_store_argument(parser: argparse.ArgumentParser, help: str = "result store") -> None:
    """The store of a command that reads one: positional or ``--store`` (not both, unless
    they name the same file); :func:`resolve_store` puts the one given into
    ``args.store`` (else :data:`DEFAULT_STORE`)."""
    parser.add_argument(
        "store",
        nargs="?",
        metavar="STORE",
        help=f"{help} (SQLite file; or --store STORE; default: {DEFAULT_STORE})",
    )
    parser.add_argument(
        "--store", dest="store_option", metavar="STORE", help="the store, as an option"
    )
    parser.set_defaults(resolve_store=True)


def resolve_store(args: argparse.Namespace) -> None:
    """Merge a command's positional store and ``--store`` into ``args.store``."""
    if not getattr(args, "resolve_store", False):
        return
    positional, option = args.store, args.store_option
    if positional is not None and option is not None and not _same_path(positional, option):
        raise CliError(
            f"the store is given twice, as {positional!r} and as --store {option!r}; give one"
        )
    chosen = positional if positional is not None else option
    args.store = DEFAULT_STORE if chosen is None else chosen
    del args.store_option, args.resolve_store


def _same_path(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): compare the names
        return os.path.abspath(a) == os.path.abspath(b)


def existing_store(path: str) -> None:
    """A store that a reading command opens must exist (a directory or another file
    there is for the store itself to refuse, with its reason)."""
    if not os.path.exists(path):
        raise CliError(f"no result store at {path}")


# ---------------------------------------------------------------- output
def print_table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> None:
    """Columns as wide as their longest cell (the last column is not padded)."""
    widths = [max(len(r[j]) for r in [header, *rows]) for j in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        parts = []
        for j, cell in enumerate(cells):
            if j == len(cells) - 1:
                parts.append(cell)
            elif align[j] == "r":
                parts.append(cell.rjust(widths[j]))
            else:
                parts.append(cell.ljust(widths[j]))
        return "  " + "  ".join(parts)

    print(line(header))
    for row in rows:
        print(line(row))


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal (a file, a pipe or a test's capture is not)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # closed, or not a real stream
        return False


class RunProgress:
    """``dynbo run``'s progress on stderr.

    On a terminal, one line rewritten in place (carriage returns) at each iteration;
    anywhere else (a log file, a pipe), plain lines: the first iteration, one each time
    the run passes another tenth of its horizon, and the last, so that a log holds
    about a dozen lines and no carriage return.
    """

    def __init__(self, label: str, horizon: float, stream: TextIO | None = None) -> None:
        self.label = label
        self.horizon = float(horizon)
        self.stream = sys.stderr if stream is None else stream
        self.live = is_terminal(self.stream)
        self._tenth = -1
        self._last: str | None = None  # a plain line not yet printed

    def _text(self, row: dict[str, Any]) -> str:
        return (
            f"[{self.label}] t={row['t']:9.2f}/{self.horizon:g} "
            f"k={row['k']:5d} n={row['dataset_size']:5d} regret={row['regret']:.4g}"
        )

    def __call__(self, row: dict[str, Any]) -> None:
        text = self._text(row)
        if self.live:
            print(f"\r{text}   ", end="", file=self.stream, flush=True)
            self._last = text
            return
        tenth = int(10 * row["t"] / self.horizon) if self.horizon > 0 else 0
        if tenth > self._tenth:
            self._tenth = tenth
            print(text, file=self.stream, flush=True)
            self._last = None
        else:
            self._last = text

    def close(self) -> None:
        """End the progress (also on Ctrl-C): the terminal's line, or the last plain one."""
        if self.live:
            if self._last is not None:
                print(file=self.stream, flush=True)
        elif self._last is not None:
            print(self._last, file=self.stream, flush=True)
        self._last = None


def campaign_progress(name: str, total: int, stream: TextIO | None = None) -> Any:
    """For a campaign run where stderr is not a terminal: a callback that prints one plain
    line per finished run (``[3/12] done hartmann3 wdbo seed 2 (4.1 s)``), where a
    terminal gets the progress bar."""
    out = sys.stderr if stream is None else stream
    count = 0

    def on_result(result: Any) -> None:
        nonlocal count
        count += 1
        spec = result.spec
        print(
            f"[{name}] {count}/{total} {result.status}: {spec.display_benchmark} "
            f"{spec.policy} seed {spec.seed} ({result.wall_seconds:.1f} s)",
            file=out,
            flush=True,
        )

    return on_result
