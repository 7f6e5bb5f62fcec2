"""Log lines about what a transaction stores, written once it has committed.

A job's move is made inside the caller's transaction; logged at once, a transaction
rolled back afterwards (a submission whose id another replica took, a crash) would
leave a log line for a move that never happened. So the line waits on the session
and is written by its commit, or dropped when the transaction ends otherwise.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session, SessionTransaction

__all__ = ["log_after_commit"]

#: ``session.info`` key of the lines waiting for the session's commit
_WAITING = "ilucid.log_after_commit"

_Line = tuple[logging.Logger, int, str, tuple[Any, ...], dict[str, Any]]


def log_after_commit(
    session: Session,
    logger: logging.Logger,
    level: int,
    message: str,
    *args: Any,
    extra: dict[str, Any] | None = None,
) -> None:
    """``logger.log(level, message, *args, extra=extra)`` once ``session`` commits
    (nothing when it rolls back); free when ``logger`` would not show ``level``."""
    if not logger.isEnabledFor(level):
        return
    waiting: list[_Line] | None = session.info.get(_WAITING)
    if waiting is None:
        waiting = session.info[_WAITING] = []
        event.listen(session, "after_commit", _write)
        event.listen(session, "after_transaction_end", _drop)
    waiting.append((logger, level, message, args, extra or {}))


def _write(session: Session) -> None:
    waiting: list[_Line] = session.info.get(_WAITING, [])
    lines, waiting[:] = list(waiting), []
    for logger, level, message, args, extra in lines:
        logger.log(level, message, *args, extra=extra)


def _drop(session: Session, transaction: SessionTransaction) -> None:
    """The outermost transaction ended without a commit (a commit wrote them already)."""
    if transaction.parent is None:
        session.info.get(_WAITING, []).clear()
