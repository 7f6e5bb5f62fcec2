"""The small first-day findings that need no running service (issue 34, point 9)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import ilucid
from ilucid.cli import main
from ilucid.cli.demo import live_demo
from ilucid.core.policies import DEFAULT_PROFILE

SRC = str(Path(ilucid.__file__).resolve().parents[1])


def _env() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PYTHONPATH": SRC}


def test_model_help_prints_one_percent_sign(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["model", "--help"], ["model", "evaluate", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        text = " ".join(capsys.readouterr().out.split())
        assert "last 25% of" in text, text
        assert "%%" not in text


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path: Path) -> None:
    """``ilucid traces | head -1``: the reader is gone before the output is written (its
    end of the pipe closed first, so every write fails, as after ``head`` has its line)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "ilucid.cli", "traces"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env=_env(),
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert result.stderr == ""  # no "[Errno 32] Broken pipe", no "Exception ignored"
    assert result.returncode == 141  # 128 + SIGPIPE, as a shell reports for `cat`


def test_policies_fit_100_columns(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ilucid.cli", "policies"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(),
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    # wrapped, not cut: every profile's summary is still there, word for word
    words = " ".join(result.stdout.split())
    assert "fifo-backfill" in words and "static-partition:N" in words
    assert "EASY backfilling around the head job's reservation" in words


def test_the_live_demo_runs_the_default_profile(capsys: pytest.CaptureFixture[str]) -> None:
    data = Path(tempfile.mkdtemp(prefix="ilucid-demo-test-"))
    data.chmod(0o755)  # the local backend runs the demo's jobs as other users under root
    assert live_demo(data) == 0
    out = capsys.readouterr().out
    assert f"under the default profile ({DEFAULT_PROFILE})" in out
    assert "tiered" not in out
    preempted = next(line for line in out.splitlines() if "preempted by inference" in line)
    assert "inference then holds 1 of 2 GPUs" in preempted, preempted
    assert "1/2" not in out
