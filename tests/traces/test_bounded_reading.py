"""Every trace reader reads a bounded line and stops at ``--limit``; ``gpu_milli`` out
of range is refused, not clamped.

``ilucid simulate`` on a link to /dev/zero once read one endless line (7.9 GB, then a
MemoryError traceback), and ``--limit 1000`` on a 200 MB trace read all of it. Here
the link gives ``file:1: line longer than 1,048,576 bytes`` at once in bounded memory
(the command runs under an address-space limit, so the old behaviour fails rather
than exhausting the machine), and a trace malformed past its first 1,000 jobs
replays with ``--limit 1000``.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ilucid.cli import main
from ilucid.traces import GENERIC_COLUMNS, TraceError, load_dlrm, load_trace
from ilucid.traces.formats import load_alibaba_nodes, load_alibaba_share
from ilucid.traces.reader import MAX_LINE_BYTES

ITP = "job_id,submission_time,duration,num_gpu"
PHILLY = "#job id,arrival time (sec),topology,shape,size,duration (sec)"
PODS = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time"
)
NODES = "sn,cpu_milli,memory_mib,gpu,model"
HELIOS = "job_id,user,vc,gpu_num,cpu_num,state,submit_time,duration"
GENERIC = ",".join(GENERIC_COLUMNS)
DLRM = (
    "instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,"
    "rdma_limit,memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,"
    "creation_time,scheduled_time,deletion_time"
)
#: the address space the command may use: several times what it needs (about 200 MB)
ADDRESS_SPACE = 1 << 30


def write(path: Path, *lines: str) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _run_bounded(argv: list[str]) -> tuple[int, str, float, int]:
    """``python -m ilucid.cli ARGV`` under :data:`ADDRESS_SPACE` (killed after 60 s):
    exit status, stderr, seconds, and the peak resident memory (KiB) of that process."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "ilucid.cli", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=limit,
    )
    timer = threading.Timer(60, child.kill)
    timer.start()
    try:
        assert child.stderr is not None
        err = child.stderr.read()
        _, status, usage = os.wait4(child.pid, 0)  # this child's own peak memory
    finally:
        timer.cancel()
    child.returncode = os.waitstatus_to_exitcode(status)
    child.stderr.close()
    return child.returncode, err, time.perf_counter() - started, usage.ru_maxrss


def test_simulate_on_a_link_to_dev_zero_fails_at_once_naming_line_1(tmp_path: Path) -> None:
    link = tmp_path / "trace.csv"
    link.symlink_to("/dev/zero")
    code, err, elapsed, peak_kib = _run_bounded(
        ["simulate", "--trace", str(link), "--out", str(tmp_path / "out")]
    )
    print(f"/dev/zero: exit {code} after {elapsed:.2f} s, peak {peak_kib / 1024:.0f} MiB")
    assert "Traceback" not in err and "MemoryError" not in err, err[-2000:]
    assert code == 2
    assert err.strip().splitlines() == [
        f"ilucid: error: {link}:1: line longer than {MAX_LINE_BYTES:,} bytes and holds NUL"
        " bytes: a binary file, not a CSV trace"
    ]
    assert elapsed < 30 and peak_kib < 512 * 1024


