"""Lucid's profiling runs on a live cluster: when a run's time is up it is stopped,
and once its process is gone its measurements go to the policy.

A profiling run is a short launch of a new job on the profiling pool. The core
sets its time limit (``Decision.limit_s``, stored as ``profile_until``); this
coordinator ends it, and the job waits for the main pool like any other.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from ilucid.core import Scheduler
from ilucid.estimators.packing import PackingAnalyzer
from ilucid.service.db import JobRow
from ilucid.service.job_store import RUNNING, SUCCEEDED, JobStore
from ilucid.service.lifecycle import NO_GPUS, Cause, Phase
from ilucid.service.live_profiler import profile_report
from ilucid.service.live_sampling import measured_run
from ilucid.service.pass_queries import due_profiling_runs

__all__ = ["ProfilingCoordinator"]


class ProfilingCoordinator:
    """Ends due profiling runs and reports what they measured (``packing``: the
    interference model that rates how well the job would pack, if one is loaded)."""

    def __init__(self, store: JobStore, packing: PackingAnalyzer | None) -> None:
        self.store = store
        self.packing = packing

    def due(self, session: Session, now: float, profiles: bool) -> list[JobRow]:
        """Jobs whose profiling run is over and must be stopped now. Under a policy that
        does not profile (it changed meanwhile) such a job simply runs on."""
        # by the time alone (its own index, ``ix_jobs_profile_until``): only jobs in a
        # profiling run have one, where the state's index would list every running job
        rows = session.scalars(due_profiling_runs(now)).all()
        due = []
        for row in rows:
            if row.state != RUNNING or row.stopping is not None:
                continue
            if row.gpu_indices in ("", NO_GPUS):
                continue
            if not profiles:
                self.store.end_profiling(row)
                continue
            due.append(row)
        return due

    def finish(
        self, session: Session, row: JobRow, scheduler: Scheduler, now: float, cause: Cause
    ) -> None:
        """Hand a stopped profiling run's measurements to the policy; the job requeues."""
        run = measured_run(session, row, now)
        past = [
            end - start
            for start, end in session.execute(
                select(JobRow.first_start, JobRow.end_time).where(JobRow.state == SUCCEEDED)
            )
            if start is not None and end is not None
        ]
        report = profile_report(run, row.estimate_s, past, self.packing)
        scheduler.profiled(row.id, now, report)
        self.store.transition(session, row, Phase.PENDING, cause, f"profiled: {report.note}")
