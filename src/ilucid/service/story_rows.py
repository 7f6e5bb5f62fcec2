"""Story lines (``transitions`` rows) written in bulk when their transaction flushes.

A reconcile pass at 10,000 nodes moves hundreds of jobs, two or three story lines
each. As ORM objects each line costs an object, its identity and its own returned
key; nothing ever reads them back as objects, so they wait on the session as plain
values and go in with one multi-row insert when the session flushes (after the job
rows they point to, which the same flush writes). A transaction that ends without a
commit drops them, as it drops everything else.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event, insert
from sqlalchemy.orm import Session, SessionTransaction

from ilucid.service.db import TransitionRow

__all__ = ["add_story_line"]

#: ``session.info`` key of the story lines waiting for the session's next flush
_WAITING = "ilucid.story_lines"


def add_story_line(session: Session, values: dict[str, Any]) -> None:
    """Store one ``transitions`` row with the session's next flush (or its commit)."""
    waiting: list[dict[str, Any]] | None = session.info.get(_WAITING)
    if waiting is None:
        waiting = session.info[_WAITING] = []
        event.listen(session, "after_flush", _write_after_flush)
        event.listen(session, "before_commit", _write_before_commit)
        event.listen(session, "after_transaction_end", _drop)
    waiting.append(values)


def _write_after_flush(session: Session, _context: Any) -> None:
    _write(session)


def _write_before_commit(session: Session) -> None:
    """The job rows first (their flush writes the lines after them), then any line left
    (a flush with nothing else to write does not run)."""
    session.flush()
    _write(session)


def _write(session: Session) -> None:
    """Insert what waits, in one statement."""
    waiting: list[dict[str, Any]] = session.info.get(_WAITING, [])
    if waiting:
        rows, waiting[:] = list(waiting), []
        session.connection().execute(insert(TransitionRow), rows)


def _drop(session: Session, transaction: SessionTransaction) -> None:
    """The outermost transaction ended: a rollback forgets what waited."""
    if transaction.parent is None:
        session.info.get(_WAITING, []).clear()
