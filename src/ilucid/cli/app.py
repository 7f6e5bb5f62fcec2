"""The ``ilucid`` parser and its one dispatch table, built from every command module."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ilucid import __version__
from ilucid.cli import client, demo, info, model, serve, simulate, study, sweep
from ilucid.cli.common import CliError, Command, DefaultsFormatter, add_commands, print_error
from ilucid.cli.core_build import core_build
from ilucid.traces import TraceError

__all__ = ["COMMANDS", "READER_GONE", "build_parser", "main"]

#: every ``ilucid`` subcommand by name, in the order ``ilucid --help`` lists them; the
#: studies' old top-level names (hidden) come last
COMMANDS: dict[str, Command] = {
    command.name: command
    for commands in (
        simulate.COMMANDS,
        sweep.COMMANDS,
        demo.COMMANDS,
        model.COMMANDS,
        study.COMMANDS,
        serve.COMMANDS,
        client.COMMANDS,
        info.COMMANDS,
        study.ALIASES,
    )
    for command in commands
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ilucid",
        description="Interpretable scheduling of deep-learning jobs on shared GPU clusters.",
        formatter_class=DefaultsFormatter,
    )
    parser.add_argument(
        "--version", action="version", version=f"ilucid {__version__}, core: {core_build()}"
    )
    listed = ",".join(name for name, command in COMMANDS.items() if not command.hidden)
    commands = parser.add_subparsers(dest="command", required=True, metavar=f"{{{listed}}}")
    add_commands(commands, COMMANDS.values())
    return parser


#: the exit status of a command whose reader went away (``ilucid traces | head -1``):
#: 128 + SIGPIPE, what a shell reports for a standard tool the signal ended
READER_GONE = 141


def _reader_gone() -> int:
    """Stop quietly, as ``cat`` does: what is still buffered for stdout goes nowhere (so
    the interpreter's exit does not report the broken pipe once more)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return READER_GONE


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command].run(args)
    except BrokenPipeError:  # the reader of stdout has gone: not an error of the command
        return _reader_gone()
    except (TraceError, CliError, ValueError, OSError) as exc:
        print_error(str(exc))
        return 2
