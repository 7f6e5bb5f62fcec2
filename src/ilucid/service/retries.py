"""Retries of a job whose launch failed or whose process vanished without an exit.

Such a job is retried after a backoff: 10 s before its first retry, 20 s before
the second, ``10 * 2**(n-1)`` s before the n-th, up to its ``max_retries`` (the
job's own, else the service's); the next failure records it ``failed`` with a
sentence that lists every attempt and its cause. Preemptions are the scheduler's
own doing: they requeue without limit and never count as attempts.

The core has no clock, so the backoff lives here: a job waiting for its retry is
taken out of the core's books (requeued, then withdrawn), stored ``pending`` with
its ``retry_at``, and submitted back by the first pass at or after that time. A
restart holds it back again until then. Each attempt's cause is the reason of its
stored transition (stimulus ``vanished`` or ``launch failed``), read back for the
final sentence and for ``explain``.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from ilucid.core import JobStatus, Scheduler
from ilucid.service.db import JobRow, TransitionRow
from ilucid.service.job_store import FAILED, PENDING, JobStore, MoveDetail, spec_of
from ilucid.service.lifecycle import Cause, Phase, Stimulus
from ilucid.service.running_sentence import clock, span

__all__ = [
    "BACKOFF_S",
    "DEFAULT_MAX_RETRIES",
    "Attempt",
    "Retries",
    "Wait",
    "attempts_of",
    "backoff_s",
]

logger = logging.getLogger(__name__)

#: the wait before the first retry; each later one waits twice the one before
BACKOFF_S = 10.0
#: retries a job allows when neither it nor ``ilucid serve --max-retries`` says
DEFAULT_MAX_RETRIES = 3
#: the stimuli of a failed attempt
CAUSES = (Stimulus.VANISHED.value, Stimulus.LAUNCH_FAILED.value)
_RETRY_NOTE = re.compile(r"; retry \d+ of \d+ at [^;]*$")
_LAST_OF_FINAL = re.compile(
    r"^failed after \d+ retr(?:y|ies): .*attempt \d+ at (?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d (.*)$",
    re.DOTALL,
)


def backoff_s(retry: int) -> float:
    """Seconds to wait before the ``retry``-th retry (1: the first)."""
    return BACKOFF_S * float(2 ** (retry - 1))


def _what(stimulus: str, cause: str) -> str:
    return f"vanished: {cause}" if stimulus == Stimulus.VANISHED.value else cause


@dataclass(frozen=True, slots=True)
class Attempt:
    """One failed attempt: when it failed and why (``vanished: ...``, ``could not be
    launched: ...``)."""

    time: float
    cause: str

    def sentence(self, number: int, now: float) -> str:
        return f"attempt {number} at {clock(self.time, now)} {self.cause}"


@dataclass(frozen=True, slots=True)
class Wait:
    """A job held out of the queue until its retry is due."""

    retry_at: float
    retry: int  # which retry this is (1: the first)
    of: int  # retries the job allows
    after: str  # the cause of the attempt that failed

    def sentence(self, now: float) -> str:
        left = max(0.0, self.retry_at - now)
        return (
            f"pending, held back for its retry: retry {self.retry} of {self.of} at"
            f" {clock(self.retry_at, now)} (in {span(left)}) after: {self.after}"
        )


def attempts_of(session: Session, job_id: str) -> list[Attempt]:
    """The job's failed attempts (launch failures and vanishes), oldest first."""
    moves = session.scalars(
        select(TransitionRow)
        .where(TransitionRow.job_id == job_id, TransitionRow.stimulus.in_(CAUSES))
        .order_by(TransitionRow.id)
    )
    attempts = []
    for move in moves:
        last = _LAST_OF_FINAL.match(move.reason) if move.to_state == FAILED else None
        if last is not None:  # the final sentence ends with this attempt's own cause
            attempts.append(Attempt(move.time, last.group(1)))
        else:
            attempts.append(
                Attempt(move.time, _what(move.stimulus, _RETRY_NOTE.sub("", move.reason)))
            )
    return attempts


