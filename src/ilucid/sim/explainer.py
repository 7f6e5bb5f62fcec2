"""``--explain JOB``: one job's story through a replay, told by an observer.

The replay calls the explainer at each pass and at the moments only it sees (a
profiling run ending, a start time predicted); the explainer keeps the story
(what happened, when, and why these nodes) and how long each reason kept the job
waiting, summed between passes. Nothing here changes a decision.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ilucid.core import Action, Decision, JobSpec, Placement, ProfileReport, Scheduler
from ilucid.core.start_range import StartRange, range_words

__all__ = ["Explainer", "merged_waits"]

#: the queue position changes every pass: waits are summed without it
_POSITION = re.compile(r" \(position \d+ in [\w-]+ order\)")
#: a count in a reason (``13``, ``1,800``, ``0.5``), never part of a name (node0, syn-000215)
_SLOT = "\0"  # where a count stood (no sentence holds a NUL)
_NUMBER = re.compile(r"(?<![\w.,-])\d+(?:[.,]\d+)*(?![\w-])")
#: which jobs are ahead, and why the first of them waits, change at every event: a wait's
#: summary keeps how many were ahead (the story has the rest)
_AHEAD = re.compile(r"(ahead of it in its order first): .*$")


def merged_waits(waits: dict[str, float]) -> list[tuple[str, float]]:
    """The reasons a job waited, those that differ only in their counts merged into one
    line with each count's range (``8-13 GPUs are free but on 2 nodes``) and their
    seconds summed; longest wait first."""
    groups: dict[str, list[tuple[str, float]]] = {}
    for said, seconds in waits.items():
        reason = _AHEAD.sub(r"\1", said)
        groups.setdefault(_NUMBER.sub(_SLOT, reason), []).append((reason, seconds))
    merged = []
    for template, members in groups.items():
        total = sum(seconds for _, seconds in members)
        if len(members) == 1:
            merged.append((members[0][0], total))
            continue
        counts = [[float(n.replace(",", "")) for n in _NUMBER.findall(r)] for r, _ in members]
        ranges = [_span(list(slot)) for slot in zip(*counts, strict=True)]
        words = template.split(_SLOT)
        said = words[0] + "".join(a + b for a, b in zip(ranges, words[1:], strict=True))
        merged.append((said, total))
    return sorted(merged, key=lambda item: -item[1])


def _span(values: list[float]) -> str:
    """``8`` when every member said 8, else ``8-13``."""
    low, high = min(values), max(values)
    return _count(low) if low == high else f"{_count(low)}-{_count(high)}"


def _count(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) else f"{value:,}"


def _cpu_only(scheduler: Scheduler, placement: Placement) -> str:
    """A job without GPUs starts with no GPU choice to explain."""
    names = ", ".join(scheduler.cluster.nodes[i].name for i in placement.node_indices)
    return f"CPU-only: no GPUs, on node {names}" if names else "CPU-only: it uses no GPUs"


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
                if spec.num_gpus <= 0:  # no GPU choice to explain
                    self.story.append((now, _cpu_only(scheduler, decision.placement)))
                    continue
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

    def on_predicted(self, position: int | None, expected: StartRange, now: float) -> None:
        self.story.append(
            (
                now,
                f"queued at position {position}; expected to start at"
                f" t={expected.median:,.0f},"
                f" {range_words(expected.median, expected.low, expected.high, now)}",
            )
        )
