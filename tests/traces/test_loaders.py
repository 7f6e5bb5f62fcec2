"""Trace loaders: each public format and the generic one, malformed files, cluster sizing.

Well-formed files are written to ``tmp_path`` and loaded through
``ilucid.traces.load_trace(path)`` (format detection included). Malformed files
must raise ``TraceError`` whose message starts with ``path:line:`` and names
the field at fault. The cluster-size convention of ../shared/traces/README.md
is checked against the real traces when ``ILUCID_TRACE_DIR`` points at them.
"""

from __future__ import annotations

import math
import os
from datetime import datetime
from pathlib import Path

import pytest

from ilucid.core import Cluster, JobClass, JobSpec
from ilucid.traces import (
    GENERIC_COLUMNS,
    KNOWN_TRACES,
    TraceError,
    cluster_for_load,
    load_trace,
)

PHILLY_HEADER = "#job id,arrival time (sec),topology,shape,size,duration (sec)"
ITP_HEADER = "job_id,submission_time,duration,num_gpu"
ALIBABA_PODS_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time"
)
ALIBABA_NODES_HEADER = "sn,cpu_milli,memory_mib,gpu,model"
HELIOS_HEADER = "job_id,user,vc,gpu_num,cpu_num,state,submit_time,duration"
GENERIC_HEADER = ",".join(GENERIC_COLUMNS)


def write(path: Path, *lines: str) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def load_error(path: Path) -> TraceError:
    with pytest.raises(TraceError) as info:
        load_trace(str(path))
    return info.value


def assert_points_at(err: TraceError, path: Path, line: int, field: str | None) -> None:
    """The message begins ``path:line:`` and names the field (when there is one)."""
    message = str(err)
    prefix = f"{path}:{line}:"
    assert message.startswith(prefix), message
    if field is not None:
        assert message.startswith(f"{prefix} field '{field}':"), message
    assert "\n" not in message
    assert (err.path, err.line, err.field) == (str(path), line, field)


# -- well-formed files ------------------------------------------------------------------
def test_philly_rfold(tmp_path: Path) -> None:
    path = write(
        tmp_path / "philly_trace.csv",
        PHILLY_HEADER,
        "0,0.0,CLOS,1,1,3613.0",
        "1,10.5,CLOS,8+8,16,100.0",
        "2,10.5,CLOS,0,0,5.0",  # no GPU: skipped, counted
        "3,20.0,CLOS,2+1+1,4,7.5",
    )
    trace = load_trace(str(path))
    assert trace.name == "philly_trace"
    assert trace.source == str(path)
    assert trace.cluster is None
    assert not trace.synthetic
    assert trace.jobs == [
        JobSpec("0", 0.0, 1, 3613.0),  # shapes are checked, not kept: history, not requests
        JobSpec("1", 10.5, 16, 100.0),
        JobSpec("3", 20.0, 4, 7.5),
    ]
    assert dict(trace.skipped) == {"uses no GPU": 1}


def test_itp(tmp_path: Path) -> None:
    path = write(
        tmp_path / "cluster01.csv",
        ITP_HEADER,
        "965d744f,1932025,2429,64",
        "fb10987f,2000581,1532,1",
        "0aa,2000581,600,0",  # no GPU: skipped
        "1bb,2000600,600.5,8",
    )
    trace = load_trace(str(path))
    assert trace.name == "cluster01"
    # ITP times are kept as they are (no shift to 0)
    assert trace.jobs == [
        JobSpec("965d744f", 1932025.0, 64, 2429.0),
        JobSpec("fb10987f", 2000581.0, 1, 1532.0),
        JobSpec("1bb", 2000600.0, 8, 600.5),
    ]
    assert dict(trace.skipped) == {"uses no GPU": 1}
    assert all(j.job_class is JobClass.TRAINING and j.shape is None for j in trace.jobs)


def _alibaba_pods(path: Path) -> Path:
    return write(
        path,
        ALIBABA_PODS_HEADER,
        "pod-0,12000,16384,1,460,,LS,Running,0,1000,0",
        "pod-1,6000,12288,2,1000,V100M16|V100M32,BE,Succeeded,5,505,15",
        "pod-2,32000,65536,0,0,,LS,Running,10,900,10",  # no GPU
        "pod-3,4000,8192,1,1000,,BE,Pending,20,,",  # never started
        "pod-4,4000,8192,1,1000,G2,Burstable,Running,30,130,40",
    )


