"""Expected start times of pending jobs, projected from estimates and the queue order.

Running jobs are expected to end when their duration estimate runs out (a
job that has outlived its estimate is expected to run as long again, the
rule the estimate-driven policies use). Pending jobs, in the policy's order,
each take the earliest interval in which enough GPUs stay free for their
estimated duration, and reserve it: conservative backfilling on GPU counts.
The projection ignores node boundaries, preemption and jobs yet to arrive,
so it is a forecast, and its accuracy is measured in simulation.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["FreeProfile", "expected_remaining", "project_starts"]

_BUCKETS = 64  # duration classes [2**(b-1), 2**b) seconds for the search floors


def expected_remaining(estimate: float, ran: float) -> float:
    """Seconds a job that ran ``ran`` of an ``estimate`` is still expected to run."""
    left = estimate - ran
    return left if left > 0 else max(ran, 1.0)


@dataclass(slots=True)
class FreeProfile:
    """Free GPUs over future time as a step function: ``free[i]`` holds on
    ``[times[i], times[i + 1])``; the last step lasts forever."""

    times: list[float]
    free: list[int]
    #: steps before this index have no free GPU: searches start here (keeps a long,
    #: saturated queue linear instead of quadratic)
    full_prefix: int = 0
    #: per GPU count, per duration class b: no request for that many GPUs and a
    #: duration of class b or above can start before this time. Free GPUs only
    #: ever decrease (``reserve``), so a request never fits earlier than an
    #: earlier answer for the same GPUs and a shorter duration; searches skip
    #: there (a long queue of similar jobs would otherwise rescan the profile).
    _floors: dict[int, list[float]] = field(default_factory=dict, repr=False)
    _exact: dict[tuple[int, float], float] = field(default_factory=dict, repr=False)

    @classmethod
    def from_running(cls, now: float, total: int, ends: Iterable[tuple[float, int]]) -> FreeProfile:
        """The profile left by running jobs that end at ``(time, gpus)``."""
        ordered = sorted(ends)
        times, free = [now], [total - sum(g for _, g in ordered)]
        for end, gpus in ordered:
            end = max(end, now)
            if end == times[-1]:
                free[-1] += gpus
            else:
                times.append(end)
                free.append(free[-1] + gpus)
        return cls(times, free)

    def _split(self, at: float) -> int:
        """Index of the step starting exactly at ``at`` (inserting one if needed)."""
        index = bisect.bisect_right(self.times, at) - 1
        if self.times[index] != at:
            index += 1
            self.times.insert(index, at)
            self.free.insert(index, self.free[index - 1])
            if index < self.full_prefix:
                self.full_prefix += 1
        return index

    def earliest(self, gpus: int, duration: float) -> float | None:
        """First time ``gpus`` stay free for ``duration`` seconds, or None if never."""
        times, free = self.times, self.free
        count = len(times)
        start = self.full_prefix
        bucket = min(int(duration).bit_length(), _BUCKETS - 1) if duration < 1e18 else _BUCKETS - 1
        floors = self._floors.get(gpus)
        if floors is not None:
            floor = max(floors[bucket], self._exact.get((gpus, duration), -math.inf))
            if floor > times[start]:
                start = bisect.bisect_left(times, floor)
        while start < count:
            if free[start] < gpus:
                start += 1
                continue
            end = times[start] + duration
            probe = start + 1
            while probe < count and times[probe] < end and free[probe] >= gpus:
                probe += 1
            if probe >= count or times[probe] >= end:
                found = times[start]
                self._remember(gpus, duration, bucket, found)
                return found
            start = probe + 1
        return None

    def _remember(self, gpus: int, duration: float, bucket: int, found: float) -> None:
        floors = self._floors.get(gpus)
        if floors is None:
            floors = self._floors[gpus] = [-math.inf] * _BUCKETS
        # longer durations only: class b + 1 and above are all longer than this one
        for index in range(bucket + 1, _BUCKETS):
            if floors[index] >= found:
                break  # floors never decrease with the class, so the rest are higher
            floors[index] = found
        self._exact[(gpus, duration)] = found

    def reserve(self, at: float, gpus: int, duration: float) -> None:
        first = self._split(at)
        last = self._split(at + max(duration, 1e-6))
        for index in range(first, last):
            self.free[index] -= gpus
        free = self.free
        while self.full_prefix < len(free) - 1 and free[self.full_prefix] <= 0:
            self.full_prefix += 1


def project_starts(
    profile: FreeProfile,
    pending: Iterable[tuple[str, int, float]],
    until: str | None = None,
    limit: int = 5000,
) -> dict[str, float]:
    """Expected start of each pending ``(job id, GPUs, expected duration)``, in order.

    Stops after ``until`` (when given) or ``limit`` jobs; a job that can never
    fit is left out.
    """
    starts: dict[str, float] = {}
    for count, (job_id, gpus, duration) in enumerate(pending):
        if count >= limit:
            break
        at = profile.earliest(gpus, duration)
        if at is not None:
            starts[job_id] = at
            profile.reserve(at, gpus, duration)
        if job_id == until:
            break
    return starts
