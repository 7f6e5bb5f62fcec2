"""Decisions and the reasons they carry.

A reason pairs a short countable code (for machines and aggregation; one of
:class:`~ilucid.core.reason_codes.ReasonCode`) with a sentence (for people), in the
way Kubernetes conditions pair reason and message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import FrozenInstanceError, dataclass
from enum import StrEnum

from ilucid.core.model import Placement
from ilucid.core.picklable import picklable
from ilucid.core.reason_codes import ReasonCode

__all__ = ["Action", "Decision", "Reason", "ScorePart", "Words", "written"]


class Action(StrEnum):
    START = "start"
    PREEMPT = "preempt"
    HOLD = "hold"


#: a sentence, or a function that writes it when it is first read. A replay makes
#: 200,000 decisions and reads few of their sentences; a function must take the numbers
#: it writes when the decision is made (the job moves on), and only format them later.
Words = str | Callable[[], str]


def written(words: Words) -> str:
    """The sentence ``words`` stands for."""
    return words if isinstance(words, str) else words()


class Reason:
    """Why something happened or did not; ``numbers`` keep the figures behind the sentence.

    Immutable, compared by code, message and numbers; ``message`` may be given as
    :data:`Words` and is written once, when first read."""

    __slots__ = ("_message", "code", "numbers")

    code: ReasonCode
    numbers: Mapping[str, float]
    _message: Words

    def __init__(
        self, code: ReasonCode, message: Words, numbers: Mapping[str, float] | None = None
    ) -> None:
        object.__setattr__(self, "code", code)
        object.__setattr__(self, "_message", message)
        object.__setattr__(self, "numbers", {} if numbers is None else numbers)

    @property
    def message(self) -> str:
        message = self._message
        if not isinstance(message, str):
            message = message()
            object.__setattr__(self, "_message", message)
        return message

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Reason):
            return NotImplemented
        return (self.code, self.message, self.numbers) == (other.code, other.message, other.numbers)

    def __hash__(self) -> int:
        return hash((self.code, self.message))

    def __reduce__(self) -> tuple[type[Reason], tuple[ReasonCode, str, dict[str, float]]]:
        return (Reason, (self.code, self.message, dict(self.numbers)))

    def __repr__(self) -> str:
        # the code as its value (``'Scheduled'``), as it is stored and shown
        return (
            f"Reason(code={str(self.code)!r}, message={self.message!r}, numbers={self.numbers!r})"
        )

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

    def __init__(
        self,
        action: Action,
        job_id: str,
        placement: Placement | None = None,
        reasons: tuple[Reason, ...] = (),
        score: tuple[ScorePart, ...] = (),
        limit_s: float | None = None,
        shares_with: str | None = None,
        startup_s: float = 0.0,
        lost_s: float = 0.0,
        overhead_s: float = 0.0,
    ) -> None:  # written out: one per start and preemption (see JobSpec.__init__)
        object.__setattr__(self, "action", action)
        object.__setattr__(self, "job_id", job_id)
        object.__setattr__(self, "placement", placement)
        object.__setattr__(self, "reasons", reasons)
        object.__setattr__(self, "score", score)
        object.__setattr__(self, "limit_s", limit_s)
        object.__setattr__(self, "shares_with", shares_with)
        object.__setattr__(self, "startup_s", startup_s)
        object.__setattr__(self, "lost_s", lost_s)
        object.__setattr__(self, "overhead_s", overhead_s)

    def with_reason(self, reason: Reason) -> Decision:
        """This decision with one more reason (built directly: ``dataclasses.replace``
        cost an eighth of a cold pass that names the jobs each start displaced)."""
        return Decision(
            self.action,
            self.job_id,
            self.placement,
            (*self.reasons, reason),
            self.score,
            self.limit_s,
            self.shares_with,
            self.startup_s,
            self.lost_s,
            self.overhead_s,
        )

    def explain(self) -> str:
        text = f"{self.action.value} {self.job_id}"
        if self.reasons:
            text += ": " + "; ".join(r.message for r in self.reasons)
        return text


picklable(ScorePart, Decision)