def test_alibaba_v2023_with_sibling_node_list(tmp_path: Path) -> None:
    pods = _alibaba_pods(tmp_path / "openb_pod_list_default.csv")
    write(
        tmp_path / "openb_node_list_gpu_node.csv",
        ALIBABA_NODES_HEADER,
        "node-0,64000,262144,2,P100",
        "node-1,32000,262144,0,",  # no GPU: dropped
        "node-2,96000,786432,8,V100M32",
    )
    trace = load_trace(str(pods))
    assert trace.jobs == [
        # LS -> inference; a 1-GPU pod keeps its fractional gpu_milli
        JobSpec("pod-0", 0.0, 1, 1000.0, job_class=JobClass.INFERENCE, tenant="LS", gpu_milli=460),
        # duration = deletion_time - scheduled_time; gpu_spec alternatives kept as type
        JobSpec(
            "pod-1",
            5.0,
            2,
            490.0,
            job_class=JobClass.TRAINING,
            tenant="BE",
            gpu_type="V100M16|V100M32",
        ),
        JobSpec(
            "pod-4", 30.0, 1, 90.0, job_class=JobClass.TRAINING, tenant="Burstable", gpu_type="G2"
        ),
    ]
    assert dict(trace.skipped) == {"uses no GPU": 1, "never started": 1}
    assert trace.cluster is not None
    assert [(n.name, n.num_gpus, n.gpu_type) for n in trace.cluster.nodes] == [
        ("node-0", 2, "P100"),
        ("node-2", 8, "V100M32"),
    ]
    assert trace.cluster.total_gpus == 10


def test_alibaba_v2023_without_node_list(tmp_path: Path) -> None:
    pods = _alibaba_pods(tmp_path / "pods.csv")
    trace = load_trace(str(pods))
    assert trace.cluster is None
    assert [j.id for j in trace.jobs] == ["pod-0", "pod-1", "pod-4"]


def test_helios_seconds_are_shifted_to_start_at_zero(tmp_path: Path) -> None:
    path = write(
        tmp_path / "venus.csv",
        HELIOS_HEADER,
        "j1,u1,vc-a,1,4,COMPLETED,1000,60",
        "j2,u2,vc-b,8,32,FAILED,1030,7200",
        "j3,u1,vc-a,0,2,COMPLETED,1040,10",  # no GPU: skipped
        "j4,u3,vc-a,16,64,CANCELLED,1100,5",
    )
    trace = load_trace(str(path))
    assert trace.jobs == [
        JobSpec("j1", 0.0, 1, 60.0, tenant="vc-a", user="u1"),
        JobSpec("j2", 30.0, 8, 7200.0, tenant="vc-b", user="u2"),
        JobSpec("j4", 100.0, 16, 5.0, tenant="vc-a", user="u3"),
    ]
    assert dict(trace.skipped) == {"uses no GPU": 1}


def test_helios_date_times(tmp_path: Path) -> None:
    path = write(
        tmp_path / "helios.csv",
        HELIOS_HEADER,
        "j1,u1,vc-a,2,4,COMPLETED,2020-04-01 10:00:00,60",
        "j2,u1,vc-a,4,4,COMPLETED,2020-04-01 10:01:30,120",
    )
    trace = load_trace(str(path))
    expected_gap = (
        datetime.fromisoformat("2020-04-01 10:01:30").timestamp()
        - datetime.fromisoformat("2020-04-01 10:00:00").timestamp()
    )
    assert [(j.id, j.submit_time, j.num_gpus) for j in trace.jobs] == [
        ("j1", 0.0, 2),
        ("j2", expected_gap, 4),
    ]
    assert expected_gap == 90.0


def test_generic_all_columns(tmp_path: Path) -> None:
    path = write(
        tmp_path / "site.csv",
        GENERIC_HEADER,
        "t1,0,4,3600,training,team-a,alice,A100,80,1000,0",
        "i1,5,1,600.5,inference,serving,bob,,,500,3",
        "z0,6,0,10,training,team-a,alice,,,,",  # no GPU: skipped
        "b1,7,2,30,best-effort,,,,,,",
    )
    trace = load_trace(str(path))
    assert trace.jobs == [
        JobSpec(
            "t1",
            0.0,
            4,
            3600.0,
            job_class=JobClass.TRAINING,
            tenant="team-a",
            user="alice",
            gpu_type="A100",
            gpu_memory_gb=80.0,
            gpu_milli=1000,
            priority=0,
        ),
        JobSpec(
            "i1",
            5.0,
            1,
            600.5,
            job_class=JobClass.INFERENCE,
            tenant="serving",
            user="bob",
            gpu_milli=500,
            priority=3,
        ),
        JobSpec("b1", 7.0, 2, 30.0, job_class=JobClass.BEST_EFFORT),
    ]
    assert dict(trace.skipped) == {"uses no GPU": 1}


