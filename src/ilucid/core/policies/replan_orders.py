"""The orders a re-planning policy ranks jobs by: SRTF (oracle remaining time),
Tiresias (least attained service) and the estimate-based order of the default
profile. Each gives sortable entries; the walk in ``preemptive.py`` uses them."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from ilucid.core.jobs import JobState, RestoreOverhead
from ilucid.core.picklable import picklable
from ilucid.core.sorted_blocks import SortedBlocks
from ilucid.core.sorted_sums import Entry
from ilucid.core.stated_estimate import claim_ends

__all__ = ["EstimateOrder", "ReplanOrder", "SrtfOrder", "TiresiasOrder"]


class ReplanOrder(Protocol):
    """How a re-planning policy ranks jobs. Entries end with ``(seq, gpus)``.

    A running job's entry must not change while it runs, except at the times
    ``next_rekey`` announces (Tiresias: crossing a queue threshold); then the
    policy calls ``refresh`` and recomputes the entry.
    """

    def pending_entry(self, job: JobState) -> Entry: ...

    def running_entry(self, job: JobState, now: float) -> Entry: ...

    def bound(self, pending: Entry, now: float) -> Entry:
        """Running entries below this bound come before the pending job in the order."""
        ...

    def next_rekey(self, job: JobState, now: float) -> float | None:
        """When a running job's entry changes next (None: never while it runs)."""
        ...

    def refresh(self, job: JobState, now: float) -> None:
        """Update what the order knows about a running job at a re-key time."""
        ...

    def rekey(self, job: JobState, now: float) -> tuple[Entry, float | None]:
        """``(running_entry, next_rekey)`` at once: a running job's key is always
        needed with its next re-key time."""
        ...

    def observe_finished(self, job: JobState) -> None:
        """Learn from a job that ended (its run time)."""
        ...


@dataclass(frozen=True, slots=True)
class SrtfOrder:
    """Remaining time, ascending. A running job's key is its absolute end time,
    which stays fixed while it runs; it precedes a pending job when it will end
    sooner than that job's remaining time from now (ties go to the pending job)."""

    def pending_entry(self, job: JobState) -> Entry:
        return (job.remaining, job.seq, job.spec.num_gpus)

    def next_rekey(self, job: JobState, now: float) -> float | None:
        return None

    def refresh(self, job: JobState, now: float) -> None:
        pass

    def observe_finished(self, job: JobState) -> None:
        pass

    def running_entry(self, job: JobState, now: float) -> Entry:
        return (job.since + job.remaining, job.seq, job.spec.num_gpus)

    def rekey(self, job: JobState, now: float) -> tuple[Entry, float | None]:
        return self.running_entry(job, now), None

    def bound(self, pending: Entry, now: float) -> Entry:
        return (now + pending[0], -1.0)


@dataclass(frozen=True, slots=True)
class TiresiasOrder:
    """Queue level by attained GPU-seconds, then submit time; running first on ties."""

    thresholds: tuple[float, ...] = (18000.0,)

    def level(self, attained: float) -> int:
        return sum(1 for t in self.thresholds if attained > t)

    def pending_entry(self, job: JobState) -> Entry:
        return (self.level(job.attained), job.spec.submit_time, 1, job.seq, job.spec.num_gpus)

    def running_entry(self, job: JobState, now: float) -> Entry:
        level = self.level(job.attained_at(now))
        return (level, job.spec.submit_time, 0, job.seq, job.spec.num_gpus)

    def bound(self, pending: Entry, now: float) -> Entry:
        return pending

    def next_rekey(self, job: JobState, now: float) -> float | None:
        gpus = job.spec.num_gpus
        if gpus == 0:
            return None
        attained = job.attained_at(now)
        for threshold in self.thresholds:
            if attained <= threshold:
                return job.since + (threshold - job.attained) / gpus
        return None

    def rekey(self, job: JobState, now: float) -> tuple[Entry, float | None]:
        return self.running_entry(job, now), self.next_rekey(job, now)

    def refresh(self, job: JobState, now: float) -> None:
        pass

    def observe_finished(self, job: JobState) -> None:
        pass


