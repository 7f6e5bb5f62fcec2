"""The ``ilucid`` parser and its one dispatch table, built from every command module."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ilucid import __version__
from ilucid.cli import client, demo, info, model, serve, simulate, study, sweep
from ilucid.cli.common import CliError, Command, DefaultsFormatter, add_commands, print_error
from ilucid.cli.core_build import core_build
from ilucid.traces import TraceError

__all__ = ["COMMANDS", "build_parser", "main"]

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


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command].run(args)
    except (TraceError, CliError, ValueError, OSError) as exc:
        print_error(str(exc))
        return 2
