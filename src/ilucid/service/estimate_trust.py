"""How much a user's stated run times count, measured on that user's own ended jobs.

A stated estimate (``estimate_s``) is blended with the duration model's by a weight
w in [0, 1] (:mod:`ilucid.core.stated_estimate`). w follows the user's record,
walk-forward as the model's history: only jobs that ended before a submission count
for it. A job is *accurate* when it ran within 2x of its statement (between half and
twice it), its run time being end minus first start, as the duration model measures
it. Over the user's last :data:`WINDOW` such jobs, by Laplace's rule of succession::

    w = (accurate + 1) / (jobs + 2)

A user without a record gets 1/2 (:data:`PRIOR`): a statement is informative on
average, and what a false one can buy is bounded anyway, since the core drops a claim
the job has outlived (it keeps the rank its statement bought for the seconds it
claimed, once). Three accurate jobs make it 80%, three wrong ones 20%; 20 wrong ones
in a row 5%. The window lets a user who mends their ways recover.

The weight is written into the job's estimate note at submission, as a percentage
(what explain shows is what was used), and read back from it when the core's view of
the job is built (:func:`weight_of`): the blend of a stored job never changes, across
restarts too, and a note without one (a user with no record yet) means the prior.
The book is kept in memory, filled once from the database at start and updated as
jobs end, so a submission never scans history.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from ilucid.core.stated_estimate import MIN_ESTIMATE_S
from ilucid.service.db import JobRow

__all__ = [
    "PRIOR",
    "WINDOW",
    "WITHIN",
    "Trust",
    "TrustBook",
    "stated_history",
    "stated_of",
    "weight_of",
    "why_of",
]

#: scored jobs per user that decide the weight (the most recent)
WINDOW = 20
#: a job is accurate when it ran within this factor of its statement, either way
WITHIN = 2.0
#: the weight of a user with no record: Laplace's 1 in 2
PRIOR = 0.5
#: what starts the weight's clause in an estimate note (read back by :func:`weight_of`)
_MARK = "; stated estimates by this user count "


@dataclass(frozen=True, slots=True)
class Trust:
    """A user's record: accurate jobs of the last ``jobs`` scored."""

    accurate: int = 0
    jobs: int = 0

    @property
    def weight(self) -> float:
        """Laplace's rule of succession, rounded to the percent the note shows."""
        return round(100.0 * (self.accurate + 1) / (self.jobs + 2)) / 100.0

    def why(self) -> str:
        if not self.jobs:
            return "no ended job with a stated estimate yet"
        last = "ended job" if self.jobs == 1 else f"{self.jobs} ended jobs"
        return (
            f"{self.accurate} of the last {last} with a stated estimate ran within"
            f" {WITHIN:g}x of it"
        )

    def note(self) -> str:
        """The clause appended to an estimate note: the weight, then why."""
        return f"{_MARK}{self.weight:.0%}: {self.why()}"


def accurate(stated: float, ran: float) -> bool:
    """Whether a job that ran ``ran`` s was within :data:`WITHIN` x of its statement."""
    stated = max(stated, MIN_ESTIMATE_S)
    return stated / WITHIN <= ran <= stated * WITHIN


class TrustBook:
    """Each user's last :data:`WINDOW` scored jobs, in the order they ended; thread-safe
    (submissions read it outside the service's lock)."""

    def __init__(self, window: int = WINDOW) -> None:
        if window < 1:
            raise ValueError(f"window must be at least 1 job, not {window}")
        self.window = window
        self._marks: dict[str, deque[bool]] = {}
        self._accurate: dict[str, int] = {}
        self._lock = threading.Lock()

    def observe(self, user: str, stated: float, ran: float) -> None:
        """A job of ``user`` that stated ``stated`` s ended after running ``ran`` s."""
        hit = accurate(stated, ran)
        with self._lock:
            marks = self._marks.get(user)
            if marks is None:
                marks = self._marks[user] = deque(maxlen=self.window)
            count = self._accurate.get(user, 0)
            if len(marks) == self.window and marks[0]:
                count -= 1  # the oldest leaves the window
            marks.append(hit)
            self._accurate[user] = count + hit

    def trust(self, user: str) -> Trust:
        with self._lock:
            marks = self._marks.get(user)
            if not marks:
                return Trust()
            return Trust(self._accurate[user], len(marks))

    def note(self, user: str) -> str:
        """The clause for a submission's estimate note; "" for a user with no record
        (whose weight is :data:`PRIOR`, which a note without a clause means)."""
        trust = self.trust(user)
        return trust.note() if trust.jobs else ""


def stated_history(session: Session) -> Iterator[tuple[str, float, float]]:
    """``(user, stated, ran)`` of every scored job, in the order they ended (what
    :class:`TrustBook` is filled from at start): each succeeded job with a statement,
    and each failed or cancelled one that ran past :data:`WITHIN` x its statement (an
    owner cannot hide an overrun by cancelling it)."""
    query = (
        select(JobRow.user, JobRow.state, JobRow.estimate_s, JobRow.first_start, JobRow.end_time)
        .where(
            JobRow.state.in_(("succeeded", "failed", "cancelled")),
            JobRow.estimate_s.is_not(None),
            JobRow.first_start.is_not(None),
            JobRow.end_time.is_not(None),
        )
        .order_by(JobRow.end_time, JobRow.id)
    )
    for user, state, stated, start, end in session.execute(query):
        if stated is None or start is None or end is None:
            continue  # the query's filter, for the type checker
        ran = max(0.0, end - start)
        if state == "succeeded" or overran(stated, ran):
            yield user, stated, ran


def overran(stated: float, ran: float) -> bool:
    """Whether a job ran past :data:`WITHIN` x its statement (scored however it ended)."""
    return ran > max(stated, MIN_ESTIMATE_S) * WITHIN


def stated_of(estimate_s: float | None) -> float | None:
    """A stored statement as the core takes it: at least 1 s (rows accepted before the
    edge refused shorter ones, or a cluster manager's annotation, may hold less)."""
    return None if estimate_s is None else max(estimate_s, MIN_ESTIMATE_S)


def _clause(note: str | None) -> str | None:
    if not note:
        return None
    at = note.rfind(_MARK)
    return None if at < 0 else note[at + len(_MARK) :]


def weight_of(note: str | None) -> float:
    """The weight written into an estimate note at submission; :data:`PRIOR` without one."""
    clause = _clause(note)
    if clause is None:
        return PRIOR
    percent, sign, _ = clause.partition("%")
    try:
        value = float(percent)
    except ValueError:
        return PRIOR
    return min(1.0, max(0.0, value / 100.0)) if sign else PRIOR


def why_of(note: str | None) -> str:
    """Why the statement counted what it did, as the note says it (or the prior's why)."""
    clause = _clause(note)
    if clause is None:
        return Trust().why()
    _, _, why = clause.partition(": ")
    return why or Trust().why()