class EstimateOrder:
    """Shortest *estimated* remaining time first, the estimate growing with attained service.

    A job's estimate starts as the driver's submission-time estimate. When a
    running job outlives it, the estimate becomes the median run time of
    finished jobs that ran longer than it has (or twice its run time when none
    did): the longer a job has run, the longer it is expected to run, without
    an oracle. With ``restore_aware`` a running job looks shorter by its
    restore overhead, so it is only preempted when the newcomer's advantage
    pays for the restore.

    A job with a stated run time is ranked by the blend of its statement and the
    model's estimate until it has run past the claim
    (:meth:`~ilucid.core.model.JobSpec.claim_ends`): from then on by the longer
    estimate it has not outlived (:attr:`overran` records the claim), so a tiny
    statement neither keeps preempting nor keeps its GPUs. Such a job's pending
    key is settled the same way when it is preempted before the re-key came.
    """

    def __init__(
        self,
        overhead: RestoreOverhead | None = None,
        restore_aware: bool = True,
        memory: int = 5000,
        min_run_s: float = 0.0,
        aging: float = 0.0,
    ) -> None:
        if not 0.0 <= aging < 1.0:
            raise ValueError(f"aging must be in [0, 1), got {aging}")
        self.overhead = overhead or RestoreOverhead()
        self.restore_aware = restore_aware
        self.memory = memory
        self.min_run_s = min_run_s
        self.aging = aging
        self._estimate: dict[int, float] = {}
        #: jobs that ran past the claim of their stated run time -> that claim, s
        self.overran: dict[int, float] = {}
        self._run_times = SortedBlocks()  # of floats
        self._order: deque[float] = deque()

    def estimate(self, job: JobState) -> float:
        known = self._estimate.get(job.seq)
        if known is not None:
            return known
        return job.spec.expected_duration

    def _claim(self, job: JobState) -> float:
        """Seconds of run at which the job's estimate stops holding: the estimate, or
        sooner the claim of a stated run time not yet outlived."""
        known = self._estimate.get(job.seq)
        if known is not None:
            return known
        spec = job.spec
        stated = spec.stated_estimate
        if stated is None:
            return spec.expected_duration
        return claim_ends(stated, spec.model_duration, spec.stated_weight)

    @staticmethod
    def _ran(job: JobState) -> float:
        return job.attained / max(1, job.spec.num_gpus)

    def pending_entry(self, job: JobState) -> Entry:
        if job.spec.stated_estimate is not None:
            self._outlive(job, self._ran(job))
        # aging: a waiting job's key drops by ``aging`` seconds per second waited; storing
        # ``left + aging * waiting_since`` keeps the pending order static
        left = max(0.0, self.estimate(job) - self._ran(job))
        return (left + self.aging * job.since, job.seq, job.spec.num_gpus)

    def running_entry(self, job: JobState, now: float) -> Entry:
        if now < job.since + self.min_run_s:  # protected: not preempted this early
            return (-math.inf, job.seq, job.spec.num_gpus)
        left = max(0.0, self.estimate(job) - self._ran(job))
        shift = self.overhead.for_job(job.spec) if self.restore_aware else 0.0
        return (job.since + left - shift, job.seq, job.spec.num_gpus)

    def bound(self, pending: Entry, now: float) -> Entry:
        # the pending job's aged remaining time is pending[0] - aging * now
        return (pending[0] + (1.0 - self.aging) * now, -1.0)

    def next_rekey(self, job: JobState, now: float) -> float | None:
        if job.spec.num_gpus == 0:
            return None  # a GPU-less job attains no service to re-estimate from
        if now < job.since + self.min_run_s:
            return job.since + self.min_run_s
        left = self._claim(job) - self._ran(job)
        return job.since + max(0.0, left)

    def rekey(self, job: JobState, now: float) -> tuple[Entry, float | None]:
        return self.running_entry(job, now), self.next_rekey(job, now)

    def refresh(self, job: JobState, now: float) -> None:
        self._outlive(job, job.attained_at(now) / max(1, job.spec.num_gpus))

    def _outlive(self, job: JobState, ran: float) -> None:
        """A new estimate for a job that has run ``ran`` s, if that outlived its estimate."""
        seq, spec = job.seq, job.spec
        if spec.stated_estimate is not None and seq not in self._estimate:
            claim = self._claim(job)
            if ran < claim:
                return
            self.overran[seq] = claim
            still = spec.standing_estimate(ran)
            if still is not None:
                self._estimate[seq] = still
                return
        elif ran < self.estimate(job):
            return
        values = self._run_times
        first = values.bisect_right(ran)
        # the median of the longer run times, values[first:], without copying them
        count = len(values)
        guess: float = values.at(first + (count - first) // 2) if first < count else 2.0 * ran
        self._estimate[job.seq] = max(guess, ran + 1.0)

    def observe_finished(self, job: JobState) -> None:
        self._estimate.pop(job.seq, None)
        self.overran.pop(job.seq, None)
        ran = self._ran(job)
        self._run_times.add(ran)
        self._order.append(ran)
        if len(self._order) > self.memory:
            old = self._order.popleft()
            self._run_times.remove(old)


picklable(SrtfOrder, TiresiasOrder)
