"""Random stimulus sequences through the live service never reach an illegal move.

A Hypothesis state machine drives a real ``SchedulerService`` (SQLite, the default
profile's live cadence via ``tiered``) over an in-memory backend: submissions of
training and inference jobs, passes, jobs ending by themselves or vanishing,
stops completing (or not yet), cancellations and restarts (a new service on the
same database and backend, as after a crash). Every stored transition goes
through ``lifecycle.check_move``, so an illegal one raises inside the service
and fails the test; after each step every stored state is a legal phase.
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
from ilucid.service.lifecycle import LEGAL, Phase, phase_of
from ilucid.service.scheduler_service import JobRequest, SchedulerService

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
        self.service = self._service()

    def _service(self) -> SchedulerService:
        return SchedulerService(
            self.engine, self.backend, policy="tiered", clock=lambda: self.clock
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
            self.service.cancel(data.draw(st.sampled_from(ids)))

    @rule()
    def restart(self) -> None:
        self.service = self._service()  # a crash: the old one is simply dropped

    @invariant()
    def every_story_is_legal(self) -> None:
        with Session(self.engine) as session:
            for row in session.scalars(select(JobRow)):
                phase_of(row.state, row.gpu_indices)  # a stored state is a known phase
            for move in session.scalars(select(TransitionRow)):
                current = Phase(move.from_state)
                assert Phase(move.to_state) in LEGAL[current], (move.from_state, move.to_state)

    def teardown(self) -> None:
        self.engine.dispose()


class DefaultProfileLifecycle(Lifecycle):
    policy = "ilucid"  # preemptive, re-planning, with the inference tier


SETTINGS = settings(max_examples=100, stateful_step_count=50, deadline=None)
Lifecycle.TestCase.settings = SETTINGS
DefaultProfileLifecycle.TestCase.settings = SETTINGS
test_tiered_random_stimuli_reach_no_illegal_move = Lifecycle.TestCase
test_default_profile_random_stimuli_reach_no_illegal_move = DefaultProfileLifecycle.TestCase
