"""``ilucid policies`` and ``ilucid traces``: what a replay can name."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from ilucid.cli.common import Command
from ilucid.cli.tables import print_table, render_table
from ilucid.core import PHASE_ORDER, PluginSpec, registered
from ilucid.core.policies import DEFAULT_PROFILE, PROFILES
from ilucid.traces import KNOWN_INFERENCE, KNOWN_TRACES, trace_dir
from ilucid.traces.sources import expected_files, source_of

__all__ = ["COMMANDS", "WIDTH"]

#: ``ilucid policies`` fits this many columns: its descriptions wrap
WIDTH = 100


def _policies(args: argparse.Namespace) -> int:
    """One row per profile: the name ``--policy`` takes, where it runs, what it needs
    and what it does."""
    rows = []
    for name, profile in PROFILES.items():
        needs = profile.needs
        where = "replay + serve" if needs.live and not needs.oracle else "replay"
        wants = [
            tag
            for tag, on in (
                ("estimates", needs.estimates),
                ("profiler", needs.profiler),
                ("oracle", needs.oracle),
            )
            if on
        ]
        shown = "static-partition:N" if name == "static-partition" else name
        if name == DEFAULT_PROFILE:
            shown += " (default)"
        rows.append((shown, where, ", ".join(wants) or "-", profile.summary))
    print_table(("POLICY", "RUNS IN", "NEEDS", "WHAT IT DOES"), rows, align="llll", max_width=WIDTH)
    print()
    made_of = [
        (name, ", ".join(f"{r.name} ({r.point.value})" for r in p.plugins))
        for name, p in PROFILES.items()
    ]
    print_table(("POLICY", "MADE OF (PLUGIN, PHASE)"), made_of, align="ll", max_width=WIDTH)
    print()
    plugins = sorted(registered().values(), key=lambda s: (PHASE_ORDER.index(s.phase), s.name))
    print_table(
        ("PLUGIN", "PHASE", "ARGUMENTS (DEFAULT)", "WHAT IT DOES"),
        [(s.name, s.phase.value, _arguments(s), s.summary) for s in plugins],
        align="llll",
        max_width=WIDTH,
    )
    return 0


def _arguments(spec: PluginSpec) -> str:
    """``key=default`` for each argument the plugin reads (its decoded defaults)."""
    try:
        defaults = spec.defaults()
    except ValueError:  # an argument without a default: it must be given
        return "(required arguments)"
    if not dataclasses.is_dataclass(defaults):
        return "-"
    shown = []
    for item in dataclasses.fields(defaults):
        value = getattr(defaults, item.name)
        if isinstance(value, tuple):
            value = ",".join(f"{v:g}" for v in value)
        elif isinstance(value, dict) and not value:
            value = "{}"
        elif isinstance(value, float):
            value = f"{value:g}"
        shown.append(f"{item.name}={value}")
    return ", ".join(shown) or "-"


def _trace_folder() -> tuple[Path | None, str]:
    """The folder trace names resolve in, and a line saying where that came from."""
    directory = trace_dir()
    if directory is None:
        return None, (
            "trace folder: none. ILUCID_TRACE_DIR is not set and there is no default"
            " folder, so no trace name resolves (a file path still works); set it to a"
            " folder laid out as below"
        )
    state = "" if directory.is_dir() else "; it does not exist"
    return directory, f"trace folder: {directory} (from ILUCID_TRACE_DIR{state})"


def _traces(args: argparse.Namespace) -> int:
    """Each short name, the files it expects in the trace folder, and whether they are there."""
    directory, heading = _trace_folder()
    print(heading)
    rows: list[tuple[str, str, str, str]] = []
    for name in [*KNOWN_TRACES, *KNOWN_INFERENCE]:
        for index, expected in enumerate(expected_files(name)):
            if directory is None:
                state = "-"
            else:
                state = "found" if (directory / expected.relative).is_file() else "missing"
            shown = expected.relative + ("" if expected.required else f" ({expected.role})")
            source = source_of(expected.relative).repository if index == 0 else ""
            rows.append((name if index == 0 else "", shown, state, source))
    print(render_table(("name", "expects in the folder", "state", "from"), rows, align="llll"))
    print(
        "how to download each trace, its licence and this layout: docs/traces.md;"
        " `--trace synthetic` needs no file"
    )
    return 0


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    pass


COMMANDS = (
    Command("policies", "list the scheduling policies", _no_arguments, _policies),
    Command(
        "traces",
        "the folder trace names resolve in (ILUCID_TRACE_DIR) and the files each name expects",
        _no_arguments,
        _traces,
    ),
)
