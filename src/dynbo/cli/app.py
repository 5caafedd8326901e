"""The ``dynbo`` parser and entry points: :func:`main` (returns the exit status) and
:func:`console_main` (the console script)."""

from __future__ import annotations

import argparse
import importlib
import os
import sqlite3
import sys
from collections.abc import Sequence
from types import ModuleType

from dynbo.cli import commands as _commands
from dynbo.cli.common import CliError, Interrupted, resolve_store


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        raise CliError(message)


class _Help(argparse.HelpFormatter):
    """Show each option's default (where it has one worth showing)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        shown = default is not None and default is not False and default is not argparse.SUPPRESS
        if shown and action.option_strings and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


def command_modules() -> dict[str, ModuleType]:
    """``name -> module`` of every command, in the order of
    :data:`dynbo.cli.commands.COMMANDS`."""
    modules = (importlib.import_module(f"dynbo.cli.commands.{m}") for m in _commands.COMMANDS)
    return {module.NAME: module for module in modules}


def build_parser(commands: dict[str, ModuleType] | None = None) -> argparse.ArgumentParser:
    """The parser of every command (only the standard library is imported for it)."""
    from dynbo import __version__

    parser = _Parser(
        prog="dynbo",
        description="Time-varying Bayesian optimization: policies, benchmarks and a "
        "reproducible benchmark harness.",
        formatter_class=_Help,
    )
    parser.add_argument("--version", action="version", version=f"dynbo {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, module in (command_modules() if commands is None else commands).items():
        command = sub.add_parser(
            name, help=module.SUMMARY, description=module.DESCRIPTION, formatter_class=_Help
        )
        module.add_arguments(command)
    return parser


def _describe(err: BaseException) -> str:
    """One line for an error: an OSError says what failed on which path, in words."""
    if isinstance(err, OSError) and err.strerror:
        where = err.filename if err.filename is not None else ""
        other = f" -> {err.filename2}" if getattr(err, "filename2", None) else ""
        return f"{err.strerror}: {where}{other}" if where else err.strerror
    # a message over several lines (a parser's, with the text and a caret) is joined,
    # so that the one line is never blank and keeps what the first line does not say
    text = " ".join(line.strip() for line in str(err).splitlines() if line.strip())
    if len(text) > 1000:
        text = f"{text[:1000]}... ({len(text)} characters)"
    return text or type(err).__name__


#: arguments that name files or folders (an empty one is refused)
_PATH_ARGUMENTS = ("store", "out", "output", "data_dir", "config")


def _stdout_closed() -> bool:
    """Whether standard output is a pipe whose reader has gone away; if so, point it at
    /dev/null, so that the interpreter's final flush stays quiet."""
    import select

    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        # the write end of a pipe without a reader reports an error condition
        closed = any(event & select.POLLERR for _, event in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # not a real file (a test's capture)
        return False
    if closed:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
    return closed


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dynbo`` command; returns the exit status."""
    try:
        commands = command_modules()
        args = build_parser(commands).parse_args(argv)
        resolve_store(args)
        for name in _PATH_ARGUMENTS:
            if getattr(args, name, None) == "":
                # Path("") is the working directory and SQLite's "" a throwaway database:
                # an empty path would write where nobody asked, or nowhere
                raise CliError(f"the {name.replace('_', '-')} path is empty")
        return commands[args.command].run(args)
    except BrokenPipeError as err:
        if not _stdout_closed():  # another pipe (a worker's, a cluster's): an error
            print(f"dynbo: error: {_describe(err)}", file=sys.stderr)
            return 2
        # the reader of our output went away (`dynbo show | head -1`): not an error
        return 141  # 128 + SIGPIPE, what a shell reports for a killed writer
    except (CliError, ValueError, TypeError, OSError, sqlite3.Error) as err:
        print(f"dynbo: error: {_describe(err)}", file=sys.stderr)
        return 2
    except Interrupted as err:
        print(f"dynbo: interrupted: {err}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("dynbo: interrupted", file=sys.stderr)
        return 130


def console_main() -> None:
    """The ``dynbo`` command: :func:`main`'s status becomes the process's exit status.

    An interrupted command (status 130) ends at once with ``os._exit`` after its line is
    printed: at a normal interpreter exit, a worker pool whose workers were terminated
    under it can block the exit-time join of its manager thread for ever (seen in CI:
    ``dynbo bench`` alive 15 minutes after Ctrl-C, its workers gone). What a campaign
    stores is committed run by run, and SQLite keeps a file consistent however its
    process ends.
    """
    code = main()
    if code == 130:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
