"""A service driven by hand for the estimate tests: the default profile over an in-memory
backend with a fake clock (each pass is one ``reconcile()`` at a chosen time), and API
clients for the users who submit."""

from __future__ import annotations

import sys
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from ilucid.backends.base import ProcessState
from ilucid.core import Cluster, Node
from ilucid.service.api import build_app
from ilucid.service.auth import create_token
from ilucid.service.db import JobRow, TransitionRow, make_engine, migrate
from ilucid.service.live_policies import live_policy_factory
from ilucid.service.scheduler_service import SchedulerService

sys.path.insert(0, str(Path(__file__).resolve().parent))
from memory_backend import MemoryBackend

T0 = 1_700_000_000.0


class Site:
    """One 4-GPU node, the default profile, API clients for Bob and Alice."""

    def __init__(self, root: Path) -> None:
        url = f"sqlite:///{root / 'ilucid.db'}"
        migrate(url)
        self.engine = make_engine(url)
        self.backend = MemoryBackend(Cluster((Node("a", 4),)))
        self.now = T0
        self.service = self.restart()
        self.headers = {
            user: {"Authorization": f"Bearer {create_token(self.engine, user, 'lab')}"}
            for user in ("bob", "alice")
        }

    def restart(self) -> SchedulerService:
        """A new service on the same database and backend, as after a crash."""
        self.service = SchedulerService(
            self.engine,
            self.backend,
            policy="ilucid",  # ilucid serve's default
            clock=lambda: self.now,
            policy_factory=live_policy_factory(profiling=False),
        )
        self.client = TestClient(build_app(self.service))
        return self.service

    def submit(self, user: str, body: dict[str, object]) -> str:
        answer = self.client.post("/jobs", json=body, headers=self.headers[user])
        assert answer.status_code == 201, answer.text
        return str(answer.json()["id"])

    def at(self, moment: float) -> None:
        self.now = moment
        self.service.reconcile()

    def running(self) -> set[str]:
        return {j for j, seen in self.backend.jobs.items() if seen.state is ProcessState.RUNNING}

    def stopping(self) -> set[str]:
        return {j for j, seen in self.backend.jobs.items() if seen.state is ProcessState.STOPPING}

    def exit_stopped(self) -> None:
        """Every process asked to stop exits (as ``sleep`` does on SIGTERM)."""
        for job in self.stopping():
            self.backend.end(job, -15)

    def row(self, job: str) -> JobRow:
        with Session(self.engine, expire_on_commit=False) as session:
            row = session.get(JobRow, job)
            assert row is not None
            return row

    def preempted(self, job: str) -> int:
        """Stored preemptions of ``job``: its moves from running back to pending."""
        with Session(self.engine) as session:
            moves = session.scalars(
                select(TransitionRow).where(
                    TransitionRow.job_id == job, TransitionRow.to_state == "pending"
                )
            ).all()
        return sum(1 for move in moves if move.from_state == "running")
