"""Where a job's own progress reports arrive: stored, measured, and told to the core.

Each observation carries the reports the backend read (``ObservedJob.progress``,
read at most every 10 s a job). A report whose step did not change costs nothing
here (a dictionary look-up); a new step updates the job's row (its last report
and its rate), adds a row to its history (thinned to about :data:`MAX_HISTORY`
rows) and is handed to the core (``Scheduler.progress``), which turns it into
the job's remaining-time estimate. The stored rate is the core's (steps per second
of the job's run, per GPU type, measured anew after lost work), so the API, the
CLI and ``explain`` agree on it; None while the core has not measured one.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from ilucid.backends.base import ObservedJob, ProcessState
from ilucid.core import Cluster, Scheduler
from ilucid.service.db import JobRow, ProgressRow
from ilucid.service.job_store import RUNNING, rows_by_id

__all__ = ["MAX_HISTORY", "ProgressKeeper"]

#: a job's history rows beyond this are thinned (every other older row goes)
MAX_HISTORY = 200


class ProgressKeeper:
    def __init__(self) -> None:
        #: each running job's last stored (step, total): unchanged reports skip the database
        self._last: dict[str, tuple[float, float]] = {}
        self._rows: dict[str, int] = {}  # history rows each job has, once counted

    def observed(
        self,
        session: Session,
        jobs: Mapping[str, ObservedJob],
        now: float,
        scheduler: Scheduler,
        cluster: Cluster,
    ) -> None:
        """Store the reports whose step changed since the last stored one (a look at the
        jobs that reported, not at every job)."""
        for table in (self._last, self._rows):
            for job_id in [j for j in table if not _running(jobs.get(j))]:
                del table[job_id]  # ended or stopped: a new run measures anew
        changed: dict[str, tuple[float, float]] = {}
        for job_id, seen in jobs.items():
            report = seen.progress
            if report is None or seen.state is not ProcessState.RUNNING:
                continue
            if self._last.get(job_id) != report:
                changed[job_id] = report
        if not changed:
            return
        rows = rows_by_id(session, sorted(changed))
        for job_id, (step, total) in sorted(changed.items()):
            row = rows.get(job_id)
            self._last[job_id] = (step, total)
            if row is None or row.state != RUNNING:
                continue
            if row.progress_step == step and row.progress_total == total:
                continue  # stored before a restart of the service
            scheduler.progress(job_id, now, step, total)
            self._store(session, row, step, total, now, _gpu_type(scheduler, cluster, job_id))
            row.progress_rate = _rate(scheduler, job_id)

    def _store(
        self,
        session: Session,
        row: JobRow,
        step: float,
        total: float,
        now: float,
        gpu_type: str | None,
    ) -> None:
        row.progress_step, row.progress_total, row.progress_at = step, total, now
        count = self._rows.get(row.id)
        if count is None:
            count = session.scalar(
                select(func.count()).select_from(ProgressRow).where(ProgressRow.job_id == row.id)
            )
            count = int(count or 0)
        session.add(ProgressRow(job_id=row.id, at=now, step=step, total=total, gpu_type=gpu_type))
        count += 1
        if count > MAX_HISTORY:
            count -= self._thin(session, row.id)
        self._rows[row.id] = count

    @staticmethod
    def _thin(session: Session, job_id: str) -> int:
        """Every other row between the first and the newest goes; how many went."""
        ids = session.scalars(
            select(ProgressRow.id).where(ProgressRow.job_id == job_id).order_by(ProgressRow.id)
        ).all()
        gone = list(ids[1:-1:2])
        session.execute(delete(ProgressRow).where(ProgressRow.id.in_(gone)))
        return len(gone)

    def rebuilt(self) -> None:
        """The core was rebuilt: the next report of each running job is stored and told
        to it afresh. The last stored report is not replayed: the job ran on while the
        service was down, and a rebuilt core counts its run from now, so that report
        and the next would measure a rate of all the steps made meanwhile over seconds."""
        self._last.clear()


def _running(seen: ObservedJob | None) -> bool:
    return seen is not None and seen.state is ProcessState.RUNNING


def _rate(scheduler: Scheduler, job_id: str) -> float | None:
    """The core's measured steps per second for the job on the type it runs on."""
    seen = scheduler.progress_book.jobs.get(job_id)
    return None if seen is None else seen.rate()


def _gpu_type(scheduler: Scheduler, cluster: Cluster, job_id: str) -> str | None:
    """The GPU type the core placed the job on (its first node's), if it did."""
    state = scheduler.jobs.get(job_id)
    if state is None or state.placement is None or not state.placement.parts:
        return None
    return cluster.nodes[state.placement.parts[0][0]].gpu_type
