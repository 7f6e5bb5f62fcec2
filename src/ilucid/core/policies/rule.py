"""A site's own profile: inference first, then training in the order of its own rule.

The rule is a :class:`~ilucid.core.framework.QueueOrder` plugin: an expression
from a profile file (:class:`RuleOrder`, see :mod:`ilucid.core.rules`) or a
Python function a site installs under an entry point (:class:`FunctionOrder`).
Its values can depend on the clock (``waited``), so every pass ranks the
pending training jobs afresh; jobs start in that order, and one that does not
fit is skipped (no head-of-line blocking). Nothing is preempted except by
inference, which goes first as in every profile (the training reserve holds).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from ilucid.core.decision import Reason
from ilucid.core.framework import QueueOrder
from ilucid.core.free_gpus import MAIN_POOL
from ilucid.core.jobs import JobState, JobStatus
from ilucid.core.model import JobClass
from ilucid.core.picklable import picklable
from ilucid.core.policies.inference_tier import SERVING_POOL, InferenceTier
from ilucid.core.rules import PriorityRule, job_fields
from ilucid.core.scheduler import PolicyBase, SchedulingPass

__all__ = ["FunctionOrder", "RuleOrder", "RulePolicy"]


@dataclass(frozen=True, slots=True)
class RuleOrder:
    """A queue order from a rule's expression."""

    rule: PriorityRule
    name: str = "rule"

    def key(self, job: JobState, now: float) -> float:
        return self.rule.value(job_fields(job, now))

    def describe(self, job: JobState, now: float) -> str:
        return self.rule.explain(job_fields(job, now))


@dataclass(frozen=True, slots=True)
class FunctionOrder:
    """A queue order from a site's own function of the job's fields (an entry point)."""

    function: Callable[[Mapping[str, float]], float]
    name: str

    def key(self, job: JobState, now: float) -> float:
        try:
            value = float(self.function(job_fields(job, now)))
        except (ArithmeticError, ValueError, TypeError):
            return math.inf
        return value if math.isfinite(value) else math.inf

    def describe(self, job: JobState, now: float) -> str:
        value = self.key(job, now)
        shown = "cannot be computed (inf)" if math.isinf(value) else f"{value:,.6g}"
        return f"priority {shown} by {self.name}; lowest first"


class RulePolicy(PolicyBase):
    """Inference first, then training ranked afresh by ``order`` every pass (module doc)."""

    def __init__(self, name: str, order: QueueOrder, reserve_training: float = 0.2) -> None:
        self.name = name
        self.order = order
        self._why: dict[int, Reason] = {}
        self.inference = InferenceTier(reserve_training, self._why)
        self._pending: dict[int, JobState] = {}  # training and best-effort
        self._running: dict[int, JobState] = {}

    # -- stimuli -----------------------------------------------------------------
    def on_submitted(self, job: JobState, now: float) -> None:
        if job.spec.job_class is JobClass.INFERENCE:
            self.inference.submitted(job)
        else:
            self._pending[job.seq] = job

    def on_started(self, job: JobState, now: float) -> None:
        self._why.pop(job.seq, None)
        if job.spec.job_class is JobClass.INFERENCE:
            self.inference.started(job)
            return
        del self._pending[job.seq]
        self._running[job.seq] = job

    def on_preempted(self, job: JobState, now: float) -> None:
        del self._running[job.seq]
        self._pending[job.seq] = job

    def on_finished(self, job: JobState, now: float) -> None:
        if job.spec.job_class is JobClass.INFERENCE:
            self.inference.finished(job)
        else:
            del self._running[job.seq]

    def on_withdrawn(self, job: JobState, now: float) -> None:
        self._why.pop(job.seq, None)
        if job.spec.job_class is JobClass.INFERENCE:
            self.inference.withdrawn(job)
        else:
            del self._pending[job.seq]

    # -- a pass ------------------------------------------------------------------
    def _ranked(self, now: float) -> list[JobState]:
        return sorted(self._pending.values(), key=lambda j: (self.order.key(j, now), j.seq))

    def schedule(self, step: SchedulingPass) -> None:
        if self.inference.pending:
            self.inference.admit(step, self._running.values)
        else:
            self.inference.settle(step)
        now = step.now
        for job in self._ranked(now):
            if step.free.free_total == 0:
                break
            why = f"{self.name}: {self.order.describe(job, now)}"
            if not step.try_start(job, why, MAIN_POOL):
                step.try_start(job, f"{why} (on a node that also serves inference)", SERVING_POOL)

    # -- questions ---------------------------------------------------------------
    def pending_order(self) -> Iterator[JobState]:
        yield from list(self.inference.pending)
        # ranked as of the newest submission: the order's clock-dependent fields move
        latest = max((j.since for j in self._pending.values()), default=0.0)
        yield from self._ranked(latest)

    def queue_position(self, job: JobState, now: float) -> int | None:
        if job.status is not JobStatus.PENDING:
            return None
        if job.spec.job_class is JobClass.INFERENCE:
            return 1 + self.inference.pending.index(job)
        mine = (self.order.key(job, now), job.seq)
        ahead = sum(
            1 for other in self._pending.values() if (self.order.key(other, now), other.seq) < mine
        )
        return 1 + len(self.inference.pending) + ahead

    def _reason(self, job: JobState) -> Reason | None:
        return self._why.get(job.seq)

    def explain_wait(self, job: JobState, now: float) -> str | None:
        told = super().explain_wait(job, now)
        if told is not None or job.spec.job_class is JobClass.INFERENCE:
            return told
        return self.order.describe(job, now)


picklable(RuleOrder, FunctionOrder)
