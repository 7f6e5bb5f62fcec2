"""An ilucid queue-order plugin: jobs with a deadline first, earliest deadline first.

A tenant's jobs are due ``deadlines[tenant]`` seconds after they were submitted
(ilucid's jobs carry no free-form tags yet, so the tenant is the tag). Jobs with
a deadline go in the order of their deadlines; every other job follows, in
submit order. The plugin explains itself: ``ilucid explain`` shows the sentence
``describe`` writes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from ilucid.core import ArgReader, JobState, Phase, PluginArgError, PluginBase, plugin

#: added to the submit time of a job without a deadline: after every deadline
_NO_DEADLINE = 1e11


@dataclass(frozen=True)
class DeadlineArgs:
    """``deadlines``: tenant -> seconds from submission to the deadline."""

    deadlines: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def decode(cls, reader: ArgReader) -> DeadlineArgs:
        deadlines: dict[str, float] = {}
        for tenant, value in reader.table("deadlines").items():
            number = (
                value if isinstance(value, int | float) and not isinstance(value, bool) else None
            )
            if number is None or not math.isfinite(number) or number <= 0:
                raise PluginArgError(
                    reader.plugin, f"deadlines.{tenant}", f"must be seconds > 0, got {value!r}"
                )
            deadlines[tenant] = float(number)
        return cls(deadlines)


@plugin("deadline-first", Phase.QUEUE_ORDER, args=DeadlineArgs)
class DeadlineFirst(PluginBase):
    """Jobs with a deadline first, earliest deadline first; the rest in submit order."""

    def __init__(self, args: DeadlineArgs) -> None:
        self.name = "deadline-first"
        self.deadlines = args.deadlines

    def _deadline(self, job: JobState) -> float | None:
        after = self.deadlines.get(job.spec.tenant)
        return None if after is None else job.spec.submit_time + after

    def key(self, job: JobState, now: float) -> float:
        deadline = self._deadline(job)
        return deadline if deadline is not None else _NO_DEADLINE + job.spec.submit_time

    def describe(self, job: JobState, now: float) -> str:
        deadline = self._deadline(job)
        if deadline is None:
            return "no deadline: after every job with one, in submit order"
        left = deadline - now
        when = f"in {left:,.0f} s" if left >= 0 else f"{-left:,.0f} s ago"
        return f"deadline {when} ({job.spec.tenant}); earliest deadline first"
