"""Every question a reconcile pass asks is answered from an index, not by reading every
job (issue 32): at 10,000 nodes one full read of the jobs table costs more than the
rest of the pass. Checked on SQLite's own plans, on a database at the newest schema."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.dialects import sqlite

from ilucid.service.db import make_engine, migrate
from ilucid.service.pass_queries import PASS_QUERIES

#: the index each question must use: one that holds few rows for it (the state's index
#: would list every running job; the launched ids come from their index alone)
EXPECTED = {
    "stopping jobs": "INDEX ix_jobs_stopping",
    "stopping job ids": "INDEX ix_jobs_stopping",
    "launched job ids": "COVERING INDEX ix_jobs_launched",
    "waiting launches": "INDEX ix_jobs_launched",
    "due profiling runs": "INDEX ix_jobs_profile_until",
}


def test_every_pass_question_has_an_expected_index() -> None:
    assert set(EXPECTED) == set(PASS_QUERIES)


@pytest.mark.parametrize("name", sorted(PASS_QUERIES))
def test_each_pass_question_is_answered_from_an_index(tmp_path: Path, name: str) -> None:
    url = f"sqlite:///{tmp_path / 'ilucid.db'}"
    migrate(url)
    engine = make_engine(url)
    compiled = PASS_QUERIES[name].compile(
        dialect=sqlite.dialect(), compile_kwargs={"literal_binds": True}
    )
    with engine.connect() as connection:
        plan = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}").fetchall()
    steps = [str(step[-1]) for step in plan]
    assert steps, name
    # "SCAN jobs" (with or without an index named after it) reads every row
    assert not any(step.startswith("SCAN jobs") for step in steps), (name, steps)
    assert any(f"USING {EXPECTED[name]} " in step for step in steps), (name, steps)
    engine.dispose()
