"""Issue 6, item 4: the live profiling flow under the lucid policy.

A new job first runs on the host's profiler node for a bounded time while the
service samples it; when the time is up the service stops it, turns the
samples into a report (sharing score, refined estimate) for the policy, and
the job runs again on the main node. Recorded samples stand in for NVML.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory
from ilucid.backends.metrics import GpuSample, ReplayMetrics
from ilucid.core import ProfileReport
from ilucid.service.db import EstimatorVersion, JobRow, TransitionRow, make_engine, migrate
from ilucid.service.job_store import JobRequest
from ilucid.service.live_policies import live_policy_factory
from ilucid.service.live_profiler import MeasuredRun, profile_report, rule_score
from ilucid.service.scheduler_service import SchedulerService

# a job that writes where it ran on each start, so the test sees both runs
JOB = 'echo "$CUDA_VISIBLE_DEVICES" >> "{out}"; sleep {seconds}'


def make_service(tmp_path: Path, limit_s: float) -> SchedulerService:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    migrate(url)
    backend = LocalBackend(
        tmp_path, GpuInventory(3, "virtual", 0, "virtual"), grace_s=2.0, profiler_gpus=1
    )
    return SchedulerService(
        make_engine(url),
        backend,
        policy="lucid",
        metrics=ReplayMetrics([GpuSample(85.0, 40.0, 6144.0), GpuSample(95.0, 50.0, 8192.0)]),
        sample_every_s=0.0,
        policy_factory=live_policy_factory(limit_s),
    )


def run_until(service: SchedulerService, job_id: str, state: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        service.reconcile()
        with Session(service.engine) as session:
            row = session.get(JobRow, job_id)
            assert row is not None
            if row.state == state:
                return
        time.sleep(0.1)
    raise AssertionError(f"{job_id} never became {state}")


def transitions(service: SchedulerService, job_id: str) -> list[tuple[str, str, str]]:
    with Session(service.engine) as session:
        return [
            (t.from_state, t.to_state, t.reason)
            for t in session.scalars(
                select(TransitionRow)
                .where(TransitionRow.job_id == job_id)
                .order_by(TransitionRow.id)
            )
        ]


def test_a_new_job_is_profiled_on_the_profiler_node_then_runs_on_main(
    tmp_path: Path, job_scratch: Path
) -> None:
    service = make_service(tmp_path, limit_s=1.0)
    out = job_scratch / "ran"
    job = service.submit(
        JobRequest(["sh", "-c", JOB.format(out=out, seconds=3)], gpus=1, estimate_s=60)
    )
    run_until(service, job, "succeeded")
    runs = out.read_text().split()
    assert runs[0] == "2", "the profiling run uses the profiler node's GPU (the host's last)"
    assert runs[-1] in ("0", "1") and len(runs) == 2, "then it runs on the main node"
    steps = transitions(service, job)
    profiled = [reason for _, to, reason in steps if reason.startswith("profiled:")]
    assert len(profiled) == 1
    # the report is built from the recorded samples: mean 85-95 % is heavy by the rule
    assert "sharing score 2" in profiled[0] and "> 70%: heavy" in profiled[0]
    assert [to for _, to, _ in steps if to != "running"] == ["pending", "pending", "succeeded"]
    assert service.profile(job)["samples"] >= 2
    with Session(service.engine) as session:
        kinds = {v.kind for v in session.scalars(select(EstimatorVersion))}
    assert kinds == {"packing", "duration"}


def test_a_job_that_ends_while_profiling_is_simply_done(tmp_path: Path, job_scratch: Path) -> None:
    service = make_service(tmp_path, limit_s=30.0)
    job = service.submit(JobRequest(["true"], gpus=1))
    run_until(service, job, "succeeded")
    assert not any(r.startswith("profiled:") for _, _, r in transitions(service, job))


def test_a_restart_mid_profile_still_ends_the_profile_on_time(
    tmp_path: Path, job_scratch: Path
) -> None:
    service = make_service(tmp_path, limit_s=1.5)
    out = job_scratch / "ran"
    job = service.submit(JobRequest(["sh", "-c", JOB.format(out=out, seconds=4)], gpus=1))
    run_until(service, job, "running")
    while not out.exists():
        service.reconcile()
        time.sleep(0.05)
    service.engine.dispose()
    again = make_service(tmp_path, limit_s=1.5)  # the process keeps running meanwhile
    run_until(again, job, "succeeded")
    runs = out.read_text().split()
    assert runs[0] == "2" and len(runs) == 2 and runs[1] in ("0", "1")
    assert any(r.startswith("profiled:") for _, _, r in transitions(again, job))


@pytest.mark.parametrize(
    ("util", "score"), [(0.0, 0), (30.0, 0), (30.5, 1), (70.0, 1), (70.1, 2), (100.0, 2)]
)
def test_the_stated_rule_by_hand(util: float, score: int) -> None:
    assert rule_score(util)[0] == score


def test_the_estimate_is_raised_to_the_median_of_jobs_that_outlived_the_profile() -> None:
    run = MeasuredRun(samples=3, gpu_util=20.0, mem_util=5.0, mem_mib=2048.0, ran_s=300.0)
    report = profile_report(run, estimate=100.0, past_durations=[50, 200, 400, 1000, 4000])
    assert isinstance(report, ProfileReport)
    assert report.estimate == 1000.0  # median of 400, 1000, 4000
    assert report.sharing_score == 0 and report.gpu_memory_gb == 2.0
    kept = profile_report(run, estimate=5000.0, past_durations=[400, 1000])
    assert kept.estimate == 5000.0, "a longer own estimate is kept"
    blind = profile_report(MeasuredRun(0, 0.0, 0.0, 0.0, 300.0), estimate=None, past_durations=[])
    assert blind.sharing_score is None, "without samples a job is never packed"
