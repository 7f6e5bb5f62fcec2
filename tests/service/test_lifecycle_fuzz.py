"""Random stimulus sequences through the live service never reach an illegal move.

A Hypothesis state machine drives a real ``SchedulerService`` (SQLite, the default
profile's live cadence via ``tiered``) over an in-memory backend: submissions of
training and inference jobs, passes, jobs ending by themselves or vanishing,
stops completing (or not yet), cancellations and restarts (a new service on the
same database and backend, as after a crash). Every stored transition goes
through ``JobStore.transition``, so an illegal one raises inside the service
and fails the test. After every step: each job's last transition leads to its
stored state and phase, no acknowledged cancel is contradicted (the job ends
``cancelled`` and is never launched after it), and no job is launched while a
process of it still runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from tempfile import mkdtemp

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from sqlalchemy import select
from sqlalchemy.orm import Session

from ilucid.backends.base import ProcessState
from ilucid.core import Cluster, Node
from ilucid.service.db import JobRow, TransitionRow, make_engine, migrate
from ilucid.service.job_store import JobRequest, phase
from ilucid.service.lifecycle import LEGAL, Phase
from ilucid.service.scheduler_service import SchedulerService

sys.path.insert(0, str(Path(__file__).resolve().parent))
from memory_backend import MemoryBackend


class Lifecycle(RuleBasedStateMachine):
    policy = "tiered"

    def __init__(self) -> None:
        super().__init__()
        folder = Path(mkdtemp(prefix="ilucid-lifecycle-"))
        url = f"sqlite:///{folder / 'ilucid.db'}"
        migrate(url)
        self.engine = make_engine(url)
        self.backend = MemoryBackend(Cluster((Node("a", 2), Node("b", 2))))
        self.clock = 1_000.0
        #: job -> how many starts the backend had been asked for when its cancel was answered
        self.cancelled: dict[str, int] = {}
        self.service = self._service()

    def _service(self) -> SchedulerService:
        return SchedulerService(
            self.engine, self.backend, policy=self.policy, clock=lambda: self.clock
        )

    def _ids(self, *states: ProcessState) -> list[str]:
        return sorted(j for j, o in self.backend.jobs.items() if o.state in states)

    @rule(gpus=st.integers(0, 4), inference=st.booleans())
    def submit(self, gpus: int, inference: bool) -> None:
        job_class = "inference" if inference and gpus <= 2 else "training"
        self.service.submit(JobRequest(["train"], gpus=gpus, job_class=job_class))

    @rule(seconds=st.sampled_from([0.5, 5.0, 60.0]))
    def reconcile(self, seconds: float) -> None:
        self.clock += seconds
        self.service.reconcile()

    @rule(data=st.data(), code=st.sampled_from([0, 1, -9]))
    def a_process_ends(self, data: st.DataObject, code: int) -> None:
        running = self._ids(ProcessState.RUNNING, ProcessState.STOPPING)
        if running:
            self.backend.end(data.draw(st.sampled_from(running)), code)

    @rule(data=st.data())
    def a_process_vanishes(self, data: st.DataObject) -> None:
        running = self._ids(ProcessState.RUNNING)
        if running:
            del self.backend.jobs[data.draw(st.sampled_from(running))]

    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        with Session(self.engine) as session:
            ids = sorted(session.scalars(select(JobRow.id)).all())
        if ids:
            job = data.draw(st.sampled_from(ids))
            if self.service.cancel(job) in ("stopping", "cancelled"):
                self.cancelled.setdefault(job, len(self.backend.starts))

    @rule()
    def restart(self) -> None:
        self.service = self._service()  # a crash: the old one is simply dropped

    @invariant()
    def every_story_is_legal_and_leads_to_the_stored_state(self) -> None:
        with Session(self.engine) as session:
            last: dict[str, TransitionRow] = {}
            for move in session.scalars(select(TransitionRow).order_by(TransitionRow.id)):
                before, after = Phase(move.from_phase), Phase(move.to_phase)
                assert after in LEGAL[before], (move.job_id, before, after)
                last[move.job_id] = move
            for row in session.scalars(select(JobRow)):
                assert last[row.id].to_state == row.state, (row.id, last[row.id].to_state)
                assert Phase(last[row.id].to_phase) is phase(row), row.id

    @invariant()
    def no_acknowledged_cancel_is_contradicted(self) -> None:
        with Session(self.engine) as session:
            for job, starts_then in self.cancelled.items():
                row = session.get(JobRow, job)
                assert row is not None
                assert row.state in ("cancelled", "pending", "running"), (job, row.state)
                if row.state != "cancelled":
                    assert row.stopping == "cancelled", (job, row.state, row.stopping)
                assert job not in self.backend.starts[starts_then:], f"{job} launched after"

    @invariant()
    def no_job_runs_twice(self) -> None:
        assert not self.backend.repeated, f"started while running: {self.backend.repeated}"

    def teardown(self) -> None:
        self.engine.dispose()


class DefaultProfileLifecycle(Lifecycle):
    policy = "ilucid"  # preemptive, re-planning, with the inference tier


SETTINGS = settings(max_examples=100, stateful_step_count=50, deadline=None)
Lifecycle.TestCase.settings = SETTINGS
DefaultProfileLifecycle.TestCase.settings = SETTINGS
test_tiered_random_stimuli_reach_no_illegal_move = Lifecycle.TestCase
test_default_profile_random_stimuli_reach_no_illegal_move = DefaultProfileLifecycle.TestCase
