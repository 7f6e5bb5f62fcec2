"""Keeps a cluster manager's own queue in step with ilucid's (Slurm, Kubernetes).

Level-triggered, like the rest of the loop: on every pass, jobs submitted to the
manager directly that opted in to ilucid are accepted (``ClaimsForeignJobs``),
and pending jobs the manager's queue lacks are enqueued again (``QueuesJobs``).
A failure here loses nothing: the next pass tries again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from sqlalchemy import select
from sqlalchemy.orm import Session

from ilucid.backends.base import (
    BackendUnavailable,
    Capabilities,
    ForeignJob,
    Observation,
)
from ilucid.service.db import JobRow
from ilucid.service.job_store import JobStore
from ilucid.service.lifecycle import FOREIGN, Cause, Phase, Stimulus, is_foreign, new_stimulus_id

__all__ = ["BackendQueue"]

logger = logging.getLogger(__name__)


class BackendQueue:
    """``store`` stores an accepted foreign job; ``accepted`` tells the core of it."""

    def __init__(
        self,
        capabilities: Capabilities,
        backend_name: str,
        store: JobStore,
        accepted: Callable[[JobRow, float], object],
        clock: Callable[[], float],
    ) -> None:
        self.queues = capabilities.queues
        self.claims = capabilities.claims
        self.backend_name = backend_name
        self.store = store
        self.accepted = accepted
        self.clock = clock

    def enqueue(self, row: JobRow) -> None:
        """Backends with their own queue learn of the job at once."""
        if self.queues is None:
            return
        try:
            self.queues.enqueue(
                row.id,
                json.loads(row.command),
                row.gpus,
                row.cwd,
                row.job_class,
                cpus=row.cpus,
                memory_gb=row.memory_gb,
                run_as=row.run_as,
            )
        except (BackendUnavailable, ValueError) as exc:
            logger.warning(
                "ilucid serve: could not enqueue %s yet: %s", row.id, exc, extra={"job_id": row.id}
            )

    def sync(self, session: Session, seen: Observation, total_gpus: int) -> None:
        """Accept opted-in foreign jobs; enqueue pending jobs the backend lacks."""
        self._claim_foreign(session, total_gpus)
        if self.queues is None:
            return
        pending = session.scalars(select(JobRow).where(JobRow.state == Phase.PENDING.value)).all()
        for row in pending:
            if row.id not in seen.jobs and not is_foreign(row.cwd):
                self.enqueue(row)

    def _claim_foreign(self, session: Session, total_gpus: int) -> None:
        backend = self.claims
        if backend is None:
            return
        for foreign in backend.foreign_jobs():
            marker = f"{FOREIGN}{foreign.key}"  # a claimed job's cwd: never enqueued
            row = session.scalars(select(JobRow).where(JobRow.cwd == marker)).first()
            if row is None:  # recorded before the manager's copy is renamed: a crash
                row = self._accept(session, foreign, marker, total_gpus)  # between: again
            try:
                backend.claim(foreign, row.id)
            except BackendUnavailable as exc:
                logger.warning("ilucid serve: claiming %s: %s", foreign.key, exc)

    def _accept(
        self, session: Session, foreign: ForeignJob, marker: str, total_gpus: int
    ) -> JobRow:
        now = self.clock()
        name = self.backend_name
        gpus = min(foreign.gpus, total_gpus)
        # the same job model as a submission: its type and its gang's shape
        gang = foreign.nodes is not None and foreign.gpus_per_node is not None
        gang = gang and (foreign.nodes or 0) * (foreign.gpus_per_node or 0) == gpus
        row = JobRow(
            id=self.store.new_job_id(),
            user=foreign.user or "slurm",
            tenant=foreign.user or "slurm",
            job_class=foreign.job_class,
            gpus=gpus,
            gpu_type=foreign.gpu_type,
            nodes=foreign.nodes if gang else None,
            gpus_per_node=foreign.gpus_per_node if gang else None,
            cpus=foreign.cpus,  # what it asked its manager for: what the core books
            memory_gb=foreign.memory_gb,
            command=json.dumps([f"{name} job {foreign.key} ({foreign.name})"]),
            cwd=marker,
            estimate_s=foreign.estimate_s,
            submit_time=now,
            priority=0,
        )
        cause = Cause(Stimulus.CLAIM, new_stimulus_id("claim"))
        self.store.insert(
            session, row, cause, f"opted in from {name} job {foreign.key} ({foreign.name})"
        )
        session.commit()
        self.accepted(row, now)
        return row