def test_generic_required_columns_only(tmp_path: Path) -> None:
    path = write(tmp_path / "min.csv", "id,submit_time,num_gpus,duration", "x,1,2,3", "y,1,8,4")
    trace = load_trace(str(path))
    assert trace.jobs == [JobSpec("x", 1.0, 2, 3.0), JobSpec("y", 1.0, 8, 4.0)]


def test_blank_lines_are_ignored_and_line_numbers_stay_physical(tmp_path: Path) -> None:
    path = write(tmp_path / "gaps.csv", ITP_HEADER, "a,0,10,1", "", "b,5,x,1")
    trace_error = load_error(path)
    assert_points_at(trace_error, path, 4, "duration")


# -- malformed files --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("header", "row", "missing"),
    [
        ("#job id,arrival time (sec),topology,shape,duration (sec)", "0,0,CLOS,1,10", "size"),
        ("job_id,submission_time,num_gpu", "a,0,1", "duration"),
        (
            "name,num_gpu,gpu_milli,gpu_spec,qos,creation_time,deletion_time",
            "p,1,1000,,LS,0,10",
            "scheduled_time",
        ),
        ("job_id,vc,gpu_num,cpu_num,state,submit_time,duration", "j,vc,1,1,DONE,0,10", "user"),
    ],
    ids=["philly", "itp", "alibaba", "helios"],
)
def test_missing_column(tmp_path: Path, header: str, row: str, missing: str) -> None:
    path = write(tmp_path / "trace.csv", header, row)
    err = load_error(path)
    assert_points_at(err, path, 1, missing)
    assert "missing column" in str(err)


def test_generic_missing_column_names_the_field(tmp_path: Path) -> None:
    # a header with id and submit_time is taken as the generic format, so the
    # loader can name the required column that is missing
    path = write(tmp_path / "trace.csv", "id,submit_time,num_gpus,gpu_type", "x,0,1,A100")
    assert_points_at(load_error(path), path, 1, "duration")


