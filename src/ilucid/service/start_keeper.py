"""Expected starts' outcomes kept across restarts (issue 37, docs/expected-starts.md).

The core learns how its expected starts miss from each job's first range and its
real start (:mod:`ilucid.core.start_range`). Kept only in memory, a restart would
answer from a threefold margin again until 30 jobs had started. Each pass stores
the outcomes it produced, in the transaction that records the starts; a restart
replays the newest :data:`REPLAYED`, oldest first, through the same code that
learned them.
"""

from __future__ import annotations

from sqlalchemy import delete, func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from ilucid.core.start_range import StartOutcome, StartRanges
from ilucid.service.db import StartOutcomeRow

__all__ = ["REPLAYED", "keep_outcomes", "restored_ranges"]

#: outcomes a restart replays: every window refilled several times over (400 each)
REPLAYED = 2000
#: rows kept in the table; older ones are deleted at a restart
KEPT = 4 * REPLAYED


def keep_outcomes(session: Session, ranges: StartRanges) -> None:
    """Add the outcomes the core produced since the last call to ``session``."""
    fresh = ranges.fresh
    if not fresh:
        return
    session.add_all(
        StartOutcomeRow(
            job_id=o.job_id,
            made_at=o.made,
            projected=o.projected,
            low=o.low,
            high=o.high,
            started=o.started,
        )
        for o in fresh
    )
    fresh.clear()


def restored_ranges(engine: Engine) -> StartRanges:
    """A calibration that has learned the newest stored outcomes again, keeping what
    the next passes produce for :func:`keep_outcomes`; older rows are pruned."""
    ranges = StartRanges()
    with Session(engine) as session:
        newest = session.scalar(select(func.max(StartOutcomeRow.id)))
        if newest is not None:
            session.execute(delete(StartOutcomeRow).where(StartOutcomeRow.id <= newest - KEPT))
            session.commit()
        rows = session.scalars(
            select(StartOutcomeRow).order_by(StartOutcomeRow.id.desc()).limit(REPLAYED)
        ).all()
        for row in reversed(rows):
            ranges.learn(
                StartOutcome(row.job_id, row.made_at, row.projected, row.low, row.high, row.started)
            )
    ranges.fresh = []
    return ranges
