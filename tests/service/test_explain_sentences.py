"""``explain`` on a live service (issue 19): the sentences a user reads, word for word.

A real service on a LocalBackend with 4 virtual GPUs and the live default profile;
the service's clock is the test's, so every time in a sentence is known.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory
from ilucid.core import Cluster, Placement
from ilucid.core.policies import DEFAULT_PROFILE
from ilucid.service.db import JobRow, make_engine, migrate
from ilucid.service.job_store import JobRequest, StoryLine
from ilucid.service.live_policies import live_policy_factory
from ilucid.service.running_sentence import describe_running, span
from ilucid.service.scheduler_service import SchedulerService

#: 2023-11-14 22:13:20 UTC
T0 = 1_700_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local time is UTC while the test runs (the sentences print the service's local time)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _service(tmp_path: Path, clock: Clock) -> SchedulerService:
    url = f"sqlite:///{tmp_path / 'ilucid.db'}"
    migrate(url)
    return SchedulerService(
        make_engine(url),
        LocalBackend(tmp_path, GpuInventory(4, "virtual", 0.0, "virtual")),
        policy=DEFAULT_PROFILE,
        clock=clock,
        policy_factory=live_policy_factory(profiling=False),
    )


def _launched(service: SchedulerService, *jobs: str) -> None:
    """Reconcile until every job in ``jobs`` runs on GPUs the backend named."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        service.reconcile()
        with Session(service.engine) as session:
            rows = [session.get(JobRow, j) for j in jobs]
        if all(r is not None and r.state == "running" and r.gpu_indices for r in rows):
            return
        time.sleep(0.05)
    raise AssertionError(f"{jobs} were not all launched within 15 s")


def _stop_all(service: SchedulerService, *jobs: str) -> None:
    for job in jobs:
        service.cancel(job)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        service.reconcile()
        with Session(service.engine) as session:
            rows = [session.get(JobRow, j) for j in jobs]
        if all(r is not None and r.state == "cancelled" for r in rows):
            break
        time.sleep(0.05)
    service.engine.dispose()


def test_a_running_job_says_where_since_when_and_why(tmp_path: Path, utc: None) -> None:
    clock = Clock()
    service = _service(tmp_path, clock)
    job = service.submit(JobRequest(["sleep", "60"], gpus=2, estimate_s=600.0))
    clock.now = T0 + 5
    _launched(service, job)
    clock.now = T0 + 125
    host = socket.gethostname() or "localhost"
    assert service.cluster.nodes[0].name == host
    # the user's 600 s counts 50% (no record yet) against the 3,600 s assumed without a
    # model: sqrt(600 x 3600) = 1,470 s (issue 30's estimates that cannot be gamed)
    assert service.explain(job) == (
        f"running on GPUs 0,1 of {host} since 22:13:25 (2 min); started because: ilucid:"
        " level 0 of 3 (attained 0 GPU-s < 1,800), estimated 1,470 s x 2 GPU(s) left;"
        " within the GPUs in its order; estimate 1,470 s: the user's 600 s counted 50%"
        " (no ended job with a stated estimate yet) against no model estimate (3,600 s"
        " assumed)"
    )
    _stop_all(service, job)


def test_a_job_waiting_behind_busy_gpus_hears_who_holds_them(tmp_path: Path, utc: None) -> None:
    # issue 19's case: 3 GPUs training, 1 inference (on the same node), a job waits
    clock = Clock()
    service = _service(tmp_path, clock)
    train = service.submit(JobRequest(["sleep", "60"], gpus=3, estimate_s=600.0))
    serve = service.submit(JobRequest(["sleep", "60"], gpus=1, job_class="inference"))
    clock.now = T0 + 5
    _launched(service, train, serve)
    waiting = service.submit(JobRequest(["sleep", "60"], gpus=2, estimate_s=6000.0))
    clock.now = T0 + 10
    service.reconcile()
    assert service.explain(waiting) == (
        "pending (position 1 in ilucid order): all 4 GPUs are busy (3 training, 1 inference)"
    )
    _stop_all(service, train, serve, waiting)


def _row(gpu_indices: str, profile_until: float | None = None) -> JobRow:
    return JobRow(id="j000003", gpu_indices=gpu_indices, profile_until=profile_until)


STARTED = [
    StoryLine(T0 - 10, "", "pending", "request: submit", "submitted"),
    StoryLine(T0, "pending", "running", "decision: start", "head of the fifo queue and fits"),
    StoryLine(T0 + 1, "decided", "running", "backend: launched", "launched on GPUs 0,1"),
]


def test_running_sentences_for_every_phase(utc: None) -> None:
    cluster = Cluster.homogeneous(2, 8)
    one = Placement(((1, 2),))
    now = T0 + 3600 + 65  # 23:14:25, the same day
    why = "; started because: head of the fifo queue and fits"
    assert describe_running(_row("0,1"), STARTED, one, cluster, None, now) == (
        "running on GPUs 0,1 of node1 since 22:13:20 (1 h 1 min)" + why
    )
    assert describe_running(_row(""), STARTED, one, cluster, None, now) == (
        "starting on 2 GPUs of node1: decided at 22:13:20, not launched yet" + why
    )
    gang = Placement(((0, 8), (1, 1)))
    assert describe_running(_row("0,1,2,3,4,5,6,7"), STARTED, gang, cluster, None, now) == (
        "running on 8 GPUs of node0 and 1 GPU of node1 since 22:13:20 (1 h 1 min)" + why
    )
    assert describe_running(_row("-"), STARTED, Placement(()), cluster, None, now) == (
        "running without GPUs since 22:13:20 (1 h 1 min)" + why
    )
    assert describe_running(
        _row("3"), STARTED, Placement(((0, 1),)), cluster, "cancelled", now
    ) == ("being stopped (cancelled); running on GPU 3 of node0 since 22:13:20 (1 h 1 min)" + why)
    profiling = _row("0,1", profile_until=T0 + 300)
    assert describe_running(profiling, STARTED, one, cluster, None, T0 + 30) == (
        "running on GPUs 0,1 of node1 since 22:13:20 (30 s); a profiling run until 22:18:20,"
        " then it waits in the queue again with what was measured" + why
    )
    # another day: the date is named
    assert describe_running(_row("0,1"), STARTED, one, cluster, None, T0 + 2 * 86400).startswith(
        "running on GPUs 0,1 of node1 since 2023-11-14 22:13:20 (2 d)"
    )


def test_spans_read_in_the_largest_sensible_units() -> None:
    assert [span(s) for s in (0, 59.9, 60, 125, 3600, 7500, 86400, 90000)] == [
        "0 s",
        "59 s",
        "1 min",
        "2 min 5 s",
        "1 h",
        "2 h 5 min",
        "1 d",
        "1 d 1 h",
    ]
