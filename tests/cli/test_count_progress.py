"""The shared progress display's count of items done and failed (``ilucid sweep``'s cells)."""

from __future__ import annotations

import re

import pytest

from ilucid.cli.progress import CountDisplay


def _run(total: int, failing: set[int]) -> None:
    with CountDisplay(total, "sweep", "cells") as display:
        for item in range(1, total + 1):
            if item in failing:
                display.note(f"cell {item} failed [not markup]")
            display.advance(item in failing)


def test_off_a_terminal_a_line_each_tenth_counts_done_and_failed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _run(20, {3, 4, 15})
    err = capsys.readouterr().err.splitlines()
    counts = [line for line in err if line.startswith("sweep: ")]
    # a line every 2 of 20 items; the failures counted so far on each
    assert counts[0] == "sweep: 2/20 cells, 0 failed"
    assert counts[1] == "sweep: 4/20 cells, 2 failed"
    assert counts[-1] == "sweep: 20/20 cells, 3 failed"
    assert len(counts) == 10
    # each note on its own line, in order, before the count that includes it
    assert err.index("cell 4 failed [not markup]") < err.index("sweep: 4/20 cells, 2 failed")


def test_on_a_terminal_one_bar_with_the_count_and_no_count_lines(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich's own switch: draw as on a terminal
    monkeypatch.setenv("COLUMNS", "120")
    _run(4, {2})
    err = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", capsys.readouterr().err)
    assert "4/4 cells, 1 failed" in err
    assert "cell 2 failed [not markup]" in err  # printed literally above the bar
    assert "sweep: " not in err  # no line-mode counts
