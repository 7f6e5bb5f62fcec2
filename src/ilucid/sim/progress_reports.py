"""Jobs that report their own progress in a replay, so the live path's estimate is measured.

Traces record no steps, so a share of jobs is made to report: each chosen job
(by a hash of its id: the same jobs in every policy's replay) gets a step rate
and ``total = rate x duration`` steps, so its steps run out exactly when its
trace work does. What it reports is noisy: each interval's steps are the true
ones times ``exp(N(0, noise))``, never more than ``total - 1`` before it ends.
Work lost to a preemption takes its steps back to the last checkpoint.

Reports come after a first minute of run, then at 2, 4, 8 ... minutes of run
until they are ``every_s`` apart, then every ``every_s`` (a replay of Philly
would otherwise spend most of its time on reports that change nothing).
"""

from __future__ import annotations

import math
import random
import zlib
from dataclasses import dataclass

__all__ = ["FIRST_REPORT_S", "JobSteps", "ProgressReports"]

#: run seconds before a job's first report
FIRST_REPORT_S = 60.0


@dataclass(frozen=True, slots=True)
class ProgressReports:
    """Which jobs report, how often and how noisily (``share`` 0 turns it off)."""

    share: float = 0.0
    every_s: float = 1800.0
    noise: float = 0.1

    def __post_init__(self) -> None:
        if not 0.0 <= self.share <= 1.0:
            raise ValueError(f"progress share must be in [0, 1], got {self.share}")
        if not FIRST_REPORT_S <= self.every_s < math.inf:
            raise ValueError(f"progress reports every {self.every_s} s: at least 60 s")
        if not 0.0 <= self.noise < math.inf:
            raise ValueError(f"progress noise must be >= 0 and finite, got {self.noise}")

    def steps_for(self, job_id: str, duration: float) -> JobSteps | None:
        """The job's steps if it is one of the share that reports, else None."""
        if self.share <= 0.0 or duration <= 0.0:
            return None
        digest = zlib.crc32(job_id.encode())
        if (digest & 0xFFFF) / 65536.0 >= self.share:
            return None
        rate = 1.0 + (digest >> 16) % 2000 / 100.0  # 1 .. 21 steps per second of work
        return JobSteps(rate, max(1.0, math.ceil(rate * duration)), random.Random(digest))

    def next_report(self, ran_s: float) -> float:
        """Run seconds at the report after one made at ``ran_s`` (first: ``ran_s`` 0)."""
        if ran_s < FIRST_REPORT_S:
            return FIRST_REPORT_S
        return ran_s + min(ran_s, self.every_s)


class JobSteps:
    """One reporting job's steps: its true rate, total, and what it reported last."""

    __slots__ = ("done_seen", "random", "rate", "step", "total")

    def __init__(self, rate: float, total: float, rng: random.Random) -> None:
        self.rate, self.total, self.random = rate, total, rng
        self.step = 0.0
        self.done_seen = 0.0  # work done (trace seconds) at the last report

    def report(self, done: float, noise: float) -> float:
        """The step to report with ``done`` trace seconds of work behind the job."""
        if done < self.done_seen:  # a preemption lost work: back to where it stands
            self.step = done * self.rate
        else:
            factor = math.exp(self.random.gauss(0.0, noise)) if noise > 0 else 1.0
            self.step += (done - self.done_seen) * self.rate * factor
        self.done_seen = done
        self.step = min(self.step, self.total - 1.0)
        return self.step
