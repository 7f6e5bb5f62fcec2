"""A job's progress as people see it: the API's fields, its history, and a sentence.

The core says how the progress became the job's estimate (``Scheduler.
progress_words``); these are the service's own words from the stored row, for a job
the core does not hold (ended, or held back for a retry) or whose rate it has not
measured yet.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ilucid.service.db import JobRow, ProgressRow
from ilucid.service.job_store import RUNNING

__all__ = ["history_json", "progress_json", "progress_sentence"]


def _left_s(row: JobRow) -> float | None:
    """Seconds left at the job's own rate (None: not running, or no rate yet)."""
    if row.state != RUNNING or not row.progress_rate or row.progress_step is None:
        return None
    return max(0.0, (row.progress_total or 0.0) - row.progress_step) / row.progress_rate


def progress_json(row: JobRow) -> dict[str, Any] | None:
    """``{step, total, fraction, rate_per_s, left_s, at}`` of its last report, or None."""
    if row.progress_step is None or not row.progress_total:
        return None
    return {
        "step": row.progress_step,
        "total": row.progress_total,
        "fraction": row.progress_step / row.progress_total,
        "rate_per_s": row.progress_rate,
        "left_s": _left_s(row),
        "at": row.progress_at,
    }


def _count(value: float) -> str:
    return f"{value:,.0f}" if value.is_integer() else f"{value:,.2f}"


def progress_sentence(row: JobRow) -> str | None:
    """E.g. ``3,412 s left: 48,800 of 50,000 steps to go at 14.3 steps/s (from the
    job's own progress)``; None when the job never reported."""
    if row.progress_step is None or not row.progress_total:
        return None
    step, total = row.progress_step, row.progress_total
    where = f"at step {_count(step)} of {_count(total)} ({step / total:.0%})"
    left = _left_s(row)
    if left is not None and row.progress_rate:
        to_go = _count(total - step)
        return (
            f"{left:,.0f} s left: {to_go} of {_count(total)} steps to go at"
            f" {row.progress_rate:,.1f} steps/s (from the job's own progress)"
        )
    if row.state != RUNNING:
        return f"its last progress report: {where}"
    return f"{where} (its own progress); its rate is measured from its next report"


def history_json(session: Session, job_id: str) -> list[dict[str, Any]]:
    """Its reports over time, oldest first: ``{at, step, total, gpu_type}``."""
    found = session.scalars(
        select(ProgressRow).where(ProgressRow.job_id == job_id).order_by(ProgressRow.id)
    )
    return [{"at": p.at, "step": p.step, "total": p.total, "gpu_type": p.gpu_type} for p in found]
