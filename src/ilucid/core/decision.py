"""Decisions and the reasons they carry.

A reason pairs a short countable code (for machines and aggregation) with a
sentence (for people), in the way Kubernetes conditions pair reason and message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from ilucid.core.model import Placement

__all__ = ["Action", "Decision", "Reason", "ScorePart"]


class Action(StrEnum):
    START = "start"
    PREEMPT = "preempt"
    HOLD = "hold"


@dataclass(frozen=True, slots=True)
class Reason:
    """Why something happened or did not; ``numbers`` keep the figures behind the sentence."""

    code: str
    message: str
    numbers: Mapping[str, float] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True, slots=True)
class ScorePart:
    """One term of a placement score, so a placement can be explained term by term."""

    plugin: str
    value: float
    detail: str

    def __post_init__(self) -> None:
        # a term computed as -0 (nothing left over) reads as "-0"; it is zero
        object.__setattr__(self, "value", self.value + 0.0)

    def __str__(self) -> str:
        """``best-fit +0 (leaves 0 GPUs free there)``."""
        return f"{self.plugin} {self.value:+g} ({self.detail})"


@dataclass(frozen=True, slots=True)
class Decision:
    """What the core wants done with one job, and why.

    A driver acts on the typed fields; ``reasons`` (and their ``numbers``) are for people.
    """

    action: Action
    job_id: str
    placement: Placement | None = None
    reasons: tuple[Reason, ...] = ()
    score: tuple[ScorePart, ...] = ()
    #: run at most this long, then report (a profiling run); None = until done
    limit_s: float | None = None
    #: the running job whose GPUs this one shares (indolent packing)
    shares_with: str | None = None
    #: START in a paid pool: seconds of provisioning the job holds its GPUs without progress
    startup_s: float = 0.0
    #: PREEMPT: run time since the job's last checkpoint, to be redone
    lost_s: float = 0.0
    #: PREEMPT: seconds its restore will cost when it starts again
    overhead_s: float = 0.0

    def explain(self) -> str:
        text = f"{self.action.value} {self.job_id}"
        if self.reasons:
            text += ": " + "; ".join(r.message for r in self.reasons)
        return text
