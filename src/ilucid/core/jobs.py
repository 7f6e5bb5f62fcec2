"""Runtime state of a job as the core sees it, and the preemption overhead model."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ilucid.core.model import JobSpec, Placement
from ilucid.core.picklable import picklable

__all__ = ["JobState", "JobStatus", "RestoreOverhead", "lost_since_checkpoint"]


class JobStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"


@dataclass(frozen=True, slots=True)
class RestoreOverhead:
    """Seconds a preempted job needs to restore before it makes progress again.

    Defaults are those of the Lucid artifact: 40 s up to 8 GPUs, 60 s above.
    """

    small: float = 40.0
    large: float = 60.0
    large_above_gpus: int = 8

    def for_job(self, job: JobSpec) -> float:
        return self.large if job.num_gpus > self.large_above_gpus else self.small


def lost_since_checkpoint(run_s: float, interval: float | None) -> float:
    """Work lost by stopping a job ``run_s`` seconds after it (re)started.

    A job saves its state every ``interval`` seconds of run time, counted from
    the moment it starts or restores; ``None`` means every second is kept
    (the Lucid artifact's assumption, used by the training-only baselines).
    """
    if interval is None or run_s <= 0:
        return 0.0
    return run_s % interval


class JobState:
    """Mutable bookkeeping of one job: where it runs and how much work is left.

    ``remaining`` is the work (seconds on its GPUs) still to do as of
    ``since``; while running it shrinks one second per second. A preemption
    adds the restore overhead to it, as the Lucid artifact does.
    """

    __slots__ = (
        "attained",
        "first_start",
        "placement",
        "preemptions",
        "remaining",
        "seq",
        "since",
        "spec",
        "status",
    )

    def __init__(self, spec: JobSpec, seq: int) -> None:
        self.spec = spec
        self.seq = seq
        self.status = JobStatus.PENDING
        self.placement: Placement | None = None
        self.remaining = spec.duration
        self.attained = 0.0  # GPU-seconds of service received (Tiresias' LAS metric)
        self.since = spec.submit_time
        self.first_start: float | None = None
        self.preemptions = 0

    def remaining_at(self, now: float) -> float:
        if self.status is JobStatus.RUNNING:
            return self.remaining - (now - self.since)
        return self.remaining

    def attained_at(self, now: float) -> float:
        if self.status is JobStatus.RUNNING:
            return self.attained + self.spec.num_gpus * (now - self.since)
        return self.attained

    def start(self, placement: Placement, now: float, startup: float = 0.0) -> None:
        """Run on ``placement``; ``startup`` seconds pass before it makes progress."""
        self.remaining += startup
        self.status = JobStatus.RUNNING
        self.placement = placement
        self.since = now
        if self.first_start is None:
            self.first_start = now

    def stop(self, now: float, overhead: float, lost: float = 0.0) -> None:
        """Preempt: bank the work done, less ``lost`` seconds since the last checkpoint,
        and charge the restore overhead for the next start."""
        self.attained = self.attained_at(now)
        self.remaining = max(0.0, self.remaining_at(now)) + lost + overhead
        self.status = JobStatus.PENDING
        self.placement = None
        self.since = now
        self.preemptions += 1

    def finish(self, now: float) -> None:
        self.attained = self.attained_at(now)
        self.remaining = 0.0
        self.status = JobStatus.DONE
        self.placement = None
        self.since = now


picklable(RestoreOverhead)