def test_the_bound_reads_little_of_an_endless_line(tmp_path: Path) -> None:
    """In this process: the memory the reader allocates for an endless line is about
    one line's bound, not the (here 64 MiB) line."""
    import tracemalloc

    path = tmp_path / "long.csv"
    with path.open("w", encoding="utf-8") as handle:
        handle.write(ITP + "\n")
        handle.write("x" * (64 << 20) + "\n")
    tracemalloc.start()
    try:
        with pytest.raises(TraceError) as info:
            load_trace(str(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(info.value) == f"{path}:2: line longer than {MAX_LINE_BYTES:,} bytes"
    assert peak < 8 * MAX_LINE_BYTES, f"peak {peak:,} bytes"


def _too_long_row() -> str:
    return "a," + "1" * (MAX_LINE_BYTES + 1)


READERS: dict[str, tuple[str, Callable[[Path], object]]] = {
    "philly": (PHILLY, lambda p: load_trace(str(p))),
    "itp": (ITP, lambda p: load_trace(str(p))),
    "alibaba": (PODS, lambda p: load_trace(str(p))),
    "helios": (HELIOS, lambda p: load_trace(str(p))),
    "generic": (GENERIC, lambda p: load_trace(str(p))),
    "alibaba nodes": (NODES, load_alibaba_nodes),
    "alibaba share (pods)": (PODS, lambda p: load_alibaba_share(p, p.parent / "nodes.csv")),
    "dlrm": (DLRM, load_dlrm),
}


@pytest.mark.parametrize("reader", list(READERS))
def test_every_reader_refuses_a_line_over_the_bound(tmp_path: Path, reader: str) -> None:
    header, load = READERS[reader]
    write(tmp_path / "nodes.csv", NODES, "n0,96000,786432,8,V100")
    path = write(tmp_path / "trace.csv", header, _too_long_row())
    with pytest.raises(TraceError) as info:
        load(path)
    assert str(info.value) == f"{path}:2: line longer than {MAX_LINE_BYTES:,} bytes"


def test_the_bound_counts_bytes_not_characters(tmp_path: Path) -> None:
    two_bytes = "é" * (MAX_LINE_BYTES // 2 + 1)  # fewer characters than the bound
    path = write(tmp_path / "trace.csv", ITP, f"{two_bytes},0,10,1")
    with pytest.raises(TraceError, match=r":2: line longer than"):
        load_trace(str(path))


def test_a_line_at_the_bound_is_read(tmp_path: Path) -> None:
    """A line of exactly the bound passes the length check (its field then fails csv's
    own field limit, which names the line too)."""
    row = "a,0,10," + "1" * (MAX_LINE_BYTES - len("a,0,10,"))
    path = tmp_path / "trace.csv"
    path.write_bytes(f"{ITP}\r\n{row}\r\n".encode())
    with pytest.raises(TraceError) as info:
        load_trace(str(path))
    assert ":2:" in str(info.value) and "longer than" not in str(info.value)


def test_a_non_utf8_byte_after_a_long_line_still_names_a_line(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_bytes(f"{ITP}\n".encode() + b"\xff" + b"x" * (MAX_LINE_BYTES + 10) + b"\n")
    with pytest.raises(TraceError, match=r"trace\.csv:2: byte 0xff at offset"):
        load_trace(str(path))


# -- reading stops at the limit -------------------------------------------------------------
def _rows(count: int, bad_at: int, row: Callable[[int], str], bad: str) -> list[str]:
    return [bad if i == bad_at else row(i) for i in range(count)]


LIMITED: dict[str, tuple[str, Callable[[int], str], str]] = {
    "generic": (GENERIC, lambda i: f"j{i},{i},1,10,training,,,,,,", "jx,oops,1,10,,,,,,,"),
    "itp": (ITP, lambda i: f"j{i},{i},10,1", "jx,1e308,10,1"),
    "philly": (PHILLY, lambda i: f"j{i},{i},CLOS,1,1,10", "jx,-1,CLOS,1,1,10"),
    "helios": (HELIOS, lambda i: f"j{i},u,vc,1,1,DONE,{i},10", "jx,u,vc,1,1,DONE,x,10"),
    "alibaba": (PODS, lambda i: f"p{i},1,1,1,1000,,LS,Running,{i},{i + 10},{i}", "p,1"),
}


@pytest.mark.parametrize("fmt", list(LIMITED))
def test_the_limit_stops_the_reading_before_a_later_malformed_row(tmp_path: Path, fmt: str) -> None:
    header, row, bad = LIMITED[fmt]
    path = write(tmp_path / "trace.csv", header, *_rows(3000, 1999, row, bad))
    with pytest.raises(TraceError, match=r"trace\.csv:2001:"):
        load_trace(str(path))  # the whole file: its line 2001 is malformed
    trace = load_trace(str(path), limit=1000)
    assert [j.id for j in trace.jobs] == [
        f"{'p' if fmt == 'alibaba' else 'j'}{i}" for i in range(1000)
    ]


def test_simulate_with_limit_replays_the_head_of_a_trace_malformed_further_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    header, row, bad = LIMITED["generic"]
    path = write(tmp_path / "trace.csv", header, *_rows(3000, 1999, row, bad))
    argv = ["simulate", "--trace", str(path), "--policy", "fifo", "--nodes", "4"]
    assert main([*argv, "--out", str(tmp_path / "out"), "--limit", "1000"]) == 0
    assert "1,000 jobs from" in capsys.readouterr().out
    assert main([*argv, "--out", str(tmp_path / "out2")]) == 2
    assert "trace.csv:2001:" in capsys.readouterr().err


def _bytes_read() -> int:
    with open("/proc/self/io", encoding="ascii") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("rchar:"))


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="Linux /proc only")
def test_a_limited_read_of_a_large_trace_reads_only_its_head(tmp_path: Path) -> None:
    header, row, _ = LIMITED["itp"]
    path = write(tmp_path / "trace.csv", header, *(row(i) for i in range(400_000)))
    size = path.stat().st_size
    before = _bytes_read()
    trace = load_trace(str(path), limit=1000)
    read = _bytes_read() - before
    print(f"read {read:,} of {size:,} bytes for 1,000 jobs")
    assert len(trace.jobs) == 1000
    assert read < size / 20, f"read {read:,} bytes of a {size:,}-byte trace"


# -- gpu_milli is refused out of range, like every field -------------------------------------
@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("1001", "1001 is beyond the limit of 1000"),
        ("0", "must be >= 1, got '0'"),
        ("-5", "must be >= 1, got '-5'"),
        ("500.5", "expected a whole number, got '500.5'"),
        ("NaN", "expected a finite number, got 'NaN'"),
    ],
)
def test_generic_gpu_milli_out_of_range_is_refused(
    tmp_path: Path, value: str, problem: str
) -> None:
    path = write(
        tmp_path / "trace.csv", GENERIC, "a,0,1,10,training,,,,,500,", f"b,1,1,10,,,,,,{value},"
    )
    with pytest.raises(TraceError) as info:
        load_trace(str(path))
    assert str(info.value) == f"{path}:3: field 'gpu_milli': {problem}"


def test_generic_gpu_milli_in_range_or_absent_is_kept(tmp_path: Path) -> None:
    path = write(
        tmp_path / "trace.csv",
        GENERIC,
        "a,0,1,10,,,,,,1,",
        "b,1,1,10,,,,,,1000,",
        "c,2,2,10,,,,,,,",
    )
    assert [j.gpu_milli for j in load_trace(str(path)).jobs] == [1, 1000, 1000]


def test_alibaba_gpu_milli_out_of_range_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "pods.csv", PODS, "p0,1,1,1,1001,,LS,Running,0,10,0")
    with pytest.raises(TraceError) as info:
        load_trace(str(path))
    assert str(info.value) == f"{path}:2: field 'gpu_milli': 1001 is beyond the limit of 1000"
