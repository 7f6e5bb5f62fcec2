"""The DLRM inference instance list and its overlay on a training trace (docs/scenarios.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ilucid.core import JobClass, JobSpec
from ilucid.traces import TraceError, load_dlrm, load_inference, load_trace, overlay_inference

HEADER = (
    "instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,"
    "rdma_limit,memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,"
    "creation_time,scheduled_time,deletion_time"
)


def row(name: str, gpus: int, created: str, deleted: str) -> str:
    return f"{name},HN,app_0,12,12,{gpus},{gpus},25,25,120,120,640,800,8,{created},,{deleted}"


def write(path: Path, *rows: str) -> Path:
    path.write_text("\n".join([HEADER, *rows]) + "\n", encoding="utf-8")
    return path


def test_censored_lifetimes_run_to_the_window_edges(tmp_path: Path) -> None:
    trace = load_dlrm(
        write(
            tmp_path / "dlrm.csv",
            row("a", 1, "", "100"),  # alive when the window opened
            row("b", 1, "50", ""),  # alive when it closed
            row("c", 1, "20", "1000"),  # sets the window's end
            row("cpu", 0, "10", "20"),
        )
    )
    assert trace.window_s == 1000
    assert [trace.lifetime(i) for i in trace.instances] == [100, 950, 980]
    assert trace.skipped == {"uses no GPU": 1}
    assert trace.mean_gpus() == pytest.approx((100 + 950 + 980) / 1000)


def test_bad_fields_name_file_line_and_field(tmp_path: Path) -> None:
    path = write(tmp_path / "dlrm.csv", row("a", 1, "10", "5"))
    with pytest.raises(TraceError, match=r"dlrm.csv:2: field 'deletion_time'"):
        load_dlrm(path)
    path = write(tmp_path / "dup.csv", row("a", 1, "1", "5"), row("a", 1, "1", "5"))
    with pytest.raises(TraceError, match=r"dup.csv:3: field 'instance_sn': duplicate"):
        load_dlrm(path)
    path = write(tmp_path / "gpu.csv", row("a", -1, "1", "5"))
    with pytest.raises(TraceError, match=r"gpu.csv:2: field 'gpu_request'"):
        load_dlrm(path)


def test_overlay_tiles_the_window_and_thins_to_the_share(tmp_path: Path) -> None:
    # window 1000 s; each instance holds 1 GPU for 500 s = 0.5 GPU on average.
    # share 0.1 of 10 GPUs = 1 GPU on average -> two instances are taken.
    rows = [row(f"s{k}", 1, "", "500") for k in range(6)] + [row("end", 0, "0", "1000")]
    trace = load_dlrm(write(tmp_path / "dlrm.csv", *rows))
    training = [JobSpec("t0", 100, 1, 10), JobSpec("t1", 2600, 1, 10)]
    jobs = overlay_inference(training, trace, cluster_gpus=10, share=0.1)
    services = [j for j in jobs if j.job_class is JobClass.INFERENCE]
    # the training span 100..2600 holds tiles at 100, 1100, 2100; the last is cut at 2600
    assert sorted({j.submit_time for j in services}) == [100, 1100, 2100]
    assert len(services) == 6
    assert sorted({j.duration for j in services}) == [500]
    assert [j.submit_time for j in jobs] == sorted(j.submit_time for j in jobs)
    with pytest.raises(ValueError, match="share"):
        overlay_inference(training, trace, 10, share=1.5)


def test_real_dlrm_trace_overlaid_on_philly_uses_about_ten_percent() -> None:
    directory = os.environ.get("ILUCID_TRACE_DIR")
    if not directory or not Path(directory).is_dir():
        pytest.skip("ILUCID_TRACE_DIR is not set (point it at ../shared/traces)")
    dlrm = load_inference("alibaba-dlrm")
    assert len(dlrm.instances) == 7386  # the 1-GPU HN instances (README: 7,386)
    assert dlrm.skipped["uses no GPU"] == 23871 - 7386
    assert {i.gpus for i in dlrm.instances} == {1}
    philly = load_trace("philly")
    jobs = overlay_inference(philly.jobs, dlrm, cluster_gpus=1376, share=0.10)
    span = philly.jobs[-1].submit_time - philly.jobs[0].submit_time
    gpu_s = sum(j.duration * j.num_gpus for j in jobs if j.job_class is JobClass.INFERENCE)
    assert gpu_s / (1376 * span) == pytest.approx(0.10, abs=0.01)
