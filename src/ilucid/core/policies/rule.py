"""A site's own queue order: an expression, or a function a package installs.

Each is a :class:`~ilucid.core.framework.QueueOrder` plugin: an expression
from a profile file (:class:`RuleOrder`, see :mod:`ilucid.core.rules`) or a
Python function a site installs under an entry point (:class:`FunctionOrder`).
Its values can depend on the clock (``waited``), so the ``in-order`` plan
(:mod:`ilucid.core.policies.in_order`) ranks the pending jobs afresh every pass.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ilucid.core.jobs import JobState
from ilucid.core.picklable import picklable
from ilucid.core.rules import PriorityRule, job_fields

__all__ = ["FunctionOrder", "RuleOrder"]


@dataclass(frozen=True, slots=True)
class RuleOrder:
    """A queue order from a rule's expression."""

    rule: PriorityRule
    name: str = "rule"

    def key(self, job: JobState, now: float) -> float:
        return self.rule.value(job_fields(job, now))

    def describe(self, job: JobState, now: float) -> str:
        return self.rule.explain(job_fields(job, now))


@dataclass(frozen=True, slots=True)
class FunctionOrder:
    """A queue order from a site's own function of the job's fields (an entry point)."""

    function: Callable[[Mapping[str, float]], float]
    name: str

    def key(self, job: JobState, now: float) -> float:
        try:
            value = float(self.function(job_fields(job, now)))
        except (ArithmeticError, ValueError, TypeError):
            return math.inf
        return value if math.isfinite(value) else math.inf

    def describe(self, job: JobState, now: float) -> str:
        value = self.key(job, now)
        shown = "cannot be computed (inf)" if math.isinf(value) else f"{value:,.6g}"
        return f"priority {shown} by {self.name}; lowest first"


picklable(RuleOrder, FunctionOrder)
