"""``ilucid study <name>``: the studies built on the replay engine (:mod:`ilucid.studies`).

One subcommand per study module here. Their old top-level names (``ilucid mixed``, ...)
still parse and run the same code for one release (:data:`ALIASES`), left out of
``ilucid --help``, each saying its new name on stderr and in its own ``--help``.
"""

from __future__ import annotations

import argparse
import sys

from ilucid.cli.common import Command, add_commands
from ilucid.cli.study import fragmentation, hetero, hybrid, mixed

__all__ = ["ALIASES", "COMMANDS", "STUDIES", "renamed"]

#: ``ilucid study``'s subcommands by name, in the order its ``--help`` lists them
STUDIES: dict[str, Command] = {
    command.name: command
    for group in (mixed, fragmentation, hybrid, hetero)
    for command in group.COMMANDS
}


def renamed(name: str) -> str:
    """The line an old top-level name prints: where the study went, and until when."""
    return f"`ilucid {name}` is now `ilucid study {name}`; the old name goes in the next release"


def _add_arguments(study: argparse.ArgumentParser) -> None:
    add_commands(study.add_subparsers(dest="study", required=True), STUDIES.values())


def _run(args: argparse.Namespace) -> int:
    return STUDIES[args.study].run(args)


def _alias(study: Command) -> Command:
    """``study`` under its old top-level name: the same arguments and code, hidden from
    ``ilucid --help``, with :func:`renamed`'s line on stderr first."""

    def run(args: argparse.Namespace) -> int:
        print(renamed(study.name), file=sys.stderr, flush=True)
        return study.run(args)

    description = f"{renamed(study.name)}.\n\n{study.description or study.help}"
    return Command(study.name, study.help, study.add_arguments, run, description, hidden=True)


COMMANDS = (
    Command(
        "study",
        f"studies built on the simulator: {', '.join(STUDIES)}",
        _add_arguments,
        _run,
        description="Studies built on the replay engine; `ilucid study NAME --help` for one.",
    ),
)

#: the studies' old top-level names, kept for one release
ALIASES = tuple(_alias(study) for study in STUDIES.values())