def test_header_with_byte_order_mark_is_read(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text("\ufeffid,submit_time,num_gpus,duration\nx,0,1,5\n", encoding="utf-8")
    trace = load_trace(str(path))
    assert [j.id for j in trace.jobs] == ["x"]


@pytest.mark.parametrize(
    ("header", "rows", "line", "field"),
    [
        (PHILLY_HEADER, ["0,0,CLOS,1,1,10", "1,5,CLOS,1,1,ten"], 3, "duration (sec)"),
        (ITP_HEADER, ["a,0,10,1", "b,1,20,1", "c,2,abc,1"], 4, "duration"),
        (HELIOS_HEADER, ["j,u,vc,1,1,DONE,0,1e"], 2, "duration"),
        (GENERIC_HEADER, ["x,0,1,,training,,,,,,"], 2, "duration"),
        ("id,submit_time,num_gpus,duration", ["x,0,1,nan"], 2, "duration"),
        ("id,submit_time,num_gpus,duration", ["x,0,1,inf"], 2, "duration"),
        ("id,submit_time,num_gpus,duration", ["x,0,1,5", "y,0,1,-5"], 3, "duration"),
    ],
    ids=[
        "philly",
        "itp",
        "helios",
        "generic-empty",
        "generic-nan",
        "generic-inf",
        "generic-negative",
    ],
)
def test_non_numeric_duration(
    tmp_path: Path, header: str, rows: list[str], line: int, field: str
) -> None:
    path = write(tmp_path / "trace.csv", header, *rows)
    assert_points_at(load_error(path), path, line, field)


@pytest.mark.parametrize(
    ("header", "rows", "line", "field"),
    [
        (PHILLY_HEADER, ["0,0,CLOS,1,-1,10"], 2, "size"),
        (ITP_HEADER, ["a,0,10,1", "b,1,10,-2"], 3, "num_gpu"),
        (ALIBABA_PODS_HEADER, ["p,1,1,-1,1000,,LS,Running,0,10,0"], 2, "num_gpu"),
        (HELIOS_HEADER, ["j,u,vc,-4,1,DONE,0,10"], 2, "gpu_num"),
        ("id,submit_time,num_gpus,duration", ["x,0,1,1", "y,0,1,1", "z,0,-8,1"], 4, "num_gpus"),
    ],
    ids=["philly", "itp", "alibaba", "helios", "generic"],
)
def test_negative_gpus(tmp_path: Path, header: str, rows: list[str], line: int, field: str) -> None:
    path = write(tmp_path / "trace.csv", header, *rows)
    err = load_error(path)
    assert_points_at(err, path, line, field)
    assert "must be >= 0" in str(err)


def test_fractional_gpus(tmp_path: Path) -> None:
    path = write(tmp_path / "trace.csv", ITP_HEADER, "a,0,10,1.5")
    err = load_error(path)
    assert_points_at(err, path, 2, "num_gpu")
    assert "whole number" in str(err)


@pytest.mark.parametrize(
    ("header", "rows", "field"),
    [
        (
            PHILLY_HEADER,
            ["0,10,CLOS,1,1,10", "1,20,CLOS,1,1,10", "2,15,CLOS,1,1,10"],
            "arrival time (sec)",
        ),
        (ITP_HEADER, ["a,10,10,1", "b,20,10,1", "c,19.5,10,1"], "submission_time"),
        (
            ALIBABA_PODS_HEADER,
            [
                "p0,1,1,1,1000,,LS,Running,10,20,10",
                "p1,1,1,1,1000,,LS,Running,20,30,20",
                "p2,1,1,1,1000,,LS,Running,5,30,5",
            ],
            "creation_time",
        ),
        (
            HELIOS_HEADER,
            ["j0,u,vc,1,1,DONE,10,5", "j1,u,vc,1,1,DONE,20,5", "j2,u,vc,1,1,DONE,15,5"],
            "submit_time",
        ),
        ("id,submit_time,num_gpus,duration", ["x,10,1,1", "y,20,1,1", "z,15,1,1"], "submit_time"),
    ],
    ids=["philly", "itp", "alibaba", "helios", "generic"],
)
def test_unsorted_times(tmp_path: Path, header: str, rows: list[str], field: str) -> None:
    path = write(tmp_path / "trace.csv", header, *rows)
    err = load_error(path)
    assert_points_at(err, path, 4, field)
    assert "must not go backwards" in str(err)


def test_unsorted_times_counts_skipped_rows(tmp_path: Path) -> None:
    # a GPU-less row is skipped but its time still orders the file
    path = write(tmp_path / "trace.csv", ITP_HEADER, "a,10,10,0", "b,5,10,1")
    assert_points_at(load_error(path), path, 3, "submission_time")


@pytest.mark.parametrize(
    ("shape", "size", "problem"),
    [
        ("8+4", 16, "does not split 16 GPUs"),
        ("8x8", 16, "expected GPUs per machine"),
        ("8+0+8", 16, "does not split 16 GPUs"),
        ("", 4, "is empty"),
    ],
    ids=["wrong-sum", "not-a-split", "zero-part", "empty"],
)
def test_wrong_shape(tmp_path: Path, shape: str, size: int, problem: str) -> None:
    path = write(
        tmp_path / "philly_trace.csv",
        PHILLY_HEADER,
        "0,0,CLOS,1,1,10",
        f"1,1,CLOS,{shape},{size},10",
    )
    err = load_error(path)
    assert_points_at(err, path, 3, "shape")
    assert problem in str(err)


def test_wrong_number_of_fields(tmp_path: Path) -> None:
    path = write(tmp_path / "trace.csv", ITP_HEADER, "a,0,10,1", "b,1,10,1,extra")
    err = load_error(path)
    assert_points_at(err, path, 3, None)
    assert "5 fields" in str(err)


def test_alibaba_deletion_before_scheduling(tmp_path: Path) -> None:
    path = write(tmp_path / "pods.csv", ALIBABA_PODS_HEADER, "p,1,1,1,1000,,LS,Running,0,5,10")
    assert_points_at(load_error(path), path, 2, "deletion_time")


def test_alibaba_node_list_without_gpus(tmp_path: Path) -> None:
    pods = write(tmp_path / "pods.csv", ALIBABA_PODS_HEADER, "p,1,1,1,1000,,LS,Running,0,5,0")
    nodes = write(tmp_path / "openb_node_list_gpu_node.csv", ALIBABA_NODES_HEADER, "n0,1,1,0,")
    with pytest.raises(TraceError) as info:
        load_trace(str(pods))
    assert str(info.value).startswith(f"{nodes}: field 'gpu':")


def test_helios_bad_date(tmp_path: Path) -> None:
    path = write(tmp_path / "h.csv", HELIOS_HEADER, "j,u,vc,1,1,DONE,yesterday,10")
    assert_points_at(load_error(path), path, 2, "submit_time")


def test_generic_unknown_job_class(tmp_path: Path) -> None:
    path = write(tmp_path / "g.csv", GENERIC_HEADER, "x,0,1,10,batch,,,,,,")
    err = load_error(path)
    assert_points_at(err, path, 2, "job_class")
    assert "'batch'" in str(err)


def test_unknown_format_and_empty_file(tmp_path: Path) -> None:
    unknown = write(tmp_path / "odd.csv", "a,b,c", "1,2,3")
    assert_points_at(load_error(unknown), unknown, 1, None)
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    assert str(load_error(empty)).startswith(f"{empty}:")


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "nope.csv"
    err = load_error(path)
    assert str(err).startswith(f"{path}:")
    assert "no such file" in str(err)


def test_known_name_without_trace_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ILUCID_TRACE_DIR", raising=False)
    with pytest.raises(TraceError, match="ILUCID_TRACE_DIR"):
        load_trace("philly")


# -- cluster sizing ---------------------------------------------------------------------
def test_cluster_for_load_formula() -> None:
    # work = 8*1000 + 4*500 = 10000 GPU-s over a 100 s span;
    # at load 0.85 with 8-GPU nodes: ceil(10000 / (8*0.85*100)) = ceil(14.7) = 15 nodes
    jobs = [JobSpec("a", 0, 8, 1000), JobSpec("b", 100, 4, 500)]
    cluster = cluster_for_load(jobs)
    assert cluster == Cluster.homogeneous(15, 8)
    # at load 0.5: ceil(10000 / 400) = 25;  with 4-GPU nodes at 0.85: ceil(29.4) = 30
    assert len(cluster_for_load(jobs, load=0.5)) == 25
    assert len(cluster_for_load(jobs, gpus_per_node=4)) == 30
    assert cluster_for_load(jobs, gpus_per_node=4).max_gpus_per_node == 4


def test_cluster_for_load_fits_the_largest_job() -> None:
    # tiny work, but a 40-GPU job needs ceil(40/8) = 5 nodes
    jobs = [JobSpec("a", 0, 40, 1), JobSpec("b", 10_000, 1, 1)]
    assert len(cluster_for_load(jobs)) == 5
    # a single job: the span counts as 1 s -> ceil(2*10 / (8*0.85*1)) = 3 nodes
    assert len(cluster_for_load([JobSpec("c", 5, 2, 10)])) == 3
    assert math.ceil(2 * 10 / (8 * 0.85)) == 3


def test_cluster_for_load_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="empty"):
        cluster_for_load([])
    with pytest.raises(ValueError, match="load"):
        cluster_for_load([JobSpec("a", 0, 1, 1)], load=0)


