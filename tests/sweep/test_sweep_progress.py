"""``ilucid sweep`` shows its cells through the CLI's shared progress display."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sweep_helpers import run_sweep_cli, write_trace


def _sweep(tmp_path: Path) -> list[str]:
    """2 cells in this process: a small trace, and one that does not exist (fails twice)."""
    trace = write_trace(tmp_path / "jobs.csv", jobs=40)
    traces = f"{trace},{tmp_path / 'missing.csv'}"
    args = ["--traces", traces, "--policy", "fifo", "--nodes", "2", "--workers", "0"]
    run = run_sweep_cli([*args, "--out", str(tmp_path / "out.csv")])
    assert run.code == 1  # a cell failed twice
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", run.stderr).splitlines()


def test_sweep_counts_cells_and_failures_off_a_terminal(tmp_path: Path) -> None:
    # in this process the cells run in grid order: jobs.csv ends, then missing.csv
    # fails, is retried once, fails again and is counted failed
    err = _sweep(tmp_path)
    assert err[0] == "sweep: 1/2 cells, 0 failed"
    assert err[1].endswith("retrying once")
    assert "missing.csv fifo seed 0 failed again" in err[2]
    assert err[3] == "sweep: 2/2 cells, 1 failed"


def test_sweep_draws_the_shared_bar_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    monkeypatch.setenv("COLUMNS", "120")
    err = "\n".join(_sweep(tmp_path))
    assert "2/2 cells, 1 failed" in err
    assert "missing.csv fifo seed 0 failed again" in err
