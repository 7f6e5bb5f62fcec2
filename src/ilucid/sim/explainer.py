"""``--explain JOB``: one job's story through a replay, told by an observer.

The replay calls the explainer at each pass and at the moments only it sees (a
profiling run ending, a start time predicted); the explainer keeps the story
(what happened, when, and why these nodes) and how long each reason kept the job
waiting, summed between passes. Nothing here changes a decision.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ilucid.core import Action, Decision, JobSpec, ProfileReport, Scheduler

__all__ = ["Explainer"]

#: the queue position changes every pass: waits are summed without it
_POSITION = re.compile(r" \(position \d+ in [\w-]+ order\)")


class Explainer:
    """Follows ``job_id`` through a replay (see :meth:`on_pass`)."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        self.story: list[tuple[float, str]] = []
        self.waits: dict[str, float] = {}  # why it waited -> seconds
        self._last_reason: tuple[float, str] | None = None

    def on_pass(
        self, scheduler: Scheduler, spec: JobSpec | None, decisions: Sequence[Decision], now: float
    ) -> None:
        """After a scheduling pass: the decisions on the job, why these nodes, and why
        it still waits (if it does)."""
        if self._last_reason is not None:
            since, reason = self._last_reason
            self.waits[reason] = self.waits.get(reason, 0.0) + now - since
            self._last_reason = None
        for decision in decisions:
            if decision.job_id != self.job_id:
                continue
            self.story.append((now, decision.explain()))
            if decision.action is Action.START and decision.placement is not None:
                assert spec is not None
                parts = scheduler.placer.explain(spec, decision.placement, scheduler.free)
                terms = "; ".join(f"{p.plugin} {p.value:+g} ({p.detail})" for p in parts)
                self.story.append((now, "why these nodes: " + terms))
        state = scheduler.jobs.get(self.job_id)
        if state is not None and state.status.value == "pending":
            sentence = scheduler.why_pending(self.job_id, now)
            self._last_reason = (now, _POSITION.sub("", sentence))

    def on_profiled(self, report: ProfileReport, now: float) -> None:
        self.story.append(
            (
                now,
                f"left the profiler: sharing score {report.sharing_score},"
                f" {report.gpu_memory_gb or 0:.1f} GB; {report.note}",
            )
        )

    def on_predicted(self, position: int | None, expected: float, now: float) -> None:
        self.story.append(
            (
                now,
                f"queued at position {position}; expected to start at"
                f" t={expected:,.0f} (in {expected - now:,.0f} s)",
            )
        )
