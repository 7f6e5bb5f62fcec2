"""After a restart the service accounts running jobs where the backend says they run;
when it cannot say (Slurm just after its controller restarted reports GPUs without
their type) or the books no longer fit, the restart neither crashes nor runs a job twice."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from sqlalchemy.orm import Session

from ilucid.backends.base import Observation, ObservedJob, ProcessState
from ilucid.core import Cluster, Node
from ilucid.service.db import JobRow, make_engine, migrate
from ilucid.service.scheduler_service import SchedulerService


class FixedBackend:
    """A backend whose cluster runs the given jobs, and that records starts."""

    name = "fixed"

    def __init__(self, jobs: dict[str, ObservedJob]) -> None:
        self.cluster = Cluster((Node("a", 4), Node("b", 4)))
        self.jobs = jobs
        self.started: list[str] = []

    def observe(self) -> Observation:
        return Observation(self.cluster, dict(self.jobs))

    def start(
        self,
        job_id: str,
        command: Sequence[str],
        gpus: int,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        placement: Sequence[tuple[str, int]] | None = None,
        run_as: str | None = None,
        cpus: float | None = None,
        memory_gb: float | None = None,
    ) -> tuple[int, ...] | None:
        self.started.append(job_id)
        return ()

    def stop(self, job_id: str) -> None:
        pass

    def logs(self, job_id: str, stream: str = "stdout", tail_bytes: int = 65536) -> str:
        return ""


def running_rows(tmp_path: Path, count: int) -> str:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    migrate(url)
    engine = make_engine(url)
    with Session(engine) as session:
        for k in range(count):
            session.add(
                JobRow(
                    id=f"j{k:06d}",
                    user="u",
                    tenant="t",
                    job_class="training",
                    gpus=2,
                    command=json.dumps(["true"]),
                    state="running",
                    submit_time=float(k),
                    first_start=float(k),
                    gpu_indices="-",
                    preemptions=0,
                    priority=0,
                )
            )
        session.commit()
    return url


def test_jobs_whose_place_is_unknown_are_accounted_where_they_fit(tmp_path: Path) -> None:
    url = running_rows(tmp_path, 4)
    jobs = {f"j{k:06d}": ObservedJob(f"j{k:06d}", ProcessState.RUNNING) for k in range(4)}
    service = SchedulerService(make_engine(url), FixedBackend(jobs), policy="fifo")
    assert service.scheduler.free.free_total == 0, "4 x 2 GPUs accounted on 2 x 4"
    assert all(service.scheduler.jobs[j].placement is not None for j in jobs)


def test_more_running_than_the_books_hold_neither_crashes_nor_runs_twice(
    tmp_path: Path,
) -> None:
    url = running_rows(tmp_path, 5)
    # the backend claims every job runs on node a: that cannot be (10 GPUs on 4)
    jobs = {
        f"j{k:06d}": ObservedJob(f"j{k:06d}", ProcessState.RUNNING, parts=(("a", 2),))
        for k in range(5)
    }
    backend = FixedBackend(jobs)
    service = SchedulerService(make_engine(url), backend, policy="fifo")
    service.reconcile()
    assert backend.started == [], "a running job is never started again"
    # the one left out of the books still has its end recorded
    left_out = next(j for j in jobs if j not in service.scheduler.jobs)
    backend.jobs[left_out] = ObservedJob(left_out, ProcessState.EXITED, exit_code=0)
    service.reconcile()
    with Session(service.engine) as session:
        row = session.get(JobRow, left_out)
        assert row is not None and row.state == "succeeded"
    assert backend.started == []
