"""The default profile's order: a level by attained GPU-seconds, then the estimate.

Levels (as Tiresias) keep queueing bounded when estimates are poor; inside a
level the job with the fewest estimated GPU-seconds left goes first (as Lucid
and Helios' QSSF). Two levels sit outside the attained-service ladder: jobs the
starvation guard promoted, and jobs that share GPUs (packed).

A job whose own progress is trusted (:mod:`ilucid.core.progress_book`) knows
what it has left, so once it has left level 0 it is placed by that instead of
what it attained: just ahead of the first level, from level 1 on, whose
threshold is at least what it has left (a job there has not yet attained the
threshold; this one needs no more than it). Among themselves such jobs go by
what they have left, as SRTF.

Level 0 stays as it is, for every job in it. Letting known jobs with little left
ahead of it cost wide new jobs their start (p99.9 queueing 2.04x Tiresias' on
Philly, 2.13x on ITP-02, against 1.87x and 1.34x, with 60 % of jobs reporting;
mean JCT within 2 %). Moving a known job out of it as soon as its rate was
trusted put short jobs behind every newcomer: on ITP-05 jobs of 15-30 minutes
took 8.3k s on average against 4.7k before, so reporting made them slower.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections import deque

from ilucid.core.jobs import JobState, RestoreOverhead
from ilucid.core.policies.replan_orders import EstimateOrder
from ilucid.core.sorted_sums import Entry

__all__ = ["PACKED", "STARVING", "Facts", "LeveledEstimateOrder"]

#: level, attained GPU-seconds, estimated seconds left, GPUs, the stated claim overran
Facts = tuple[float, float, float, int, float | None]

#: level of a job the starvation guard promoted: ahead of every other level
STARVING = -2
#: a known job past its own estimate is expected to need this share of its run more...
KNOWN_OVERRUN = 0.05
#: ... and at least this many seconds
KNOWN_OVERRUN_S = 60.0
#: how far ahead of a level a job that knows what it has left stands (behind PACKED)
KNOWN_AHEAD = 0.25
#: level of running jobs that share GPUs (packed): behind new jobs (level 0), ahead of
#: the rest. Kept ahead of every level, pairs of long jobs left new ones waiting: ITP-02
#: p99.9 queueing 53k s (2.9 x Tiresias) against 26k s here, mean JCT 28k s either way
PACKED = 0.5


class LeveledEstimateOrder(EstimateOrder):
    """Level by attained GPU-seconds, then estimated GPU-seconds left (module docstring).

    Measured against ordering a level by estimated remaining *time* (as SRTF):
    Philly 91.2k vs 117.2k s mean JCT, ITP-03 66.7k vs 70.5k s, ITP-01/05 equal.
    """

    def __init__(
        self,
        levels: tuple[float, ...],
        lead_per_error: float = 0.0,
        error_window: int = 1000,
        slice_s: float = 3600.0,
        overhead: RestoreOverhead | None = None,
    ) -> None:
        super().__init__(overhead=overhead)
        self.levels = levels
        self.lead_per_error = lead_per_error
        self.slice_s = slice_s
        self.starving: dict[int, float] = {}  # seq -> when it began to starve
        self.sliced: set[int] = set()  # starving jobs served for one slice only
        #: packed jobs -> GPUs they count for (0 for the one that joined): never preempted
        self.packed: dict[int, int] = {}
        self._errors: deque[float] = deque(maxlen=error_window)
        self.lead_s = 0.0
        #: jobs whose estimate is their own trusted progress: placed by what they have left
        self.known: set[int] = set()
        #: what a known job is placed by: the ladder, and one step more at its last ratio
        #: (measured on ITP-03 with 60 % of jobs reporting: 60.6k s mean JCT, against 66.5k
        #: with known jobs ahead of the last level whatever they have left, 67.9k behind it)
        ratio = levels[-1] / levels[-2] if len(levels) > 1 else 10.0
        self.known_steps = (*levels, levels[-1] * ratio)

    def level(self, job: JobState, attained: float) -> float:
        if job.seq in self.starving:
            return STARVING
        if job.seq in self.known and attained >= self.levels[0]:
            return self.known_level(self._gpu_seconds_left(job, attained))
        return bisect.bisect_left(self.levels, attained)

    def known_level(self, left: float) -> float:
        """Where a job that knows it has ``left`` GPU-seconds to go stands: a quarter
        step ahead of the first level from level 1 on whose threshold is at least that
        (level 0 stays first: new jobs nobody knows yet, so short ones finish)."""
        return self._known_index(left) - KNOWN_AHEAD

    def _known_index(self, left: float) -> int:
        """The level a known job with ``left`` GPU-seconds to go stands just ahead of."""
        return max(1, bisect.bisect_left(self.known_steps, left))

    def _gpu_seconds_left(self, job: JobState, attained: float) -> float:
        gpus = max(1, job.spec.num_gpus)
        return max(0.0, self.estimate(job) - attained / gpus) * gpus

    def pending_entry(self, job: JobState) -> Entry:
        if job.spec.stated_estimate is not None:  # preempted past its claim: settled now
            self._outlive(job, self._ran(job))
        starved = self.starving.get(job.seq)
        if starved is not None:  # starving jobs are served in the order they began to
            return (STARVING, starved, job.seq, job.spec.num_gpus)
        left = self._gpu_seconds_left(job, job.attained)
        return (self.level(job, job.attained), left, job.seq, job.spec.num_gpus)

    def running_entry(self, job: JobState, now: float) -> Entry:
        """A running job's key is its estimated GPU-seconds left as of this (re)key, less
        its restore overhead and the lead: it is re-keyed when it changes level or
        outlives its estimate, so a newcomer must beat what it was last known to need."""
        counted = self.packed.get(job.seq)
        if counted is not None:  # sharing GPUs: kept until its partner ends
            return (PACKED, -math.inf, job.seq, counted)
        if job.seq in self.starving:  # served at last: only inference may stop it
            return (STARVING, -math.inf, job.seq, job.spec.num_gpus)
        attained = job.attained_at(now)
        gpus = max(1, job.spec.num_gpus)
        shift = (self.overhead.for_job(job.spec) + self.lead_s) * gpus
        left = self._gpu_seconds_left(job, attained) - shift
        return (self.level(job, attained), left, job.seq, job.spec.num_gpus)

    def bound(self, pending: Entry, now: float) -> Entry:
        if pending[0] == STARVING:
            return (STARVING, -math.inf, math.inf)
        return (pending[0], pending[1], -1.0)

    def next_rekey(self, job: JobState, now: float) -> float | None:
        gpus = job.spec.num_gpus
        if gpus == 0:
            return None
        if job.seq in self.packed:
            return None
        if job.seq in self.starving:  # its key stays first until it ends (or its slice does)
            return job.since + self.slice_s if job.seq in self.sliced else None
        outlived = job.since + max(0.0, self._claim(job) - self._ran(job))
        attained = job.attained_at(now)
        index = bisect.bisect_left(self.levels, attained)
        if index < len(self.levels):
            return min(outlived, job.since + (self.levels[index] - job.attained) / gpus)
        return outlived

    def rekey(self, job: JobState, now: float) -> tuple[Entry, float | None]:
        """:meth:`running_entry` and :meth:`next_rekey` with one look at the job (a
        running job is re-keyed 400,000 times in a Philly replay)."""
        seq = job.seq
        if seq in self.packed or seq in self.starving:
            return self.running_entry(job, now), self.next_rekey(job, now)
        spec = job.spec
        gpus = spec.num_gpus
        per = max(1, gpus)
        since, banked = job.since, job.attained
        attained = banked + gpus * (now - since)  # attained_at(now): the job runs
        estimate = self.estimate(job)
        shift = (self.overhead.for_job(spec) + self.lead_s) * per
        left = max(0.0, estimate - attained / per) * per - shift
        levels = self.levels
        # a stated run time's claim may end before the estimate does
        claim = estimate if spec.stated_estimate is None else self._claim(job)
        outlived = since + max(0.0, claim - banked / per)
        if seq in self.known and attained >= levels[0]:
            whole = max(0.0, estimate - attained / per) * per
            return self._known_rekey(seq, gpus, whole, left, outlived, now)
        level = bisect.bisect_left(levels, attained)
        entry = (level, left, seq, gpus)
        if gpus == 0:
            return entry, None
        if level < len(levels):
            return entry, min(outlived, since + (levels[level] - banked) / gpus)
        return entry, outlived

    def _known_rekey(
        self, seq: int, gpus: int, whole: float, left: float, outlived: float, now: float
    ) -> tuple[Entry, float | None]:
        """A known job's key (``whole``: its GPU-seconds left) and when it moves up: as
        what it has left shrinks past the step ahead, without waiting for a report."""
        index = self._known_index(whole)
        entry: Entry = (index - KNOWN_AHEAD, left, seq, gpus)
        if gpus == 0:
            return entry, None
        if index == 1:  # never ahead of level 0: its place stays until it ends
            return entry, outlived
        return entry, min(outlived, now + (whole - self.known_steps[index - 1]) / gpus)

    def refresh(self, job: JobState, now: float) -> None:
        if job.seq in self.sliced and now >= job.since + self.slice_s:
            self.forget_starving(job.seq)  # its slice is over: back to its level
        super().refresh(job, now)

    def _outlive(self, job: JobState, ran: float) -> None:
        """A known job that runs past its own estimate is near its end (its last report
        erred a little), not a job of unknown length: it is expected to need 5 % of its
        run more (at least a minute) until its next report says. Taking the median of
        longer jobs instead (as for the rest) stopped such jobs just before their end:
        ITP-01 mean JCT 28.5k s against 26.4k with 60 % of jobs reporting."""
        if job.seq in self.known:
            if ran >= self.estimate(job):
                self._estimate[job.seq] = ran + max(KNOWN_OVERRUN_S, KNOWN_OVERRUN * ran)
            return
        super()._outlive(job, ran)

    def forget_starving(self, seq: int) -> None:
        self.starving.pop(seq, None)
        self.sliced.discard(seq)

    def forget(self, seq: int) -> None:
        """A job left without finishing (cancelled): nothing of it is kept."""
        self.forget_starving(seq)
        self.known.discard(seq)

    def observe_finished(self, job: JobState) -> None:
        self.forget_starving(job.seq)
        self.known.discard(job.seq)
        ran = self._ran(job)
        self._errors.append(abs(ran - job.spec.expected_duration))
        if self.lead_per_error > 0:
            self.lead_s = self.lead_per_error * statistics.median(self._errors)
        super().observe_finished(job)

    def set_estimate(
        self, job: JobState, seconds: float, measured: bool = False, trusted: bool = False
    ) -> None:
        """A better estimate than the submission's (a profiling run measured it). For a
        job with a stated run time it may only raise the estimate: the live profiler
        refines the user's own statement, which must not bypass its weight. The job's
        own progress (``measured``) counts over both; once its rate is ``trusted`` the
        job is placed by what it has left (module docstring)."""
        if not measured and job.spec.stated_estimate is not None and seconds <= self.estimate(job):
            return
        self._estimate[job.seq] = seconds
        if trusted:
            self.known.add(job.seq)

    def median_error_s(self) -> float | None:
        """Median absolute error of recent submission-time estimates, in seconds."""
        return statistics.median(self._errors) if self._errors else None

    def describe(self, job: JobState, now: float) -> str:
        return self.words(self.facts(job, now))

    def facts(self, job: JobState, now: float) -> Facts:
        """What :meth:`words` says of ``job`` at ``now``: level, attained GPU-seconds,
        estimated seconds left, GPUs, and the stated claim it overran (None: none)
        (taken now, written later)."""
        attained = job.attained_at(now)
        gpus = job.spec.num_gpus
        left = max(0.0, self.estimate(job) - attained / max(1, gpus))
        return self.level(job, attained), attained, left, gpus, self.overran.get(job.seq)

    def words(self, facts: Facts) -> str:
        level, attained, left, gpus, overran = facts
        if level == STARVING:
            where = "served first by the starvation guard"
        elif level != int(level):
            where = self._known_words(level, left * max(1, gpus))
        else:
            index = int(level)
            where = f"level {index} of {len(self.levels)} (attained {attained:,.0f} GPU-s"
            where += f" < {self.levels[index]:,.0f})" if index < len(self.levels) else ", lowest)"
        said = (
            f"{where}, estimated {left:,.0f} s x {gpus} GPU(s) left"
            if gpus > 0
            else f"{where}, estimated {left:,.0f} s left, CPU-only"  # never "x 1 GPU(s)"
        )
        if overran is not None:
            said += f" (it overran its estimate of {overran:,.0f} s, which counts no more)"
        return said

    def _known_words(self, level: float, left: float) -> str:
        """Where a job placed by its own progress stands, and why."""
        index = round(level + KNOWN_AHEAD)
        said = f"placed by its own progress: {left:,.0f} GPU-s left"
        if index == len(self.levels):
            return said + f", over {self.levels[-1]:,.0f}: ahead of the lowest level"
        if index > len(self.levels):
            step = self.known_steps[-1]
            return said + f", over {step:,.0f}: behind the lowest level"
        return said + f", within {self.levels[index]:,.0f}: ahead of level {index}"
