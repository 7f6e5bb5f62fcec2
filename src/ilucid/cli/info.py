"""``ilucid policies`` and ``ilucid traces``: what a replay can name."""

from __future__ import annotations

import argparse

from ilucid.cli.common import Command
from ilucid.core.policies import DEFAULT_PROFILE, PROFILES
from ilucid.traces import KNOWN_TRACES, trace_dir

__all__ = ["COMMANDS"]


def _policies(args: argparse.Namespace) -> int:
    """One line per profile: name, what it needs, what it does."""
    for name, entry in PROFILES.items():
        needs = entry.profile.needs
        tags = [
            tag
            for tag, on in (
                ("default", name == DEFAULT_PROFILE),
                ("estimates", needs.estimates),
                ("profiler", needs.profiler),
                ("oracle: replays only", needs.oracle),
                ("replays only", not needs.live and not needs.oracle),
            )
            if on
        ]
        shown = "static-partition:N" if name == "static-partition" else name
        print(f"{shown:20s} {entry.profile.summary}" + (f" [{', '.join(tags)}]" if tags else ""))
    return 0


def _traces(args: argparse.Namespace) -> int:
    directory = trace_dir()
    for name, relative in KNOWN_TRACES.items():
        where = directory / relative if directory else None
        state = "found" if where and where.exists() else "not found"
        print(f"{name:10s} {relative} ({state})")
    return 0


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    pass


COMMANDS = (
    Command("policies", "list the scheduling policies", _no_arguments, _policies),
    Command("traces", "list the trace names resolved in ILUCID_TRACE_DIR", _no_arguments, _traces),
)
