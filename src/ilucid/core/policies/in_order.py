"""The ``in-order`` plan: training in the order of one queue-order plugin, phase by phase.

Every pass ranks the pending jobs afresh (an order may read the clock: a
deadline, ``waited``): jobs a starvation guard calls due go first, then the
queue order's key, lowest first. For each job in that order the plan asks the
admission filters (the first refusal is the job's reason to wait), the
profiling plugin (a bounded first run?), then the placer; a job that does not
fit is skipped, so nothing blocks the line. It never preempts: only the
inference lane does. Every plugin that keeps state gets the event hooks.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ilucid.core.decision import Reason
from ilucid.core.framework import (
    AdmissionFilter,
    PluginBase,
    Profiling,
    QueueOrder,
    StarvationGuard,
)
from ilucid.core.free_gpus import MAIN_POOL
from ilucid.core.jobs import JobState, JobStatus
from ilucid.core.model import ProfileReport
from ilucid.core.policies.inference_tier import SERVING_POOL
from ilucid.core.policies.plan import PlanBase
from ilucid.core.scheduler import SchedulingPass

__all__ = ["InOrderPlan"]


class InOrderPlan(PlanBase):
    """See the module docstring."""

    def __init__(
        self,
        name: str,
        order: QueueOrder,
        admission: Sequence[AdmissionFilter] = (),
        guards: Sequence[StarvationGuard] = (),
        profiling: Profiling | None = None,
    ) -> None:
        self.name = name
        self.order = order
        self.admission = tuple(admission)
        self.guards = tuple(guards)
        self.profiling = profiling
        plugins: list[object] = [order, *self.admission, *self.guards]
        if profiling is not None:
            plugins.append(profiling)
        self._hooked = tuple(p for p in plugins if isinstance(p, PluginBase))
        self._why: dict[int, Reason] = {}
        self._pending: dict[int, JobState] = {}
        self._running: dict[int, JobState] = {}

    # -- stimuli -----------------------------------------------------------------
    def on_submitted(self, job: JobState, now: float) -> None:
        self._pending[job.seq] = job
        for plugin in self._hooked:
            plugin.on_submitted(job, now)

    def on_started(self, job: JobState, now: float) -> None:
        self._why.pop(job.seq, None)
        del self._pending[job.seq]
        self._running[job.seq] = job
        for plugin in self._hooked:
            plugin.on_started(job, now)

    def on_preempted(self, job: JobState, now: float) -> None:
        del self._running[job.seq]
        self._pending[job.seq] = job
        for plugin in self._hooked:
            plugin.on_preempted(job, now)

    def on_finished(self, job: JobState, now: float) -> None:
        del self._running[job.seq]
        for plugin in self._hooked:
            plugin.on_finished(job, now)

    def on_withdrawn(self, job: JobState, now: float) -> None:
        self._why.pop(job.seq, None)
        del self._pending[job.seq]
        for plugin in self._hooked:
            plugin.on_withdrawn(job, now)

    def on_profiled(self, job: JobState, report: ProfileReport, now: float) -> None:
        if self.profiling is None:
            super().on_profiled(job, report, now)
        for plugin in self._hooked:
            plugin.on_profiled(job, report, now)
        self.on_preempted(job, now)  # its profiling run is over: it queues again

    # -- a pass ------------------------------------------------------------------
    def _due(self, job: JobState, now: float) -> bool:
        for guard in self.guards:
            due = guard.due(job)
            if due is not None and due <= now:
                return True
        return False

    def _rank(self, job: JobState, now: float) -> tuple[int, float, int]:
        first = 0 if self.guards and self._due(job, now) else 1
        return (first, self.order.key(job, now), job.seq)

    def _ranked(self, now: float) -> list[JobState]:
        return sorted(self._pending.values(), key=lambda j: self._rank(j, now))

    def _refusal(self, job: JobState, now: float) -> Reason | None:
        for check in self.admission:
            refusal = check.refuse(job, now)
            if refusal is not None:
                return refusal
        return None

    def victims(self) -> Iterator[JobState]:
        return iter(list(self._running.values()))

    def schedule(self, step: SchedulingPass) -> None:
        now = step.now
        for job in self._ranked(now):
            if step.free.free_total == 0:
                break
            refusal = self._refusal(job, now)
            if refusal is not None:
                self._why[job.seq] = refusal
                continue
            self._why.pop(job.seq, None)
            limit = self.profiling.limit_s(job) if self.profiling is not None else None
            why = f"{self.name}: {self.order.describe(job, now)}"
            if not step.try_start(job, why, MAIN_POOL, limit):
                serving = f"{why} (on a node that also serves inference)"
                step.try_start(job, serving, SERVING_POOL, limit)

    # -- questions ---------------------------------------------------------------
    def pending_order(self) -> Iterator[JobState]:
        # ranked as of the newest submission: the order's clock-dependent fields move
        latest = max((j.since for j in self._pending.values()), default=0.0)
        yield from self._ranked(latest)

    def queue_position(self, job: JobState, now: float) -> int | None:
        if job.status is not JobStatus.PENDING:
            return None
        mine = self._rank(job, now)
        return 1 + sum(1 for other in self._pending.values() if self._rank(other, now) < mine)

    def _reason(self, job: JobState) -> Reason | None:
        return self._why.get(job.seq)

    def explain_wait(self, job: JobState, now: float) -> str | None:
        told = super().explain_wait(job, now)
        return told if told is not None else self.order.describe(job, now)
