"""The live job lifecycle: hidden phases named, legal moves only, a readable story."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory
from ilucid.service.db import JobRow, TransitionRow, make_engine, migrate
from ilucid.service.job_store import JobRequest
from ilucid.service.lifecycle import (
    LEGAL,
    IllegalTransition,
    Phase,
    check_move,
    is_foreign,
    phase_of,
)
from ilucid.service.scheduler_service import SchedulerService


def test_hidden_phases_are_named() -> None:
    assert phase_of("running", "") is Phase.DECIDED  # start committed, not launched
    assert phase_of("running", "0,1") is Phase.RUNNING
    assert phase_of("running", "-") is Phase.RUNNING  # launched, holds no GPU
    assert phase_of("running", "0", stopping="cancelled") is Phase.STOPPING_CANCEL
    assert phase_of("pending", "", stopping="preempted") is Phase.STOPPING_PREEMPT
    assert phase_of("running", "0", stopping="profiled") is Phase.STOPPING_PROFILED
    assert phase_of("running", "", stopping="preempted") is Phase.STOPPING_RESTART
    assert phase_of("pending", "", stopping="cancelled") is Phase.STOPPING_CANCEL
    assert phase_of("succeeded", "0") is Phase.SUCCEEDED
    assert is_foreign("backend-job:1234") and not is_foreign("/home/a") and not is_foreign(None)


@pytest.mark.parametrize(
    ("current", "to"),
    [
        (Phase.NEW, Phase.PENDING),
        (Phase.PENDING, Phase.DECIDED),  # the start, committed before the launch
        (Phase.DECIDED, Phase.RUNNING),  # the launch
        (Phase.DECIDED, Phase.FAILED),  # could not be launched
        (Phase.RUNNING, Phase.PENDING),  # vanished, or gone at a restart
        (Phase.RUNNING, Phase.STOPPING_PREEMPT),
        (Phase.RUNNING, Phase.SUCCEEDED),
        (Phase.STOPPING_CANCEL, Phase.CANCELLED),
        (Phase.STOPPING_PREEMPT, Phase.STOPPING_RESTART),  # started while it stops
    ],
)
def test_legal_moves_pass(current: Phase, to: Phase) -> None:
    check_move("j1", current, to)


@pytest.mark.parametrize(
    ("current", "to"),
    [
        (Phase.NEW, Phase.RUNNING),  # nothing starts unstored
        (Phase.PENDING, Phase.SUCCEEDED),  # nothing ends that never ran
        (Phase.PENDING, Phase.RUNNING),  # nothing launches undecided
        (Phase.SUCCEEDED, Phase.RUNNING),  # an ended job never runs again
        (Phase.CANCELLED, Phase.PENDING),
        (Phase.STOPPING_PREEMPT, Phase.SUCCEEDED),
        (Phase.STOPPING_CANCEL, Phase.SUCCEEDED),  # an acknowledged cancel stands
        (Phase.STOPPING_CANCEL, Phase.PENDING),  # ... and is never requeued
    ],
)
def test_illegal_moves_raise(current: Phase, to: Phase) -> None:
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
    story = service.story(done)
    assert story[-1].sentence() == "running -> failed [observed: exit]: exited with code 3"
    # each stimulus has an id: the pass that decided the start also launched it
    ids = [line.stimulus_id for line in story]
    assert ids[0].startswith("submit-") and ids[3].startswith("observe-")
    assert ids[1] == ids[2] and ids[1].startswith("pass-")
    assert [line.to_phase for line in story] == ["pending", "decided", "running", "failed"]
    assert [line.sentence() for line in service.story(waiting)] == [
        "new -> pending [request: submit]: submitted",
        "pending -> cancelled [request: cancel]: cancelled while pending",
    ]
    engine.dispose()
