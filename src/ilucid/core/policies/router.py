"""Inference routed once: every job and every hook goes to its lane by job class.

Real-time inference jobs go to the inference tier
(:mod:`ilucid.core.policies.inference_tier`), everything else to the profile's
training plan; no plan ever sees an inference job, and no plugin tests a job's
class itself. A pass runs the plan's preparation, then the inference lane (which
may preempt the plan's running jobs, within the training reserve), then the plan.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from mypy_extensions import mypyc_attr

from ilucid.core.decision import Reason
from ilucid.core.jobs import JobState, JobStatus
from ilucid.core.model import Forecast, JobClass, ProfileReport
from ilucid.core.policies.inference_tier import InferenceTier
from ilucid.core.policies.plan import PlanBase
from ilucid.core.reason_codes import ReasonCode
from ilucid.core.scheduler import PolicyBase, SchedulingPass

__all__ = ["InferenceRouter"]


# the tiered policy (interpreted: not hot in a replay of the default profile) subclasses it
@mypyc_attr(allow_interpreted_subclasses=True)
class InferenceRouter(PolicyBase):
    """Inference to ``tier``, the rest to ``plan`` (module docstring)."""

    def __init__(self, name: str, tier: InferenceTier, plan: PlanBase) -> None:
        self.name = name
        self.inference = tier
        self.training = plan
        plan.bind_inference(tier)

    # -- stimuli -----------------------------------------------------------------
    def on_submitted(self, job: JobState, now: float) -> None:
        if job.spec.job_class is JobClass.INFERENCE:
            self.inference.submitted(job)
        else:
            self.training.on_submitted(job, now)

    def on_started(self, job: JobState, now: float) -> None:
        if job.spec.job_class is JobClass.INFERENCE:
            self.inference.started(job)
        else:
            self.training.on_started(job, now)

    def on_adopted(self, job: JobState, now: float) -> None:
        if job.spec.job_class is JobClass.INFERENCE:
            self.inference.started(job)
        else:
            self.training.on_adopted(job, now)

    def on_preempted(self, job: JobState, now: float) -> None:
        if job.spec.job_class is JobClass.INFERENCE:  # never by decision: it vanished
            self.inference.requeued(job)
        else:
            self.training.on_preempted(job, now)

    def on_finished(self, job: JobState, now: float) -> None:
        if job.spec.job_class is JobClass.INFERENCE:
            self.inference.finished(job)
            self.training.inference_changed()
        else:
            self.training.on_finished(job, now)

    def on_withdrawn(self, job: JobState, now: float) -> None:
        if job.spec.job_class is JobClass.INFERENCE:
            self.inference.withdrawn(job)
        else:
            self.training.on_withdrawn(job, now)

    def on_profiled(self, job: JobState, report: ProfileReport, now: float) -> None:
        self.training.on_profiled(job, report, now)

    def on_forecast(self, forecast: Forecast, now: float) -> None:
        self.training.on_forecast(forecast, now)

    def on_estimate(self, job: JobState, seconds: float, trusted: bool, now: float) -> None:
        if job.spec.job_class is not JobClass.INFERENCE:
            self.training.on_estimate(job, seconds, trusted, now)

    # -- a pass ------------------------------------------------------------------
    def schedule(self, step: SchedulingPass) -> None:
        self.training.prepare(step)
        tier = self.inference
        if tier.pending:
            before = len(tier.pending)
            tier.admit(step, self.training.victims)
            if len(tier.pending) != before:
                self.training.inference_changed()
        else:
            tier.settle(step)
        self.training.schedule(step)

    def next_wakeup(self, now: float) -> float | None:
        return self.training.next_wakeup(now)

    # -- questions ---------------------------------------------------------------
    def pending_order(self) -> Iterator[JobState]:
        yield from list(self.inference.pending)
        order = self.training.pending_order()
        if order is not None:
            yield from order

    def queue_position(self, job: JobState, now: float) -> int | None:
        if job.status is not JobStatus.PENDING:
            return None
        if job.spec.job_class is JobClass.INFERENCE:
            return 1 + self.inference.pending.index(job)
        position = self.training.queue_position(job, now)
        return None if position is None else position + len(self.inference.pending)

    def _reason(self, job: JobState) -> Reason | None:
        if job.spec.job_class is JobClass.INFERENCE:
            return self.inference.why.get(job.seq)
        return None

    def wait_code(self, job: JobState) -> ReasonCode | None:
        if job.spec.job_class is JobClass.INFERENCE:
            return super().wait_code(job)
        return self.training.wait_code(job)

    def explain_wait(self, job: JobState, now: float) -> str | None:
        if job.spec.job_class is JobClass.INFERENCE:
            return super().explain_wait(job, now)
        return self.training.explain_wait(job, now)

    @property
    def tuner_log(self) -> Sequence[object]:
        return self.training.tuner_log
