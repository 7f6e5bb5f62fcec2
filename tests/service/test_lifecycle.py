"""The live job lifecycle: hidden phases named, legal moves only, a readable story."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from ilucid.backends.local import GpuInventory, LocalBackend
from ilucid.service.db import JobRow, TransitionRow, make_engine, migrate
from ilucid.service.lifecycle import (
    LEGAL,
    IllegalTransition,
    Phase,
    check_move,
    is_foreign,
    phase_of,
)
from ilucid.service.scheduler_service import JobRequest, SchedulerService


def test_hidden_phases_are_named() -> None:
    assert phase_of("running", "") is Phase.DECIDED  # start committed, not launched
    assert phase_of("running", "0,1") is Phase.RUNNING
    assert phase_of("running", "-") is Phase.RUNNING  # launched, holds no GPU
    assert phase_of("running", "0", stopping="cancelled") is Phase.STOPPING_CANCEL
    assert phase_of("pending", "", stopping="preempted") is Phase.STOPPING_PREEMPT
    assert phase_of("running", "0", stopping="profiled") is Phase.STOPPING_PROFILED
    assert phase_of("succeeded", "0") is Phase.SUCCEEDED
    assert is_foreign("backend-job:1234") and not is_foreign("/home/a") and not is_foreign(None)


@pytest.mark.parametrize(
    ("current", "to"),
    [
        (Phase.NEW, "pending"),
        (Phase.PENDING, "running"),
        (Phase.DECIDED, "running"),  # the launch
        (Phase.DECIDED, "failed"),  # could not be launched
        (Phase.RUNNING, "pending"),  # preempted, vanished, profiled
        (Phase.RUNNING, "succeeded"),
        (Phase.STOPPING_CANCEL, "cancelled"),
    ],
)
def test_legal_moves_pass(current: Phase, to: str) -> None:
    check_move("j1", current, to)


@pytest.mark.parametrize(
    ("current", "to"),
    [
        (Phase.NEW, "running"),  # nothing starts unstored
        (Phase.PENDING, "succeeded"),  # nothing ends that never ran
        (Phase.SUCCEEDED, "running"),  # an ended job never runs again
        (Phase.CANCELLED, "pending"),
        (Phase.STOPPING_PREEMPT, "succeeded"),
    ],
)
def test_illegal_moves_raise(current: Phase, to: str) -> None:
    with pytest.raises(IllegalTransition, match="is not a legal move"):
        check_move("j1", current, to)


def test_ended_phases_are_final_and_every_phase_has_a_row() -> None:
    assert set(LEGAL) == set(Phase)
    for end in (Phase.SUCCEEDED, Phase.FAILED, Phase.CANCELLED):
        assert not LEGAL[end]


def test_a_jobs_story_reads_decided_then_launched(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ilucid.db'}"
    migrate(url)
    engine = make_engine(url)
    service = SchedulerService(engine, LocalBackend(tmp_path, GpuInventory(1, "virtual", 0, "v")))
    job = service.submit(JobRequest(["sh", "-c", "exit 0"], gpus=1))
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        service.reconcile()
        with Session(engine) as session:
            row = session.get(JobRow, job)
            assert row is not None
            if row.state == "succeeded":
                break
        time.sleep(0.05)
    with Session(engine) as session:
        story = [
            (t.from_state, t.to_state)
            for t in session.scalars(
                select(TransitionRow).where(TransitionRow.job_id == job).order_by(TransitionRow.id)
            )
        ]
    assert story == [
        ("", "pending"),
        ("pending", "running"),  # decided: the start is committed before the launch
        ("decided", "running"),  # launched
        ("running", "succeeded"),
    ]
    engine.dispose()


def test_every_move_names_its_stimulus_and_the_story_reads_it(tmp_path: Path) -> None:
    """A cancelled pending job and a finished one: each stored move says what caused it
    (request, decision, backend, observation), and ``story`` replays them in order."""
    url = f"sqlite:///{tmp_path / 'ilucid.db'}"
    migrate(url)
    engine = make_engine(url)
    service = SchedulerService(engine, LocalBackend(tmp_path, GpuInventory(1, "virtual", 0, "v")))
    done = service.submit(JobRequest(["sh", "-c", "exit 3"], gpus=1))
    waiting = service.submit(JobRequest(["sleep", "60"], gpus=1))
    assert service.cancel(waiting) == "cancelled"  # still pending: cancelled at once
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        service.reconcile()
        with Session(engine) as session:
            row = session.get(JobRow, done)
            assert row is not None
            if row.state == "failed":
                break
        time.sleep(0.05)
    assert [(line.to_state, line.stimulus) for line in service.story(done)] == [
        ("pending", "request: submit"),
        ("running", "decision: start"),
        ("running", "backend: launched"),
        ("failed", "observed: exit"),
    ]
    last = service.story(done)[-1]
    assert last.sentence() == "running -> failed [observed: exit]: exited with code 3"
    assert [line.sentence() for line in service.story(waiting)] == [
        "new -> pending [request: submit]: submitted",
        "pending -> cancelled [request: cancel]: cancelled while pending",
    ]
    engine.dispose()
