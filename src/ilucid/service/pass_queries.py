"""The questions every reconcile pass asks the database, written so that each is
answered from an index, never by reading every job.

At 10,000 nodes the jobs table holds hundreds of thousands of rows; one question that
reads them all costs more than the rest of the pass. The plans are not obvious:
SQLite reads the whole table for ``stopping IS NOT NULL`` or for an ``ORDER BY id``,
and given ``stopping IS NULL`` beside a selective condition it walks that index (nearly
every job) instead. ``tests/service/test_pass_queries.py`` checks each plan.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, select

from ilucid.service.db import JobRow
from ilucid.service.lifecycle import STOP_REASONS, STORED_STATES

__all__ = [
    "PASS_QUERIES",
    "due_profiling_runs",
    "launched_job_ids",
    "stopping_job_ids",
    "stopping_jobs",
    "waiting_launches",
]

_RUNNING = STORED_STATES[1]


def stopping_jobs() -> Select[JobRow]:
    """Jobs the service is stopping (by the reasons' values: ``ix_jobs_stopping``)."""
    return select(JobRow).where(JobRow.stopping.in_(STOP_REASONS))


def stopping_job_ids() -> Select[str]:
    return select(JobRow.id).where(JobRow.stopping.in_(STOP_REASONS))


def launched_job_ids() -> Select[str]:
    """Launched running jobs not being stopped: from ``ix_jobs_launched`` alone."""
    return select(JobRow.id).where(
        JobRow.state == _RUNNING, JobRow.stopping.is_(None), JobRow.gpu_indices != ""
    )


def waiting_launches() -> Select[JobRow]:
    """Decided starts still waiting for their GPUs (``ix_jobs_launched``)."""
    return select(JobRow).where(
        JobRow.state == _RUNNING, JobRow.gpu_indices == "", JobRow.stopping.is_(None)
    )


def due_profiling_runs(now: float) -> Select[JobRow]:
    """Jobs whose profiling run is over, by the time alone (``ix_jobs_profile_until``):
    the caller keeps those running and not being stopped."""
    return select(JobRow).where(JobRow.profile_until <= now)


#: every per-pass question, by name, for the plan checks
PASS_QUERIES: dict[str, Select[Any]] = {
    "stopping jobs": stopping_jobs(),
    "stopping job ids": stopping_job_ids(),
    "launched job ids": launched_job_ids(),
    "waiting launches": waiting_launches(),
    "due profiling runs": due_profiling_runs(0.0),
}
