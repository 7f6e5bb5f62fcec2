"""Absurd trace values are refused at the edge (issue 16): the replay's work follows events.

A row such as ``duration = 1e308`` once made ``ilucid simulate`` append a sample per
simulated minute until it was killed; binary and Latin-1 files failed with a bare
codec message; a header-only file was reported as a cluster problem. Each case here
must fail fast with ``file:line: field`` (or ``file: no jobs``), in every format.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ilucid.core import Cluster, JobSpec, make_policy
from ilucid.sim.engine import simulate
from ilucid.sim.replay_types import MAX_SAMPLES
from ilucid.traces import GENERIC_COLUMNS, TraceError, load_dlrm, load_trace, overlay_inference
from ilucid.traces.formats import load_alibaba_share
from ilucid.traces.reader import MAX_GPUS, MAX_SECONDS

PHILLY = "#job id,arrival time (sec),topology,shape,size,duration (sec)"
ITP = "job_id,submission_time,duration,num_gpu"
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


def write(path: Path, *lines: str) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def dlrm_row(gpus: str, created: str, deleted: str) -> str:
    return f"i,HN,app,12,12,{gpus},{gpus},25,25,120,120,640,800,8,{created},,{deleted}"


def assert_names(err: Exception, path: Path, line: int | None, field: str | None) -> str:
    """The one-line message names the file, the line and the field at fault."""
    message = str(err)
    assert "\n" not in message
    where = f"{path}:{line}:" if line is not None else f"{path}:"
    assert message.startswith(where), message
    if field is not None:
        assert f"field '{field}'" in message, message
    return message


# A good row per format, and how to spoil one field of it (the row is on line 3).
FORMATS: dict[str, tuple[str, str, str]] = {
    # name: (header, good first row, template of the second row with {submit} {gpus} {duration})
    "philly": (PHILLY, "0,0,CLOS,1,1,10", "1,{submit},CLOS,{gpus},{gpus},{duration}"),
    "itp": (ITP, "a,0,10,1", "b,{submit},{duration},{gpus}"),
    "alibaba": (
        PODS,
        "p0,1,1,1,1000,,LS,Running,0,10,0",
        "p1,1,1,{gpus},1000,,LS,Running,{submit},{duration},0",
    ),
    "helios": (HELIOS, "j0,u,vc,1,1,DONE,0,10", "j1,u,vc,{gpus},1,DONE,{submit},{duration}"),
    "generic": (GENERIC, "x,0,1,10,training,,,,,,", "y,{submit},{gpus},{duration},training,,,,,,"),
}
FIELDS: dict[str, dict[str, str]] = {
    "philly": {"submit": "arrival time (sec)", "gpus": "size", "duration": "duration (sec)"},
    "itp": {"submit": "submission_time", "gpus": "num_gpu", "duration": "duration"},
    # Alibaba's duration is deletion_time - scheduled_time: the spoilt field is deletion_time
    "alibaba": {"submit": "creation_time", "gpus": "num_gpu", "duration": "deletion_time"},
    "helios": {"submit": "submit_time", "gpus": "gpu_num", "duration": "duration"},
    "generic": {"submit": "submit_time", "gpus": "num_gpus", "duration": "duration"},
}
BAD_VALUES = {
    "huge": "1e308",
    "overflow": "1e309",  # float() gives inf
    "nan": "NaN",
    "inf": "inf",
    "minus-inf": "-Infinity",
    "negative": "-5",
}


def _spoilt(fmt: str, which: str, value: str) -> str:
    good = {"submit": "5", "gpus": "1", "duration": "20"}
    return FORMATS[fmt][2].format(**{**good, which: value})


CASES = [
    pytest.param(fmt, which, value, id=f"{fmt}-{which}-{label}")
    for fmt in FORMATS
    for which in ("submit", "gpus", "duration")
    for label, value in BAD_VALUES.items()
]


@pytest.mark.parametrize(("fmt", "which", "value"), CASES)
def test_absurd_numbers_are_refused_with_file_line_and_field(
    tmp_path: Path, fmt: str, which: str, value: str
) -> None:
    header, first, _ = FORMATS[fmt]
    path = write(tmp_path / "trace.csv", header, first, _spoilt(fmt, which, value))
    with pytest.raises(TraceError) as info:
        load_trace(str(path))
    message = assert_names(info.value, path, 3, FIELDS[fmt][which])
    assert "trace.csv:3:" in message


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_duration_and_submit_time_limit_is_about_100_years(tmp_path: Path, fmt: str) -> None:
    header, first, template = FORMATS[fmt]
    limit = f"{MAX_SECONDS:.0f}"
    # (Alibaba's row is scheduled at 0, so it runs until deletion_time = the limit)
    ok = template.format(submit=limit, gpus=MAX_GPUS, duration=limit)
    trace = load_trace(str(write(tmp_path / "ok.csv", header, first, ok)))
    assert max(j.submit_time for j in trace.jobs) == MAX_SECONDS
    over = template.format(submit="5", gpus="1", duration=f"{MAX_SECONDS * 1.01:.0f}")
    path = write(tmp_path / "over.csv", header, first, over)
    with pytest.raises(TraceError) as info:
        load_trace(str(path))
    message = assert_names(info.value, path, 3, FIELDS[fmt]["duration"])
    assert "beyond the limit of 3.2e+09 s (about 100 years)" in message


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_gpu_count_is_bounded(tmp_path: Path, fmt: str) -> None:
    header, first, _ = FORMATS[fmt]
    path = write(tmp_path / "trace.csv", header, first, _spoilt(fmt, "gpus", str(MAX_GPUS + 1)))
    with pytest.raises(TraceError) as info:
        load_trace(str(path))
    assert "beyond the limit of 100000" in assert_names(info.value, path, 3, FIELDS[fmt]["gpus"])


def test_the_message_reads_as_the_issue_asks(tmp_path: Path) -> None:
    path = write(
        tmp_path / "trace.csv", "id,submit_time,num_gpus,duration", "a,0,1,10", "b,5,1,1e308"
    )
    with pytest.raises(TraceError) as info:
        load_trace(str(path))
    assert str(info.value) == (
        f"{path}:3: field 'duration': 1e+308 s is beyond the limit of 3.2e+09 s (about 100 years)"
    )


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("y,5,1,10,training,,,,1e308,,", "gpu_memory_gb"),
        ("y,5,1,10,training,,,,nan,,", "gpu_memory_gb"),
        ("y,5,1,10,training,,,,,1e308,", "gpu_milli"),
        ("y,5,1,10,training,,,,,,1e308", "priority"),
        ("y,5,1,10,training,,,,,,-1e308", "priority"),
        ("y,5,1,10,training,,,,,,inf", "priority"),
    ],
    ids=["memory-huge", "memory-nan", "milli-huge", "priority-huge", "priority-minus", "prio-inf"],
)
def test_generic_optional_numbers_are_bounded(tmp_path: Path, row: str, field: str) -> None:
    path = write(tmp_path / "g.csv", GENERIC, "x,0,1,10,training,,,,,,", row)
    with pytest.raises(TraceError) as info:
        load_trace(str(path))
    assert_names(info.value, path, 3, field)


def test_alibaba_scheduled_time_and_gpu_milli_are_bounded(tmp_path: Path) -> None:
    path = write(tmp_path / "pods.csv", PODS, "p,1,1,1,1000,,LS,Running,0,10,1e308")
    with pytest.raises(TraceError) as info:
        load_trace(str(path))
    assert_names(info.value, path, 2, "scheduled_time")
    path = write(tmp_path / "pods.csv", PODS, "p,1,1,1,1e308,,LS,Running,0,10,0")
    with pytest.raises(TraceError) as info:
        load_trace(str(path))
    assert_names(info.value, path, 2, "gpu_milli")


def test_alibaba_node_list_and_share_study_are_bounded(tmp_path: Path) -> None:
    pods = write(tmp_path / "pods.csv", PODS, "p,1,1,1,1000,,LS,Running,0,10,0")
    nodes = write(tmp_path / "openb_node_list_gpu_node.csv", NODES, "n0,1,1,1e308,V100")
    with pytest.raises(TraceError) as info:
        load_trace(str(pods))
    assert_names(info.value, nodes, 2, "gpu")
    nodes = write(tmp_path / "nodes.csv", NODES, "n0,1e308,1,8,V100")
    with pytest.raises(TraceError) as info:
        load_alibaba_share(pods, nodes)
    assert_names(info.value, nodes, 2, "cpu_milli")


def test_helios_submit_time_is_bounded_from_the_first_job(tmp_path: Path) -> None:
    # absolute (epoch) seconds are fine; 200 years after the first job is not
    path = write(
        tmp_path / "h.csv",
        HELIOS,
        "j0,u,vc,1,1,DONE,1600000000,10",
        f"j1,u,vc,1,1,DONE,{1600000000 + 2 * MAX_SECONDS:.0f},10",
    )
    with pytest.raises(TraceError) as info:
        load_trace(str(path))
    assert "after the first job" in assert_names(info.value, path, 3, "submit_time")


@pytest.mark.parametrize(
    ("row", "field"),
    [
        (dlrm_row("1", "1e308", ""), "creation_time"),
        (dlrm_row("1", "0", "nan"), "deletion_time"),
        (dlrm_row("1", "0", "-1"), "deletion_time"),
        (dlrm_row("1e308", "0", "10"), "gpu_request"),
    ],
    ids=["created-huge", "deleted-nan", "deleted-negative", "gpus-huge"],
)
def test_dlrm_numbers_are_bounded(tmp_path: Path, row: str, field: str) -> None:
    path = write(tmp_path / "dlrm.csv", DLRM, row)
    with pytest.raises(TraceError) as info:
        load_dlrm(path)
    assert_names(info.value, path, 2, field)


def test_dlrm_without_a_window_is_refused(tmp_path: Path) -> None:
    # every instance alive across the whole window: the window would have no length
    path = write(tmp_path / "dlrm.csv", DLRM, dlrm_row("1", "", ""))
    with pytest.raises(TraceError) as info:
        load_dlrm(path)
    assert "no length" in assert_names(info.value, path, None, "creation_time")


def test_overlay_of_a_tiny_window_on_a_long_trace_is_refused(tmp_path: Path) -> None:
    # a 1 s window tiled over 3e6 s would make 3 million service jobs
    dlrm = load_dlrm(write(tmp_path / "dlrm.csv", DLRM, dlrm_row("1", "0", "1")))
    training = [JobSpec("a", 0.0, 1, 10.0), JobSpec("b", 3e6, 1, 10.0)]
    with pytest.raises(ValueError, match=r"dlrm\.csv: .* over the limit of 2,000,000 jobs"):
        overlay_inference(training, dlrm, cluster_gpus=8, share=0.5)


# -- bytes that are not a UTF-8 CSV ------------------------------------------------------
def test_binary_file_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "trace.bin"
    # starts with a byte no UTF-8 text has: random bytes alone put a newline before the
    # first invalid one about once a hundred runs, and the error then names line 2
    path.write_bytes(b"\xbe" + os.urandom(4096) + b"\x00")
    with pytest.raises(TraceError) as info:
        load_trace(str(path))
    message = assert_names(info.value, path, 1, None)
    assert "not UTF-8" in message or "NUL" in message


def test_nul_byte_in_utf8_text_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_bytes(b"id,submit_time,num_gpus,duration\na,0,1,10\nb,1,1,1\x0010\n")
    with pytest.raises(TraceError) as info:
        load_trace(str(path))
    assert "NUL byte" in assert_names(info.value, path, 3, None)


def test_nul_byte_in_the_header_names_line_one(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_bytes(b"id,submit_\x00time,num_gpus,duration\na,0,1,10\n")
    with pytest.raises(TraceError) as info:
        load_trace(str(path))
    assert "NUL byte" in assert_names(info.value, path, 1, None)


def test_latin1_file_names_line_and_byte_offset(tmp_path: Path) -> None:
    header = "id,submit_time,num_gpus,duration,job_class,tenant,user"
    text = f"{header}\na,0,1,10,training,t,ann\nb,1,1,10,training,t,José\n"
    path = tmp_path / "latin1.csv"
    path.write_bytes(text.encode("latin-1"))
    offset = text.encode("latin-1").index(b"\xe9")
    with pytest.raises(TraceError) as info:
        load_trace(str(path))
    message = assert_names(info.value, path, 3, None)
    assert f"byte 0xe9 at offset {offset} is not UTF-8" in message


def test_latin1_deep_in_a_long_file_names_its_own_line(tmp_path: Path) -> None:
    # text decoding reads ahead in blocks: the line at fault must still be the exact one
    rows = [f"j{i},{i},1,10" for i in range(2000)]
    rows[1500] = "j1500,1500,1,10\xa0"
    path = tmp_path / "long.csv"
    path.write_bytes(("\n".join([ITP, *rows]) + "\n").encode("latin-1"))
    with pytest.raises(TraceError) as info:
        load_trace(str(path))
    assert "byte 0xa0" in assert_names(info.value, path, 1502, None)


def test_dlrm_and_node_lists_refuse_binary_too(tmp_path: Path) -> None:
    path = tmp_path / "dlrm.csv"
    path.write_bytes(DLRM.encode() + b"\n\xff\xfe\x00\x01\n")
    with pytest.raises(TraceError) as info:
        load_dlrm(path)
    assert_names(info.value, path, 2, None)


# -- traces without jobs -----------------------------------------------------------------
@pytest.mark.parametrize(
    "header",
    [PHILLY, ITP, PODS, HELIOS, GENERIC],
    ids=["philly", "itp", "alibaba", "helios", "generic"],
)
def test_header_only_file_says_no_jobs(tmp_path: Path, header: str) -> None:
    path = write(tmp_path / "trace.csv", header)
    with pytest.raises(TraceError) as info:
        load_trace(str(path))
    assert str(info.value).startswith(f"{path}: no jobs"), info.value


def test_file_whose_rows_are_all_skipped_says_no_jobs_and_why(tmp_path: Path) -> None:
    path = write(tmp_path / "trace.csv", ITP, "a,0,10,0", "", "b,1,10,0")
    with pytest.raises(TraceError) as info:
        load_trace(str(path))
    assert str(info.value) == f"{path}: no jobs: every row was skipped (2 uses no GPU)"


# -- the simulator's own bound -------------------------------------------------------------
def test_cluster_series_stays_bounded_over_a_huge_makespan() -> None:
    # the last job ends ~6.4e9 s in: 1e8 one-minute samples before the cap
    jobs = [JobSpec("a", 0.0, 1, 10.0), JobSpec("b", MAX_SECONDS, 1, MAX_SECONDS)]
    cluster = Cluster.homogeneous(1, 8)
    started = time.perf_counter()
    result = simulate(jobs, cluster, make_policy("fifo"))
    assert time.perf_counter() - started < 10
    series = result.series
    assert len(series.busy_gpus) <= MAX_SAMPLES
    assert len(series.busy_gpus) == len(series.pending_jobs) == len(series.fragmented_gpus)
    assert series.step > 60 and (series.step / 60).is_integer()
    assert series.start + len(series.busy_gpus) * series.step >= 2 * MAX_SECONDS
    # stretched as if it had been sampled at the final step from the start
    coarse = simulate(jobs, cluster, make_policy("fifo"), sample_every=series.step).series
    assert coarse.step == series.step
    assert coarse.busy_gpus == series.busy_gpus
    assert coarse.pending_jobs == series.pending_jobs
    assert coarse.fragmented_gpus == series.fragmented_gpus


def test_cluster_series_of_an_ordinary_trace_is_unchanged() -> None:
    jobs = [JobSpec("a", 0.0, 4, 150.0), JobSpec("b", 30.0, 8, 100.0)]
    series = simulate(jobs, Cluster.homogeneous(1, 8), make_policy("fifo")).series
    assert series.step == 60
    # samples at 0, 60, 120 (a runs, b waits), 180, 240 (b runs once a ends at 150)
    assert list(series.busy_gpus) == [4, 4, 4, 8, 8]
    assert list(series.pending_jobs) == [0, 1, 1, 0, 0]


# -- the command line ----------------------------------------------------------------------
def _simulate_cli(trace: Path, out: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "ilucid.cli", "simulate", "--trace", str(trace), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    return result, time.perf_counter() - started


def test_cli_refuses_a_1e308_row_at_once(tmp_path: Path) -> None:
    path = write(
        tmp_path / "trace.csv", "id,submit_time,num_gpus,duration", "a,0,1,10", "b,5,1,1e308"
    )
    result, elapsed = _simulate_cli(path, tmp_path / "out")
    print(f"1e308 row: exit {result.returncode} after {elapsed:.2f} s")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines == [
        f"ilucid: error: {path}:3: field 'duration': 1e+308 s is beyond the limit of"
        " 3.2e+09 s (about 100 years)"
    ]
    assert not (tmp_path / "out").exists()


def test_cli_refuses_a_binary_file_at_once(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_bytes(os.urandom(1 << 16) + b"\x00")
    result, elapsed = _simulate_cli(path, tmp_path / "out")
    print(f"binary file: exit {result.returncode} after {elapsed:.2f} s")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert lines[0].startswith(f"ilucid: error: {path}:1:")


def test_cli_says_a_header_only_trace_has_no_jobs(tmp_path: Path) -> None:
    path = write(tmp_path / "trace.csv", "id,submit_time,num_gpus,duration")
    result, _ = _simulate_cli(path, tmp_path / "out")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"ilucid: error: {path}: no jobs: the file has a header and no rows"
    )