def _real_trace_dir() -> Path:
    value = os.environ.get("ILUCID_TRACE_DIR")
    if not value:
        pytest.skip("ILUCID_TRACE_DIR is not set (point it at ../shared/traces)")
    directory = Path(value)
    if not directory.is_dir():
        pytest.skip(f"ILUCID_TRACE_DIR={value} is not a directory")
    return directory


# Nodes x 8 GPUs at nominal load 0.85, from ../shared/traces/README.md.
README_NODES = {
    "philly": 172,
    "itp-01": 8,
    "itp-02": 13,
    "itp-03": 21,
    "itp-04": 73,
    "itp-05": 2,
}


@pytest.mark.parametrize(("name", "nodes"), README_NODES.items(), ids=list(README_NODES))
def test_cluster_for_load_matches_the_readme(name: str, nodes: int) -> None:
    directory = _real_trace_dir()
    if not (directory / KNOWN_TRACES[name]).exists():
        pytest.skip(f"{KNOWN_TRACES[name]} is not in {directory}")
    trace = load_trace(name)
    assert trace.name == name
    assert trace.cluster is None
    cluster = cluster_for_load(trace.jobs)
    assert len(cluster) == nodes
    assert cluster.total_gpus == nodes * 8


def test_real_alibaba_brings_its_own_cluster() -> None:
    directory = _real_trace_dir()
    if not (directory / KNOWN_TRACES["alibaba"]).exists():
        pytest.skip("the Alibaba v2023 trace is not in the trace directory")
    trace = load_trace("alibaba")
    assert trace.cluster is not None
    # README: 8,152 pods on 1,213 GPU nodes / 6,212 GPUs
    assert len(trace.cluster) == 1213
    assert trace.cluster.total_gpus == 6212
    assert len(trace.jobs) + sum(trace.skipped.values()) == 8152


def test_duplicate_job_id_names_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "dup.csv"
    path.write_text("job_id,submission_time,duration,num_gpu\na,0,10,1\nb,1,10,1\na,2,10,1\n")
    with pytest.raises(TraceError) as caught:
        load_trace(str(path))
    assert str(caught.value) == f"{path}:4: field 'job_id': job id 'a' already used on line 2"
