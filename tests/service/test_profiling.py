"""The live profiler: samples of running jobs through a metrics source, stored per job.

Machines without GPUs replay recorded samples through the same interface; the
NVML path runs for real only where a driver answers (skipped otherwise).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory, discover_gpus
from ilucid.backends.metrics import GpuSample, ReplayMetrics
from ilucid.service.db import make_engine, migrate
from ilucid.service.job_store import JobRequest
from ilucid.service.scheduler_service import SchedulerService


def service_with(tmp_path: Path, metrics: object) -> SchedulerService:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    migrate(url)
    backend = LocalBackend(tmp_path, GpuInventory(2, "virtual", 0, "virtual"))
    return SchedulerService(
        make_engine(url),
        backend,
        metrics=metrics,
        sample_every_s=0.0,  # type: ignore[arg-type]
    )


def test_recorded_samples_are_stored_and_summarised(tmp_path: Path) -> None:
    recorded = tmp_path / "samples.csv"
    recorded.write_text("gpu_util,mem_util,mem_mib\n90,40,5000\n70,20,6000\n")
    service = service_with(tmp_path, ReplayMetrics.from_csv(recorded))
    # it runs well past the four passes (with 1 s, CI's load ended it before pids read)
    job = service.submit(JobRequest(["sleep", "60"], gpus=1))
    for _ in range(4):
        service.reconcile()
        time.sleep(0.05)
    profile = service.profile(job)
    assert profile["samples"] >= 3
    assert 70 <= profile["gpu_util_mean"] <= 90
    assert profile["mem_mib_peak"] == 6000
    assert service.backend.pids(job)  # type: ignore[attr-defined]
    service.cancel(job)
    service.reconcile()


def test_a_failing_metrics_source_never_stops_scheduling(tmp_path: Path) -> None:
    class Broken:
        name = "broken"

        def sample(self, job_id: str, gpus: object, pids: object) -> GpuSample:
            raise RuntimeError("driver went away")

    service = service_with(tmp_path, Broken())
    job = service.submit(JobRequest(["true"], gpus=1))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and service.profile(job) == {"samples": 0}:
        service.reconcile()
        with service.lock:
            if job not in service.scheduler.jobs:
                break
        time.sleep(0.05)
    assert job not in service.scheduler.jobs  # it ran and finished regardless


def test_nvml_samples_a_real_gpu_when_there_is_one(tmp_path: Path) -> None:
    if discover_gpus().source != "nvml":
        pytest.skip("no NVIDIA driver here; the replay path above covers the logic")
    from ilucid.backends.metrics import NvmlMetrics

    sample = NvmlMetrics().sample("probe", [0], [])
    assert sample is not None and 0 <= sample.gpu_util <= 100 and sample.mem_mib >= 0
