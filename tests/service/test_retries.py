"""A job whose launch fails or whose process vanishes is retried with a backoff, not forever.

The service is driven by hand over an in-memory backend with a fake clock: each
pass is one ``reconcile()`` at a chosen time, so "never before its time" is exact.
The backoff is 10 s before the first retry, 20 s before the second; after the
job's ``max_retries`` it ends ``failed`` with every attempt in its reason.
Preemptions requeue without limit and never count.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from ilucid.backends.base import ProcessState
from ilucid.core import Cluster, Node
from ilucid.service.api import build_app
from ilucid.service.auth import create_token
from ilucid.service.db import JobRow, make_engine, migrate
from ilucid.service.job_store import JobRequest
from ilucid.service.scheduler_service import SchedulerService

sys.path.insert(0, str(Path(__file__).resolve().parent))
from memory_backend import MemoryBackend

T0 = 1_700_000_000.0


class Site:
    def __init__(self, root: Path, policy: str = "fifo", max_retries: int = 3) -> None:
        url = f"sqlite:///{root / 'ilucid.db'}"
        migrate(url)
        self.engine = make_engine(url)
        self.backend = MemoryBackend(Cluster((Node("a", 2),)))
        self.now = T0
        self.policy = policy
        self.max_retries = max_retries
        self.service = self.restart()

    def restart(self) -> SchedulerService:
        """A new service on the same database and backend, as after a crash."""
        self.service = SchedulerService(
            self.engine,
            self.backend,
            policy=self.policy,
            clock=lambda: self.now,
            max_retries=self.max_retries,
        )
        return self.service

    def at(self, moment: float) -> None:
        """One pass at ``moment``."""
        self.now = moment
        self.service.reconcile()

    def row(self, job_id: str) -> JobRow:
        with Session(self.engine, expire_on_commit=False) as session:
            row = session.get(JobRow, job_id)
            assert row is not None
            return row

    def runs(self, job_id: str) -> bool:
        seen = self.backend.jobs.get(job_id)
        return seen is not None and seen.state is ProcessState.RUNNING

    def queued(self) -> dict[str, tuple[int | None, float | None]]:
        return {
            job: (position, start.median if start else None)
            for job, position, start in self.service.queue()
        }


@pytest.fixture
def site(tmp_path: Path) -> Site:
    return Site(tmp_path)


def hms(moment: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(moment))


def test_a_vanished_job_is_retried_after_10_then_20_s_then_fails_with_every_attempt(
    site: Site,
) -> None:
    job = site.service.submit(JobRequest(["train"], gpus=1, max_retries=2))
    site.at(T0)
    assert site.runs(job) and site.row(job).state == "running"

    site.backend.vanish(job)
    site.at(T0 + 1)  # attempt 1 vanished: retry 1 of 2 in 10 s
    row = site.row(job)
    assert (row.state, row.attempts, row.retry_at) == ("pending", 1, T0 + 11)
    assert job not in site.service.scheduler.jobs  # out of the core's queue meanwhile
    why = site.service.explain(job)
    assert f"retry 1 of 2 at {hms(T0 + 11)}" in why
    assert "after: vanished: its process vanished without an exit" in why
    assert site.queued()[job] == (None, T0 + 11)  # the queue says so too
    for moment in (T0 + 2, T0 + 10.9):
        site.at(moment)
        assert not site.runs(job), f"retried before its time, at +{moment - T0} s"
    assert site.backend.starts == [job]

    site.at(T0 + 11)  # its retry is due: queued and started in the same pass
    assert site.runs(job) and site.row(job).state == "running"
    assert site.row(job).retry_at is None

    site.backend.vanish(job)
    site.at(T0 + 12)  # attempt 2 vanished: retry 2 of 2 in 20 s
    row = site.row(job)
    assert (row.state, row.attempts, row.retry_at) == ("pending", 2, T0 + 32)
    assert f"retry 2 of 2 at {hms(T0 + 32)}" in site.service.explain(job)
    site.at(T0 + 31.9)
    assert not site.runs(job)
    site.at(T0 + 32)
    assert site.runs(job)

    site.backend.vanish(job)
    site.at(T0 + 33)  # attempt 3 vanished: no retry left
    row = site.row(job)
    assert (row.state, row.attempts, row.end_time) == ("failed", 2, T0 + 33)
    assert site.backend.starts == [job] * 3
    last = site.service.story(job)[-1]
    assert (last.to_state, last.stimulus) == ("failed", "observed: vanished")
    assert last.reason == (
        f"failed after 2 retries: attempt 1 at {hms(T0 + 1)} vanished: its process vanished"
        f" without an exit; attempt 2 at {hms(T0 + 12)} vanished: its process vanished without"
        f" an exit; attempt 3 at {hms(T0 + 33)} vanished: its process vanished without an exit"
    )
    assert job not in site.service.scheduler.jobs and job not in site.queued()
    site.at(T0 + 100)
    assert site.backend.starts == [job] * 3  # never again

    # explain lists every attempt with its cause
    client = TestClient(build_app(site.service))
    token = create_token(site.engine, "root", "ops", admin=True)
    shown = client.get(f"/jobs/{job}/explain", headers={"Authorization": f"Bearer {token}"})
    retries = shown.json()["retries"]
    assert (retries["attempts"], retries["max_retries"], retries["retry_at"]) == (2, 2, None)
    assert [a["time"] for a in retries["failed"]] == [T0 + 1, T0 + 12, T0 + 33]
    assert {a["cause"] for a in retries["failed"]} == {
        "vanished: its process vanished without an exit"
    }


def test_a_launch_failure_is_retried_with_the_same_backoff_instead_of_failing_at_once(
    site: Site,
) -> None:
    site.backend.refuse = "[Errno 2] No such file or directory: '/gone'"
    job = site.service.submit(JobRequest(["train"], gpus=1, max_retries=2))
    site.at(T0)  # decided and launched in one pass: the launch fails
    row = site.row(job)
    assert (row.state, row.gpu_indices, row.attempts, row.retry_at) == ("pending", "", 1, T0 + 10)
    move = site.service.story(job)[-1]
    assert (move.from_state, move.to_state, move.stimulus) == (
        "running",
        "pending",
        "backend: launch failed",
    )
    assert move.reason.startswith("could not be launched: [Errno 2]")
    assert job not in site.service.scheduler.jobs
    assert "after: could not be launched: [Errno 2]" in site.service.explain(job)
    site.at(T0 + 9.9)
    assert site.backend.starts == [job]
    site.at(T0 + 10)  # retry 1: fails again, retry 2 in 20 s
    assert site.backend.starts == [job] * 2
    assert (site.row(job).attempts, site.row(job).retry_at) == (2, T0 + 30)
    site.at(T0 + 29.9)
    assert site.backend.starts == [job] * 2
    site.at(T0 + 30)  # retry 2 fails: no retry left
    row = site.row(job)
    assert (row.state, row.end_time) == ("failed", T0 + 30)
    reason = site.service.story(job)[-1].reason
    assert reason.startswith(f"failed after 2 retries: attempt 1 at {hms(T0)} could not be")
    assert reason.count("could not be launched: [Errno 2]") == 3
    assert f"attempt 3 at {hms(T0 + 30)}" in reason
    site.at(T0 + 200)
    assert site.backend.starts == [job] * 3


def test_a_job_whose_launch_failed_once_runs_on_its_retry(site: Site) -> None:
    site.backend.refuse = "the node's runtime is not ready"
    job = site.service.submit(JobRequest(["train"], gpus=2))
    other = site.service.submit(JobRequest(["train"], gpus=2))
    site.at(T0)
    assert site.row(job).state == "pending"
    site.backend.refuse = None
    site.at(T0 + 1)  # its GPUs were freed: the job behind it may use them meanwhile
    assert site.runs(other) and not site.runs(job)
    site.backend.end(other, 0)
    site.at(T0 + 10)
    assert site.runs(job) and site.row(job).attempts == 1


def test_preemptions_requeue_without_limit_and_are_not_attempts(tmp_path: Path) -> None:
    site = Site(tmp_path, policy="tiered")
    train = site.service.submit(JobRequest(["train"], gpus=2, max_retries=0))
    site.at(T0)
    assert site.runs(train)
    moment = T0
    for round_ in range(1, 4):  # three preemptions of a job that allows no retry
        serve = site.service.submit(JobRequest(["serve"], gpus=1, job_class="inference"))
        site.at(moment := moment + 1)  # the inference job preempts the training job
        assert site.backend.jobs[train].state is ProcessState.STOPPING
        site.backend.end(train, -15)
        site.at(moment := moment + 1)
        assert site.runs(serve) and site.row(train).state == "pending"
        site.backend.end(serve, 0)
        site.at(moment := moment + 1)  # back at once: no backoff
        row = site.row(train)
        assert site.runs(train) and row.state == "running", round_
        assert (row.preemptions, row.attempts, row.retry_at) == (round_, 0, None)
    # a vanish is a failed attempt: with no retry allowed, it fails
    site.backend.vanish(train)
    site.at(moment + 1)
    assert site.row(train).state == "failed"
    assert site.service.story(train)[-1].reason == "its process vanished without an exit"


def test_a_job_in_backoff_stays_out_of_the_queue_across_a_restart(site: Site) -> None:
    job = site.service.submit(JobRequest(["train"], gpus=1))
    site.at(T0)
    site.backend.vanish(job)
    site.at(T0 + 1)  # retry 1 at T0 + 11
    site.now = T0 + 5
    service = site.restart()
    assert job not in service.scheduler.jobs
    assert f"retry 1 of 3 at {hms(T0 + 11)}" in service.explain(job)
    assert site.queued()[job] == (None, T0 + 11)
    site.at(T0 + 6)
    site.at(T0 + 10.9)
    assert not site.runs(job) and site.backend.starts == [job]
    site.at(T0 + 11)
    assert site.runs(job) and site.row(job).attempts == 1
    # a restart after its time has come queues it at once
    site.backend.vanish(job)
    site.at(T0 + 12)  # retry 2 at T0 + 32
    site.now = T0 + 40
    service = site.restart()
    assert job in service.scheduler.jobs and site.row(job).retry_at is None
    site.at(T0 + 40)
    assert site.runs(job)


def test_the_services_default_applies_when_the_job_gives_none(tmp_path: Path) -> None:
    site = Site(tmp_path, max_retries=1)
    job = site.service.submit(JobRequest(["train"], gpus=1))
    own = site.service.submit(JobRequest(["train"], gpus=1, max_retries=0))
    site.at(T0)
    site.backend.vanish(job)
    site.backend.vanish(own)
    site.at(T0 + 1)
    assert site.row(own).state == "failed"  # the job's own limit wins
    assert (site.row(job).state, site.row(job).retry_at) == ("pending", T0 + 11)
    assert "retry 1 of 1" in site.service.explain(job)
    site.at(T0 + 11)
    site.backend.vanish(job)
    site.at(T0 + 12)
    assert site.row(job).state == "failed"
    assert site.service.story(job)[-1].reason.startswith("failed after 1 retry: attempt 1 at")


def test_a_cancelled_job_in_backoff_is_not_retried(site: Site) -> None:
    job = site.service.submit(JobRequest(["train"], gpus=1))
    site.at(T0)
    site.backend.vanish(job)
    site.at(T0 + 1)
    assert site.service.cancel(job) == "cancelled"
    assert job not in site.queued()
    site.at(T0 + 11)
    assert site.backend.starts == [job] and site.row(job).state == "cancelled"


def test_max_retries_is_taken_from_the_submission_and_checked(site: Site) -> None:
    client = TestClient(build_app(site.service))
    token = create_token(site.engine, "alice", "vision")
    headers = {"Authorization": f"Bearer {token}"}
    made = client.post("/jobs", json={"command": ["t"], "max_retries": 5}, headers=headers)
    assert made.status_code == 201, made.text
    job = made.json()["id"]
    assert site.row(job).max_retries == 5
    shown = client.get(f"/jobs/{job}", headers=headers).json()
    assert (shown["max_retries"], shown["attempts"], shown["retry_at"]) == (5, 0, None)
    for wrong in (-1, 101, 1.5):
        refused = client.post(
            "/jobs", json={"command": ["t"], "max_retries": wrong}, headers=headers
        )
        assert refused.status_code == 422, wrong
