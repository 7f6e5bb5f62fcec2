"""Non-preemptive queue policies: FIFO and SJF, optionally with EASY backfilling.

As in the Lucid artifact's simulator, a pass starts jobs in queue order and
stops at the first job that does not fit (head-of-line blocking). With EASY
backfilling the head job gets a reservation at the earliest time enough GPUs
free up (its shadow time), and later jobs may jump ahead only if they fit now
and either end before the shadow time or use GPUs the head job will not need.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator

from ilucid.core.jobs import JobState
from ilucid.core.policies.plan import PlanBase
from ilucid.core.scheduler import SchedulingPass

__all__ = ["OrderedPolicy", "QueueKey", "fifo_key", "qssf_key", "sjf_key"]

QueueKey = Callable[[JobState], tuple[float, ...]]


def fifo_key(job: JobState) -> tuple[float, ...]:
    return (job.spec.submit_time, job.seq)


def qssf_key(job: JobState) -> tuple[float, ...]:
    """Quasi-shortest service first (Helios): estimated duration x GPUs."""
    estimate = job.spec.expected_duration
    return (estimate * max(1, job.spec.num_gpus), job.seq)


def sjf_key(job: JobState) -> tuple[float, ...]:
    """Shortest job first on the true duration (an oracle, as in the literature)."""
    return (job.spec.duration, job.seq)


class OrderedPolicy(PlanBase):
    """Start jobs in a static order; never preempt."""

    def __init__(
        self,
        name: str,
        key: QueueKey,
        backfill: bool = False,
        backfill_depth: int = 200,
    ) -> None:
        self.name = name
        self._key = key
        self.backfill = backfill
        self.backfill_depth = backfill_depth
        self._queue: list[tuple[tuple[float, ...], JobState]] = []
        # running jobs by expected end, for the backfill shadow time
        self._ends: list[tuple[float, int, JobState]] = []
        self._end_of: dict[int, float] = {}

    # -- stimuli -----------------------------------------------------------------
    def on_submitted(self, job: JobState, now: float) -> None:
        entry = (self._key(job), job)
        queue = self._queue
        if not queue or queue[-1][0] < entry[0]:
            queue.append(entry)
        else:
            bisect.insort(queue, entry, key=lambda e: e[0])

    def on_started(self, job: JobState, now: float) -> None:
        if self.backfill:
            end = now + job.remaining
            self._end_of[job.seq] = end
            bisect.insort(self._ends, (end, job.seq, job), key=_end_key)

    def on_preempted(self, job: JobState, now: float) -> None:
        """Never by its own decision; a live job whose process vanished is requeued here."""
        self.on_finished(job, now)  # out of the backfill's expected ends
        self.on_submitted(job, now)

    def _dequeue(self, job: JobState) -> None:
        key = self._key(job)
        index = bisect.bisect_left(self._queue, key, key=lambda e: e[0])
        while index < len(self._queue) and self._queue[index][1] is not job:
            index += 1
        if index < len(self._queue):
            del self._queue[index]

    def on_withdrawn(self, job: JobState, now: float) -> None:
        self._dequeue(job)

    def on_adopted(self, job: JobState, now: float) -> None:
        self._dequeue(job)
        self.on_started(job, now)

    def on_finished(self, job: JobState, now: float) -> None:
        if self.backfill:
            end = self._end_of.pop(job.seq)
            index = bisect.bisect_left(self._ends, (end, job.seq), key=_end_key)
            del self._ends[index]

    def next_wakeup(self, now: float) -> float | None:
        return None

    def pending_order(self) -> Iterator[JobState]:
        # lazy: a projection that stops early (or is not needed) does not copy the queue
        return (job for _, job in self._queue)

    def queue_position(self, job: JobState, now: float) -> int | None:
        entry_key = self._key(job)
        index = bisect.bisect_left(self._queue, entry_key, key=lambda e: e[0])
        return index + 1

    # -- decisions ---------------------------------------------------------------
    def schedule(self, step: SchedulingPass) -> None:
        queue = self._queue
        started = 0
        while started < len(queue):
            job = queue[started][1]
            if not step.try_start(job, f"head of the {self.name} queue and fits"):
                break
            started += 1
        if started:
            del queue[:started]
        if self.backfill and queue:
            self._backfill(step)

    def _backfill(self, step: SchedulingPass) -> None:
        queue = self._queue
        head = queue[0][1]
        free = step.free
        shadow, spare = self._shadow(head, free.free_total, step.now)
        taken: list[int] = []
        # free GPUs only shrink during a pass, so a size that failed to place
        # once (for the same GPU constraints) fails for every later job too
        smallest_failure: dict[tuple[str | None, float | None], int] = {}
        for position in range(1, min(len(queue), self.backfill_depth + 1)):
            if free.free_total == 0:
                break
            job = queue[position][1]
            gpus = job.spec.num_gpus
            if gpus > free.free_total:
                continue
            ends_in_time = step.now + job.remaining <= shadow
            if not ends_in_time and gpus > spare:
                continue
            constraint = (job.spec.gpu_type, job.spec.gpu_memory_gb)
            if gpus >= smallest_failure.get(constraint, gpus + 1):
                continue
            why = (
                f"backfilled: ends before {head.spec.id}'s reservation at t={shadow:g}"
                if ends_in_time
                else f"backfilled: uses {gpus} of {spare} GPUs {head.spec.id} will not need"
            )
            if step.try_start(job, why):
                taken.append(position)
                if not ends_in_time:
                    spare -= gpus
            else:
                smallest_failure[constraint] = gpus
        for position in reversed(taken):
            del queue[position]

    def _shadow(self, head: JobState, free_now: int, now: float) -> tuple[float, int]:
        """When the head job will have enough GPUs, and how many GPUs are spare then."""
        need = head.spec.num_gpus
        available = free_now
        for end, _, job in self._ends:
            if available >= need:
                break
            available += job.spec.num_gpus
            if available >= need:
                return max(end, now), available - need
        return now, max(0, available - need)


def _end_key(entry: tuple[float, int, JobState] | tuple[float, int]) -> tuple[float, int]:
    return (entry[0], entry[1])