def take_out_of_core(scheduler: Scheduler, job_id: str, now: float) -> None:
    """Free what the core holds for the job and drop it from the queue until its retry."""
    state = scheduler.jobs.get(job_id)
    if state is None:  # adopted outside the core's books
        return
    if state.status is JobStatus.RUNNING:
        try:
            scheduler.requeue(job_id, now)
        except ValueError:  # a packed job leaves its GPUs to its partner
            scheduler.finish(job_id, now)
            return
    if job_id in scheduler.jobs and scheduler.jobs[job_id].status is JobStatus.PENDING:
        scheduler.withdraw(job_id, now)


class Retries:
    """The jobs waiting for a retry (``waiting``) and the rule that holds them back.

    ``max_retries``: the service's default for jobs that give none."""

    def __init__(self, store: JobStore, max_retries: int = DEFAULT_MAX_RETRIES) -> None:
        self.store = store
        self.max_retries = max_retries
        self.waiting: dict[str, Wait] = {}

    def limit(self, row: JobRow) -> int:
        return self.max_retries if row.max_retries is None else row.max_retries

    def failed(
        self, session: Session, row: JobRow, stimulus: Cause, cause: str, now: float
    ) -> bool:
        """A failed attempt of ``row`` (to be taken out of the core's books by the caller):
        held back for its retry (True), or, with no retry left, recorded ``failed``."""
        limit = self.limit(row)
        retry = row.attempts + 1
        kind = stimulus.kind.value
        if retry > limit:
            reason = cause
            if row.attempts:
                earlier = attempts_of(session, row.id)[-row.attempts :]
                every = [*earlier, Attempt(now, _what(kind, cause))]
                listed = "; ".join(a.sentence(n, now) for n, a in enumerate(every, 1))
                many = "retry" if row.attempts == 1 else "retries"
                reason = f"failed after {row.attempts} {many}: {listed}"
            self.store.transition(session, row, Phase.FAILED, stimulus, reason)
            return False
        retry_at = now + backoff_s(retry)
        note = f"{cause}; retry {retry} of {limit} at {clock(retry_at, now)}"
        detail = MoveDetail(retry_at=retry_at)
        self.store.transition(session, row, Phase.PENDING, stimulus, note, detail)
        self.waiting[row.id] = Wait(retry_at, retry, limit, _what(kind, cause))
        return True

    def release_due(self, session: Session, scheduler: Scheduler, now: float) -> None:
        """Jobs whose retry is due go back to the core's queue (in their submission order)."""
        for job_id, wait in sorted(self.waiting.items()):
            if wait.retry_at > now:
                continue
            del self.waiting[job_id]
            row = session.get(JobRow, job_id)
            if row is None or row.state != PENDING:
                continue
            self.store.clear_retry(row)
            self.submit(scheduler, row)

    def held_at_restart(self, session: Session, row: JobRow, now: float) -> bool:
        """At a rebuild: whether the pending ``row`` still waits for its retry (then it
        stays out of the new core); one whose time has come is released."""
        if row.retry_at is None:
            return False
        if row.retry_at <= now:
            self.store.clear_retry(row)
            return False
        attempts = attempts_of(session, row.id)
        after = attempts[-1].cause if attempts else "a failed attempt"
        self.waiting[row.id] = Wait(row.retry_at, row.attempts, self.limit(row), after)
        return True

    @staticmethod
    def submit(scheduler: Scheduler, row: JobRow) -> None:
        try:
            scheduler.submit(spec_of(row), row.submit_time)
        except ValueError as exc:  # the cluster shrank below it: kept, never lost
            logger.warning(
                "ilucid serve: %s stays pending outside the queue until the cluster"
                " can hold it: %s",
                row.id,
                exc,
                extra={"job_id": row.id},
            )
