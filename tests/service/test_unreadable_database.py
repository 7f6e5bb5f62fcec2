"""A start that finds a database it cannot migrate says so in one sentence: which schema
version it found and what to do, exit status 2, no traceback (issue 30, finding 2).

The databases are made as each case arises: one stamped by a newer release, a file
that is not a database, and the two half-built states a kill during a first start
left before migrations were atomic (0005 recorded with 0006's column; tables but an
empty version table).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

import ilucid
from ilucid.service.db import migrate

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from serve_helpers import free_port, serve_command  # noqa: E402


def _sql(*statements: str) -> Callable[[Path], None]:
    def run(path: Path) -> None:
        migrate(f"sqlite:///{path}")
        with closing(sqlite3.connect(path)) as db:
            for statement in statements:
                db.execute(statement)
            db.commit()

    return run


def _garbage(path: Path) -> None:
    path.write_bytes(bytes(range(256)) * 32)


CASES: dict[str, tuple[Callable[[Path], None], list[str]]] = {
    "newer": (
        _sql("update alembic_version set version_num = '0999'"),
        ["schema version 0999", "newer than this ilucid knows", "run the ilucid release"],
    ),
    "corrupt": (
        _garbage,
        ["is not a database this ilucid can read", "restore it from a backup"],
    ),
    "half-built, a version behind its columns": (
        _sql("update alembic_version set version_num = '0005'"),
        ["half-built", "schema version 0005 recorded", "duplicate column name: stimulus"],
    ),
    "half-built, no version recorded": (
        _sql("delete from alembic_version"),
        ["half-built", "no schema version recorded", "table jobs already exists"],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_start_on_a_database_it_cannot_migrate_says_what_to_do(case: str, tmp_path: Path) -> None:
    make, expected = CASES[case]
    data = tmp_path / "data"
    data.mkdir()
    make(data / "ilucid.db")
    env = {**os.environ, "PYTHONPATH": str(Path(ilucid.__file__).resolve().parents[1])}
    done = subprocess.run(
        serve_command(data, free_port(), 1, 0.2),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    said = done.stderr.strip()
    assert done.returncode == 2, f"exit {done.returncode}: {said[-2000:]}"
    assert "Traceback" not in said and len(said.splitlines()) == 1, said
    assert said.startswith(f"ilucid: error: the database {data / 'ilucid.db'} ")
    for words in expected:
        assert words in said, said
    # nothing was changed: the operator's backup or a newer release still finds it as it was
    if case != "corrupt":
        with closing(sqlite3.connect(data / "ilucid.db")) as db:
            versions = db.execute("select version_num from alembic_version").fetchall()
        assert versions == {"newer": [("0999",)], "half-built, no version recorded": []}.get(
            case, [("0005",)]
        )
