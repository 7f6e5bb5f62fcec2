"""Story lines written in bulk at the flush (issue 32) keep the guarantees of the ORM
rows they replace: in the job's transaction, after the job row they point to, gone
with a rollback, and visible to a query in the same transaction."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ilucid.service.db import JobRow, TransitionRow, make_engine, migrate
from ilucid.service.story_rows import add_story_line


def _engine(tmp_path: Path):  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'ilucid.db'}"
    migrate(url)
    return make_engine(url)


def _job(job_id: str) -> JobRow:
    return JobRow(
        id=job_id, user="u", tenant="t", job_class="training", gpus=1, command="[]",
        state="pending", submit_time=1.0, gpu_indices="", preemptions=0, priority=0,
        attempts=0,
    )  # fmt: skip


def _line(job_id: str, to: str) -> dict[str, object]:
    return {
        "job_id": job_id, "time": 2.0, "from_state": "", "to_state": to, "reason": "r",
        "stimulus": "submit", "stimulus_id": "s", "from_phase": "", "to_phase": to,
    }  # fmt: skip


def _lines(engine, job_id: str) -> int:  # type: ignore[no-untyped-def]
    with Session(engine) as session:
        query = select(func.count()).where(TransitionRow.job_id == job_id)
        return int(session.scalar(query) or 0)


def test_a_new_jobs_lines_go_in_after_its_row_in_one_commit(tmp_path: Path) -> None:
    engine = _engine(tmp_path)  # foreign keys are on: a line before its job would fail
    with Session(engine) as session:
        session.add(_job("j1"))
        add_story_line(session, _line("j1", "pending"))
        add_story_line(session, _line("j1", "running"))
        session.commit()
    assert _lines(engine, "j1") == 2


def test_a_query_in_the_same_transaction_sees_the_lines(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    with Session(engine) as session:
        session.add(_job("j1"))
        add_story_line(session, _line("j1", "pending"))
        count = session.scalar(select(func.count()).where(TransitionRow.job_id == "j1"))
        assert count == 1  # the autoflush wrote them
        session.commit()
    assert _lines(engine, "j1") == 1


def test_a_rollback_drops_the_lines_written_and_waiting(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    with Session(engine) as session:
        session.add(_job("j1"))
        session.commit()
        row = session.get(JobRow, "j1")
        assert row is not None
        row.state = "running"
        add_story_line(session, _line("j1", "running"))
        session.flush()  # one line in the transaction
        add_story_line(session, _line("j1", "succeeded"))  # one waiting
        session.rollback()
        session.commit()  # nothing left to write
    assert _lines(engine, "j1") == 0


def test_lines_without_any_other_change_still_commit(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    with Session(engine) as session:
        session.add(_job("j1"))
        session.commit()
        add_story_line(session, _line("j1", "pending"))  # no row changed: no flush runs
        session.commit()
    assert _lines(engine, "j1") == 1


def test_a_line_for_no_job_fails_the_commit(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    with Session(engine) as session, pytest.raises(Exception, match="FOREIGN KEY"):
        add_story_line(session, _line("nobody", "pending"))
        session.commit()
