"""What the sweep tests share: running ``ilucid sweep`` in this process, reading its table."""

from __future__ import annotations

import contextlib
import io
import random
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


def write_trace(path: Path, jobs: int, seed: int = 7) -> Path:
    """A trace of ``jobs`` jobs in ilucid's generic CSV: Poisson arrivals a minute apart,
    mostly 1-GPU jobs, log-normal durations (median about 30 min), so a cluster sized for
    load 0.85 queues and preempts. The tests' own data: no trace directory needed."""
    rng = random.Random(seed)
    now = 0.0
    rows = ["id,submit_time,num_gpus,duration"]
    for i in range(jobs):
        now += rng.expovariate(1 / 60)
        gpus = rng.choice((1, 1, 1, 1, 2, 4, 8))
        rows.append(f"j{i},{now:.0f},{gpus},{60 + round(rng.lognormvariate(7.5, 1.2))}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def figures(path: Path) -> dict[tuple[str, str, str, int], dict[str, str]]:
    """Each successful cell's figures as written (strings: exact), without how it ran."""
    return {
        key: {k: v for k, v in row.items() if k not in RUN_COLUMNS}
        for key, row in ResultTable(path).finished().items()
    }
