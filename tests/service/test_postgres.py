"""The service on a real PostgreSQL server (fixture in conftest.py)."""

from __future__ import annotations

import time
from pathlib import Path

from sqlalchemy import text

from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory
from ilucid.service.db import make_engine, migrate
from ilucid.service.job_store import JobRequest
from ilucid.service.scheduler_service import SchedulerService


def _newest_revision() -> str:
    """The head of the migration scripts shipped with the package."""
    from alembic.script import ScriptDirectory

    from ilucid.service.db import MIGRATIONS

    head = ScriptDirectory(str(MIGRATIONS)).get_current_head()
    assert head is not None and head >= "0006"  # at least the stimulus column
    return head


def test_migrations_and_a_job_on_postgresql(postgres_url: str, tmp_path: Path) -> None:
    migrate(postgres_url)
    engine = make_engine(postgres_url)
    with engine.connect() as connection:
        assert connection.execute(text("select version_num from alembic_version")).scalar() == (
            _newest_revision()
        )
    backend = LocalBackend(tmp_path, GpuInventory(1, "virtual", 0, "virtual"))
    service = SchedulerService(engine, backend)
    job = service.submit(JobRequest(["sh", "-c", "exit 0"], gpus=1, user="pg"))
    deadline = time.monotonic() + 15
    state = ""
    while time.monotonic() < deadline:
        service.reconcile()
        with engine.connect() as connection:
            state = connection.execute(
                text("select state from jobs where id = :id"), {"id": job}
            ).scalar_one()
        if state == "succeeded":
            break
        time.sleep(0.1)
    assert state == "succeeded"
    # a second service on the same database sees the same history (nothing lost)
    again = SchedulerService(engine, LocalBackend(tmp_path, GpuInventory(1, "virtual", 0, "v")))
    assert again.profile(job) == {"samples": 0}
    with engine.connect() as connection:
        transitions = (
            connection.execute(
                text("select to_state from transitions where job_id = :id order by id"), {"id": job}
            )
            .scalars()
            .all()
        )
    assert transitions == ["pending", "running", "running", "succeeded"]  # decided, launched
