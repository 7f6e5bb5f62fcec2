"""Submission-time features of a job, built walk-forward from finished jobs only.

A feature may only use what a scheduler knows when the job is submitted: its
request, the clock, and jobs that had *finished* by then. ``FeatureStream``
enforces that by taking completions and submissions in time order; a job that
finishes later can never leak into an earlier prediction.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence

from ilucid.core import JobSpec

__all__ = [
    "DURATION_FEATURES",
    "FeatureRow",
    "FeatureStream",
    "History",
    "earliest_end",
    "walk_forward_rows",
]

#: Columns of a duration feature row, in model order.
DURATION_FEATURES: tuple[str, ...] = (
    "num_gpus",
    "gpu_type",
    "tenant",
    "user",
    "hour",
    "weekday",
    "user_median",
    "user_last",
    "user_count",
    "size_median",
    "size_last",
    "recent_median",
    "gpu_util",
    "gmem_util",
    "gmem_gb",
)

FeatureRow = dict[str, float | str]


class _Tally:
    """The last ``window`` durations under one key: enough for median, last and count.

    The window is also kept sorted, so a median is a lookup: rows are built for
    every arrival, and between two arrivals a job usually ends."""

    __slots__ = ("_window", "count", "recent", "sorted")

    def __init__(self, window: int) -> None:
        self.recent: deque[float] = deque()
        self.sorted: list[float] = []
        self.count = 0
        self._window = window

    def add(self, duration: float) -> None:
        recent, ordered = self.recent, self.sorted
        if len(recent) == self._window:
            del ordered[bisect.bisect_left(ordered, recent.popleft())]
        recent.append(duration)
        bisect.insort(ordered, duration)
        self.count += 1

    def median(self) -> float:
        """``statistics.median`` of the window (the mean of the middle two when even)."""
        ordered = self.sorted
        n = len(ordered)
        if not n:
            return math.nan
        if n % 2:
            return ordered[n // 2]
        return (ordered[n // 2 - 1] + ordered[n // 2]) / 2

    def last(self) -> float:
        return self.recent[-1] if self.recent else math.nan


class History:
    """What finished jobs tell about the next one, per user and per GPU count."""

    def __init__(self, window: int = 50) -> None:
        self.window = window
        self._users: dict[tuple[str, str], _Tally] = {}
        self._sizes: dict[int, _Tally] = {}
        self._recent = _Tally(window * 4)

    def _new(self) -> _Tally:
        return _Tally(self.window)

    def observe(self, job: JobSpec, duration: float) -> None:
        """Record a finished job's real duration."""
        user_key = (job.tenant, job.user)
        if user_key not in self._users:
            self._users[user_key] = self._new()
        self._users[user_key].add(duration)
        if job.num_gpus not in self._sizes:
            self._sizes[job.num_gpus] = self._new()
        self._sizes[job.num_gpus].add(duration)
        self._recent.add(duration)

    def row(self, job: JobSpec, profile: dict[str, float] | None = None) -> FeatureRow:
        user = self._users.get((job.tenant, job.user))
        size = self._sizes.get(job.num_gpus)
        hours = job.submit_time / 3600.0
        nan = math.nan
        if user is None:
            user_median = user_last = nan
            user_count = 0.0
        else:
            user_median, user_last, user_count = user.median(), user.last(), float(user.count)
        if profile:
            measured = (
                profile.get("gpu_util", nan),
                profile.get("gmem_util", nan),
                profile.get("gmem_gb", nan),
            )
        else:
            measured = (nan, nan, nan)
        return {
            "num_gpus": float(job.num_gpus),
            "gpu_type": job.gpu_type or "any",
            "tenant": job.tenant,
            "user": job.user,
            "hour": float(int(hours) % 24),
            "weekday": float(int(hours // 24) % 7),
            "user_median": user_median,
            "user_last": user_last,
            "user_count": user_count,
            "size_median": size.median() if size is not None else nan,
            "size_last": size.last() if size is not None else nan,
            "recent_median": self._recent.median(),
            "gpu_util": measured[0],
            "gmem_util": measured[1],
            "gmem_gb": measured[2],
        }


def earliest_end(job: JobSpec) -> float:
    """When a trace job finished at the earliest: traces without queueing data
    (Philly, ITP) only bound the real end from below."""
    return job.submit_time + job.duration


class FeatureStream:
    """Walk-forward feature rows: completions are folded in before each submission."""

    def __init__(self, window: int = 50) -> None:
        self.history = History(window)
        self._ends: list[tuple[float, int, JobSpec, float]] = []
        self._seq = 0

    def finished(self, job: JobSpec, end: float, duration: float | None = None) -> None:
        """Announce that ``job`` ends at ``end``; it counts only once the clock passes it."""
        self._seq += 1
        heapq.heappush(
            self._ends, (end, self._seq, job, job.duration if duration is None else duration)
        )

    def advance(self, now: float) -> None:
        ends = self._ends
        while ends and ends[0][0] <= now:
            _, _, job, duration = heapq.heappop(ends)
            self.history.observe(job, duration)

    def row(self, job: JobSpec, now: float, profile: dict[str, float] | None = None) -> FeatureRow:
        self.advance(now)
        return self.history.row(job, profile)


def walk_forward_rows(
    jobs: Sequence[JobSpec],
    end_of: Callable[[JobSpec], float] = earliest_end,
    profiles: Iterable[dict[str, float] | None] | None = None,
) -> Iterator[FeatureRow]:
    """Feature rows for ``jobs`` (in submit order), each seeing only jobs ended before it."""
    stream = FeatureStream()
    profile_iter = iter(profiles) if profiles is not None else None
    for job in jobs:
        profile = next(profile_iter) if profile_iter is not None else None
        yield stream.row(job, job.submit_time, profile)
        stream.finished(job, end_of(job))
