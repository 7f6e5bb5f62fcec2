"""Each job's own progress (step N of M) as its remaining-time estimate.

A training job that says "step 1,200 of 50,000" knows better than any model of
past jobs how long it has left: remaining = (total - step) / rate, the rate
measured in steps per second of the job's run, per GPU type (a job runs at
another pace on another type). While the measured span is short the rate is
uncertain, so the estimate is blended with the model's in proportion to how
long the rate has been measured (:data:`TRUSTED_AFTER_S`).

A report with fewer steps than the last (a preemption lost work since the last
checkpoint) or on another GPU type starts a new measured span.
"""

from __future__ import annotations

from dataclasses import dataclass

from ilucid.core.picklable import picklable

__all__ = ["TRUSTED_AFTER_S", "JobProgress", "ProgressBook", "ProgressEstimate"]

#: seconds of measured run after which the job's own rate is taken alone
TRUSTED_AFTER_S = 300.0


class JobProgress:
    """One job's reports: the last one, and the span its current rate is measured over."""

    __slots__ = (
        "first_ran",
        "first_step",
        "gpu_type",
        "measured_s",
        "ran",
        "rates",
        "reports",
        "step",
        "total",
    )

    def __init__(self, step: float, total: float, ran: float, gpu_type: str) -> None:
        self.step, self.total, self.ran, self.gpu_type = step, total, ran, gpu_type
        self.first_step, self.first_ran = step, ran
        self.rates: dict[str, float] = {}  # steps per run-second, per GPU type
        self.reports = 1
        self.measured_s = 0.0  # run seconds measured over, every span together

    def rate(self) -> float | None:
        """Steps per second on the type it runs on now, else the last type measured."""
        rate = self.rates.get(self.gpu_type)
        if rate is None and self.rates:
            rate = next(reversed(self.rates.values()))
        return rate


@dataclass(frozen=True, slots=True)
class ProgressEstimate:
    """What the progress says at its last report, and how much it counts."""

    left_s: float  # blended seconds of run left
    total_s: float  # run seconds at the report plus left_s: the job's whole estimate
    own_left_s: float  # what the job's own rate alone says is left
    weight: float  # 0..1: the share of the job's own rate in left_s
    step: float
    total: float
    rate: float  # steps per second
    gpu_type: str

    def words(self) -> str:
        """The sentence ``explain`` gives: "3,412 s left: 48,800 of 50,000 steps to go at
        14.3 steps/s on a100 (from the job's own progress)"."""
        said = (
            f"{self.left_s:,.0f} s left: {self.total - self.step:,.0f} of {self.total:,.0f}"
            f" steps to go at {self.rate:,.3g} steps/s on {self.gpu_type}"
        )
        if self.weight >= 1.0:
            return said + " (from the job's own progress)"
        return (
            said + f" (from the job's own progress, {self.weight:.0%} of it: its"
            f" {self.own_left_s:,.0f} s blended with the model's estimate while the rate"
            " is measured)"
        )


class ProgressBook:
    """Reports by job id, and the estimate each implies."""

    def __init__(self, trusted_after_s: float = TRUSTED_AFTER_S) -> None:
        self.trusted_after_s = trusted_after_s
        self.jobs: dict[str, JobProgress] = {}

    def report(
        self, job_id: str, step: float, total: float, ran_s: float, gpu_type: str
    ) -> JobProgress:
        """Record that ``job_id`` was at ``step`` of ``total`` after ``ran_s`` seconds of
        run on ``gpu_type``; refuses what no job can say (the edge checks it first)."""
        if not (0.0 <= step <= total and 0.0 < total < float("inf")):
            raise ValueError(f"job {job_id}: progress step {step} of {total} is not 0..total")
        seen = self.jobs.get(job_id)
        if seen is None:
            seen = self.jobs[job_id] = JobProgress(step, total, ran_s, gpu_type)
            return seen
        seen.reports += 1
        if step < seen.step or gpu_type != seen.gpu_type or ran_s < seen.ran:
            seen.first_step, seen.first_ran = step, ran_s  # a new span: lost work, new type
        else:
            seen.measured_s += ran_s - seen.ran
        seen.step, seen.total, seen.ran, seen.gpu_type = step, total, ran_s, gpu_type
        span = seen.ran - seen.first_ran
        if span > 0 and seen.step > seen.first_step:
            seen.rates[gpu_type] = (seen.step - seen.first_step) / span
        return seen

    def estimate(self, job_id: str, model_total_s: float) -> ProgressEstimate | None:
        """The job's estimate after its last report, blended with ``model_total_s`` (the
        model's whole run time) while its rate is measured over less than
        ``trusted_after_s``; None until a rate is measured."""
        seen = self.jobs.get(job_id)
        if seen is None:
            return None
        rate = seen.rate()
        if rate is None or rate <= 0:
            return None
        own = (seen.total - seen.step) / rate
        trusted = self.trusted_after_s
        weight = min(1.0, seen.measured_s / trusted) if trusted > 0 else 1.0
        model_left = max(0.0, model_total_s - seen.ran)
        left = weight * own + (1.0 - weight) * model_left
        return ProgressEstimate(
            left, seen.ran + left, own, weight, seen.step, seen.total, rate, seen.gpu_type
        )

    def forget(self, job_id: str) -> None:
        self.jobs.pop(job_id, None)


picklable(ProgressEstimate)
