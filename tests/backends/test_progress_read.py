"""A job's progress report, parsed from its output or its file: bad input never counts."""

from __future__ import annotations

import json

import pytest

from ilucid.backends.progress_memo import ProgressMemo
from ilucid.backends.progress_read import (
    MAX_FILE_BYTES,
    last_in_output,
    parse_file,
    parse_line,
)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("ILUCID_PROGRESS step=1200 total=50000", (1200.0, 50000.0)),
        ("2024-05-01 12:00:00 INFO train: ILUCID_PROGRESS step=3 total=10", (3.0, 10.0)),
        ("[rank0]:ILUCID_PROGRESS step=0 total=1 loss=0.25", (0.0, 1.0)),
        ("ILUCID_PROGRESS\tstep=2.5 total=1e3", (2.5, 1000.0)),
        ("ILUCID_PROGRESS step=10 total=10", (10.0, 10.0)),
    ],
)
def test_a_valid_line_is_read_wherever_it_stands(line: str, expected: tuple[float, float]) -> None:
    assert parse_line(line) == expected


@pytest.mark.parametrize(
    "line",
    [
        "ILUCID_PROGRESS step=nan total=100",
        "ILUCID_PROGRESS step=1 total=inf",
        "ILUCID_PROGRESS step=-1 total=100",
        "ILUCID_PROGRESS step=101 total=100",
        "ILUCID_PROGRESS step=0 total=0",
        "ILUCID_PROGRESS step=1 total=1e300",  # beyond MAX_VALUE
        "ILUCID_PROGRESS step=1 total=" + "9" * 40,  # longer than a number may be
        "ILUCID_PROGRESS step=0x10 total=100",
        "ILUCID_PROGRESS step=1_000 total=10000",
        "ILUCID_PROGRESS step=5, total=100",
        "ILUCID_PROGRESS total=100 step=5",
        "ILUCID_PROGRESS step=5",
        "MY_ILUCID_PROGRESS step=5 total=100",
        "progress step=5 total=100",
        "",
    ],
)
def test_a_malformed_line_is_ignored(line: str) -> None:
    assert parse_line(line) is None


def test_the_last_valid_report_wins_and_bad_bytes_do_not_stop_the_search() -> None:
    output = (
        b"ILUCID_PROGRESS step=1 total=100\n"
        b"\xff\xfe not utf-8 at all \x80\n"
        b"ILUCID_PROGRESS step=7 total=100\n"
        b"epoch 1 \xc3\x28 loss 0.1\n"
        b"ILUCID_PROGRESS step=nan total=100\n"  # malformed: the one before counts
    )
    assert last_in_output(output) == (7.0, 100.0)


def test_a_line_still_being_written_and_a_cut_first_line_are_not_read() -> None:
    # the job has written half of its newest line: the complete one before it counts
    assert last_in_output(b"ILUCID_PROGRESS step=5 total=9\nILUCID_PROGRESS step=6 total=9") == (
        5.0,
        9.0,
    )
    # a tail that starts inside a line: "step=99999 total=100000" lost its start
    cut = b"CID_PROGRESS step=2 total=9\nnothing\n"
    assert last_in_output(cut, cut=True) is None
    assert last_in_output(b"no report here\n") is None


@pytest.mark.parametrize(
    "data",
    [
        b'{"step": NaN, "total": 10}',
        b'{"step": 1, "total": Infinity}',
        b'{"step": -1, "total": 10}',
        b'{"step": 11, "total": 10}',
        b'{"step": 1, "total": 0}',
        b'{"step": true, "total": 10}',
        b'{"step": "1", "total": 10}',
        b'{"step": 1, "total": 1' + b"0" * 400 + b"}",  # an int too large for a float
        b'{"step": 1}',
        b"[1, 10]",
        b"\xff\xfe{}",
        b'{"step": 1, "total": 10',
        b"",
        b'{"step": 1, "total": 10, "pad": "' + b"x" * MAX_FILE_BYTES + b'"}',
        b"[" * 100000 + b"]" * 100000,
    ],
)
def test_a_bad_progress_file_is_ignored(data: bytes) -> None:
    assert parse_file(data) is None


def test_a_good_progress_file_is_read() -> None:
    assert parse_file(json.dumps({"step": 1200, "total": 50000}).encode()) == (1200.0, 50000.0)
    assert parse_file(b'{"total": 4.0, "step": 0.5, "other": 1}') == (0.5, 4.0)


def test_the_memo_reads_a_job_at_most_every_ten_seconds_and_keeps_a_report() -> None:
    now = [0.0]
    memo = ProgressMemo(lambda: now[0], every_s=10.0)
    reads: list[str] = []
    answers = iter([(1.0, 10.0), None, (3.0, 10.0)])

    def read() -> tuple[float, float] | None:
        reads.append("read")
        return next(answers)

    assert memo.get("j1", read) == (1.0, 10.0)
    now[0] = 9.0
    assert memo.get("j1", read) == (1.0, 10.0) and len(reads) == 1  # not read again yet
    now[0] = 10.0
    assert memo.get("j1", read) == (1.0, 10.0) and len(reads) == 2  # nothing new: kept
    now[0] = 20.0
    assert memo.get("j1", read) == (3.0, 10.0)
    memo.end_pass([])  # no longer running: forgotten
    now[0] = 21.0
    assert memo.get("j1", lambda: None) is None


def test_the_memo_spreads_reads_over_passes() -> None:
    memo = ProgressMemo(lambda: 0.0, per_pass=2)
    read = [memo.get(f"j{i}", lambda: (1.0, 2.0)) for i in range(3)]
    assert read == [(1.0, 2.0), (1.0, 2.0), None]
    memo.end_pass([f"j{i}" for i in range(3)])
    assert memo.get("j2", lambda: (1.0, 2.0)) == (1.0, 2.0)
