"""The live profiler's measurements: samples of running jobs' GPU use, stored per
job, and what a job's samples add up to (its profiling run, its whole life)."""

from __future__ import annotations

import logging
from collections.abc import Container

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from ilucid.backends.base import ListsProcesses
from ilucid.backends.metrics import MetricsSource
from ilucid.service.db import JobRow, SampleRow, TransitionRow
from ilucid.service.lifecycle import NO_GPUS, Phase
from ilucid.service.live_profiler import MeasuredRun

__all__ = ["Sampler", "measured_run", "measured_summary"]

logger = logging.getLogger(__name__)


class Sampler:
    """Samples each running job at most every ``every_s`` seconds; a metrics source
    that fails is reported and skipped, never stops scheduling."""

    def __init__(self, metrics: MetricsSource, every_s: float = 10.0) -> None:
        self.metrics = metrics
        self.every_s = every_s
        self._last: dict[str, float] = {}  # job id -> time of its last sample

    def sample(
        self,
        session: Session,
        processes: ListsProcesses | None,
        now: float,
        skip: Container[str],
    ) -> None:
        """Add a ``SampleRow`` for each launched running job due (not those in ``skip``);
        ``processes`` names each job's processes where the backend can."""
        pids_of = processes.pids if processes is not None else None
        running = session.scalars(select(JobRow).where(JobRow.state == Phase.RUNNING.value)).all()
        for row in running:
            if row.gpu_indices in ("", NO_GPUS) or row.id in skip:
                continue
            if now - self._last.get(row.id, -1e18) < self.every_s:
                continue
            gpus = [int(g) for g in row.gpu_indices.split(",")]
            pids = pids_of(row.id) if pids_of is not None else []
            try:
                sample = self.metrics.sample(row.id, gpus, pids)
            except Exception as exc:  # a metrics hiccup never stops scheduling
                logger.warning(
                    "ilucid serve: sampling %s failed: %r", row.id, exc, extra={"job_id": row.id}
                )
                continue
            self._last[row.id] = now
            if sample is not None:
                session.add(
                    SampleRow(
                        job_id=row.id,
                        time=now,
                        gpu_util=sample.gpu_util,
                        mem_util=sample.mem_util,
                        mem_mib=sample.mem_mib,
                    )
                )


def measured_run(session: Session, row: JobRow, now: float) -> MeasuredRun:
    """What the samples since the job's latest start say about its run so far."""
    launched = max(
        (
            t.time
            for t in session.scalars(
                # a start or a launch; not a move within running (a stop asked)
                select(TransitionRow).where(
                    TransitionRow.job_id == row.id,
                    TransitionRow.to_state == Phase.RUNNING.value,
                    TransitionRow.from_state != Phase.RUNNING.value,
                )
            )
        ),
        default=now,
    )
    window = session.scalars(
        select(SampleRow).where(SampleRow.job_id == row.id, SampleRow.time >= launched - 1e-6)
    ).all()
    count = len(window)
    return MeasuredRun(
        samples=count,
        gpu_util=sum(s.gpu_util for s in window) / count if count else 0.0,
        mem_util=sum(s.mem_util for s in window) / count if count else 0.0,
        mem_mib=max((s.mem_mib for s in window), default=0.0),
        ran_s=max(0.0, now - launched),
    )


def measured_summary(engine: Engine, job_id: str) -> dict[str, float]:
    """What the live profiler measured for a job over its life: means and peak memory."""
    with Session(engine) as session:
        samples = session.scalars(select(SampleRow).where(SampleRow.job_id == job_id)).all()
    if not samples:
        return {"samples": 0}
    count = len(samples)
    return {
        "samples": count,
        "gpu_util_mean": sum(s.gpu_util for s in samples) / count,
        "mem_util_mean": sum(s.mem_util for s in samples) / count,
        "mem_mib_peak": max(s.mem_mib for s in samples),
    }
