"""What the sweep tests share: running ``ilucid sweep`` in this process, reading its table."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ilucid.cli import main
from ilucid.sweep import RUN_COLUMNS, ResultTable


@dataclass(frozen=True)
class SweepRun:
    code: int
    stdout: str
    stderr: str


def run_sweep_cli(args: Sequence[str]) -> SweepRun:
    """``ilucid sweep ARGS`` as a user runs it, its output captured."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["sweep", *args])
    return SweepRun(code, out.getvalue(), err.getvalue())


def figures(path: Path) -> dict[tuple[str, str, str, int], dict[str, str]]:
    """Each successful cell's figures as written (strings: exact), without how it ran."""
    return {
        key: {k: v for k, v in row.items() if k not in RUN_COLUMNS}
        for key, row in ResultTable(path).finished().items()
    }
