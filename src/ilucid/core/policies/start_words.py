"""Why the default profile starts a job: facts taken at the start, a sentence written when read.

Objects rather than nested functions: compiled, a nested function lives in its
enclosing call's environment, which it refers back to, so each start made a
reference cycle that kept its pass, decision and placement alive until the garbage
collector found them (a quarter of a Philly replay's memory and most of its
collection time).
"""

from __future__ import annotations

from ilucid.core.decision import Words
from ilucid.core.jobs import JobState
from ilucid.core.policies.leveled_order import Facts, LeveledEstimateOrder

__all__ = ["StartWords", "WhyStart"]


class WhyStart:
    """Why ``job`` starts now: its facts are taken when it starts (called)."""

    def __init__(
        self,
        name: str,
        order: LeveledEstimateOrder,
        job: JobState,
        now: float,
        limit: float | None,
        where: str,
    ) -> None:
        self.name, self.order, self.job, self.now = name, order, job, now
        self.limit, self.where = limit, where

    def __call__(self) -> Words:
        facts = self.order.facts(self.job, self.now)
        return StartWords(self.name, self.order, facts, self.limit, self.where)


class StartWords:
    """The sentence of a :class:`WhyStart` (a :class:`Reason` writes it when first read)."""

    def __init__(
        self,
        name: str,
        order: LeveledEstimateOrder,
        facts: Facts,
        limit: float | None,
        where: str,
    ) -> None:
        self.name, self.order, self.facts, self.limit, self.where = name, order, facts, limit, where

    def __call__(self) -> str:
        limit = self.limit
        first = f"; profiling for up to {limit:g} s first" if limit is not None else ""
        said = self.order.words(self.facts)
        return f"{self.name}: {said}; within the GPUs in its order{first}{self.where}"
