"""What every command module shares: the command entry, argument types, the user's error."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_DATA",
    "DEFAULT_URL",
    "CliError",
    "Command",
    "add_commands",
    "positive_float",
    "positive_int",
    "stored_token",
]

#: where ``ilucid serve`` keeps its state, and where the client commands find it
DEFAULT_URL = "http://127.0.0.1:8787"
DEFAULT_DATA = Path(".ilucid")


class CliError(Exception):
    """A user-facing error: printed as one line, exit status 2."""


@dataclass(frozen=True)
class Command:
    """One ``ilucid`` subcommand: its parser's name, help and arguments, and what it runs.

    ``run`` returns the exit status; a :class:`CliError`, ``ValueError`` or
    ``OSError`` it raises is printed as one line with exit status 2.
    """

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    description: str | None = None


def add_commands(sub: Any, commands: Iterable[Command]) -> None:
    """Add each command's parser to ``sub`` (an ``add_subparsers()`` action)."""
    for command in commands:
        parser = sub.add_parser(command.name, help=command.help, description=command.description)
        command.add_arguments(parser)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def stored_token(args: argparse.Namespace) -> str:
    """``--token`` (or ILUCID_TOKEN), else the admin token ``ilucid serve`` wrote into
    ``--data-dir`` on this host."""
    token: str | None = args.token
    if not token:
        stored = args.data_dir / "admin.token"
        if stored.exists():
            token = stored.read_text(encoding="utf-8").strip()
    if not token:
        raise ValueError("no token: pass --token or set ILUCID_TOKEN")
    return token
