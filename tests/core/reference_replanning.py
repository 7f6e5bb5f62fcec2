"""Reference (naive, slow) re-planning policies used to check the fast ones in tests.

Preemptive policies that re-plan the whole running set: SRTF and Tiresias.

Both follow the Lucid artifact's semantics: order every active job (running
and pending), walk that order handing out the cluster's GPU quota (a job that
does not fit is skipped, not blocking), preempt every running job left out,
then place the chosen pending jobs; one that cannot be placed (fragmentation)
stays pending until the next pass.

The plan only changes when the order or the quota can change: at arrivals,
completions and (Tiresias) demotions. Between those the running set is
stable, which is why an event-driven pass reproduces a per-second loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ilucid.core.jobs import JobState, JobStatus
from ilucid.core.scheduler import PolicyBase, SchedulingPass

__all__ = ["ReplanningPolicy", "srtf", "tiresias"]

OrderKey = Callable[[JobState, float], tuple[float, ...]]


class ReplanningPolicy(PolicyBase):
    """Greedy quota re-planning over a dynamic order (see module docstring)."""

    def __init__(
        self,
        name: str,
        key: OrderKey,
        interval: float = 0.0,
        demotion_thresholds: tuple[float, ...] = (),
    ) -> None:
        self.name = name
        self._key = key
        self.interval = interval
        self.thresholds = demotion_thresholds
        self._active: dict[int, JobState] = {}
        self._dirty = False

    # -- stimuli -----------------------------------------------------------------
    def on_submitted(self, job: JobState, now: float) -> None:
        self._active[job.seq] = job
        self._dirty = True

    def on_started(self, job: JobState, now: float) -> None:
        pass

    def on_preempted(self, job: JobState, now: float) -> None:
        pass

    def on_finished(self, job: JobState, now: float) -> None:
        del self._active[job.seq]
        self._dirty = True

    # -- timing --------------------------------------------------------------------
    def _boundary(self, now: float) -> float:
        """The pass time at or after ``now`` (every ``interval`` s of absolute time)."""
        if self.interval <= 0:
            return now
        return math.ceil(now / self.interval) * self.interval

    def next_wakeup(self, now: float) -> float | None:
        # brute force, like the artifact's loop: a pass at every boundary while jobs are active
        if self._dirty:
            return self._boundary(now)
        if self.interval > 0 and self._active:
            boundary = self._boundary(now)
            return boundary + self.interval if boundary <= now else boundary
        return None

    def queue_position(self, job: JobState, now: float) -> int | None:
        key = self._key(job, now)
        return 1 + sum(
            1
            for other in self._active.values()
            if other.status is JobStatus.PENDING and self._key(other, now) < key
        )

    # -- decisions ---------------------------------------------------------------
    def schedule(self, step: SchedulingPass) -> None:
        now = step.now
        if self.interval > 0 and now != self._boundary(now):
            return
        self._dirty = False
        order = sorted(self._active.values(), key=lambda j: self._key(j, now))
        quota = step.free.cluster.total_gpus
        chosen: list[JobState] = []
        victims: list[JobState] = []
        for job in order:
            gpus = job.spec.num_gpus
            if gpus <= quota:
                quota -= gpus
                if job.status is JobStatus.PENDING:
                    chosen.append(job)
            elif job.status is JobStatus.RUNNING:
                victims.append(job)
        for job in victims:
            step.preempt(job, f"{self.name}: jobs ahead in its order need its GPUs")
        for job in chosen:
            step.try_start(job, f"{self.name}: within the GPU quota in its order")


def srtf() -> ReplanningPolicy:
    """Shortest remaining time first on the true remaining time (oracle, preemptive)."""

    def key(job: JobState, now: float) -> tuple[float, ...]:
        # ties: pending before running, as the artifact's stable sort does
        running = 1.0 if job.status is JobStatus.RUNNING else 0.0
        return (job.remaining_at(now), running, job.seq)

    return ReplanningPolicy("srtf", key)


def tiresias(
    thresholds: tuple[float, ...] = (18000.0,),
    interval: float = 60.0,
) -> ReplanningPolicy:
    """Discretised two-dimensional LAS: queue by attained GPU-seconds, FIFO inside a queue."""

    def key(job: JobState, now: float) -> tuple[float, ...]:
        attained = job.attained_at(now)
        level = sum(1 for t in thresholds if attained > t)
        running = 0.0 if job.status is JobStatus.RUNNING else 1.0
        return (float(level), job.spec.submit_time, running, job.seq)

    return ReplanningPolicy("tiresias", key, interval=interval, demotion_thresholds=thresholds)
