"""The ``ilucid`` parser and its one dispatch table, built from every command module."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ilucid import __version__
from ilucid.cli import (
    client,
    demo,
    fragmentation,
    hetero,
    hybrid,
    info,
    mixed,
    model,
    serve,
    simulate,
    sweep,
)
from ilucid.cli.common import CliError, Command, DefaultsFormatter, add_commands, print_error
from ilucid.compiled import guard
from ilucid.traces import TraceError

__all__ = ["COMMANDS", "build_parser", "main"]

#: every ``ilucid`` subcommand by name, in the order ``ilucid --help`` lists them
COMMANDS: dict[str, Command] = {
    command.name: command
    for group in (
        simulate,
        sweep,
        demo,
        model,
        mixed,
        fragmentation,
        hybrid,
        hetero,
        serve,
        client,
        info,
    )
    for command in group.COMMANDS
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ilucid",
        description="Interpretable scheduling of deep-learning jobs on shared GPU clusters.",
        formatter_class=DefaultsFormatter,
    )
    parser.add_argument(
        "--version", action="version", version=f"ilucid {__version__}, core: {guard.status()}"
    )
    add_commands(parser.add_subparsers(dest="command", required=True), COMMANDS.values())
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command].run(args)
    except (TraceError, CliError, ValueError, OSError) as exc:
        print_error(str(exc))
        return 2
