"""Alembic environment: runs ilucid's migrations against the configured URL.

Each migration and its version stamp commit together or not at all
(``transaction_per_migration``), so a crash at any moment leaves the database
at the last revision whose changes are all there, and the next start carries
on from it. PostgreSQL has transactional DDL; on SQLite the ``sqlite3`` driver
commits before every DDL statement unless told otherwise, so the migration
engine turns the driver's own transaction handling off and emits ``BEGIN
IMMEDIATE`` itself (SQLAlchemy's recipe for pysqlite's transactional DDL).
IMMEDIATE: a second start at the same moment waits for the write lock, then
reads what the first one committed (``db.migrate`` retries once if it had already
planned a migration the other ran).

Every step of every migration passes a crash point (:mod:`ilucid.service.faults`),
for whichever revisions exist, so a test can kill the process exactly there.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from alembic import context
from alembic.runtime.migration import MigrationContext, MigrationInfo
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, event

from ilucid.service.db import Base
from ilucid.service.faults import crash_point, migration_point

config = context.config
target_metadata = Base.metadata


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        transaction_per_migration=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _migration_engine(url: str) -> Engine:
    """An engine whose transactions hold DDL: SQLite's driver may emit no BEGIN or
    COMMIT of its own, each transaction starts with ``BEGIN IMMEDIATE``."""
    engine = create_engine(url)
    if engine.dialect.name != "sqlite":
        return engine

    @event.listens_for(engine, "connect")
    def _no_driver_transactions(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


class _CrashPoints:
    """Puts the crash points of :data:`~ilucid.service.faults.MIGRATION_STEPS` around
    each migration: ``before`` and ``after-ddl`` around its ``upgrade()``, ``stamped``
    once Alembic has written its version, ``committed`` when the next transaction
    begins or the run ends."""

    def __init__(self, script: ScriptDirectory) -> None:
        self.stamped: str | None = None
        for revision in script.walk_revisions():
            functions = vars(revision.module)  # this run's copy of the migration's module
            if not getattr(functions["upgrade"], "_ilucid_crash_points", False):
                functions["upgrade"] = self._around(revision.revision, functions["upgrade"])

    @staticmethod
    def _around(revision: str, upgrade: Callable[[], None]) -> Callable[[], None]:
        def with_points() -> None:
            crash_point(migration_point(revision, "before"))
            upgrade()
            crash_point(migration_point(revision, "after-ddl"))

        with_points._ilucid_crash_points = True  # type: ignore[attr-defined]
        return with_points

    def on_version_apply(
        self,
        ctx: MigrationContext,
        step: MigrationInfo,
        heads: Collection[Any],
        run_args: Mapping[str, Any],
    ) -> None:
        revision = str(step.up_revision_id)
        crash_point(migration_point(revision, "stamped"))
        self.stamped = revision

    def transaction_ended(self, *_: Any) -> None:
        if self.stamped is not None:
            revision, self.stamped = self.stamped, None
            crash_point(migration_point(revision, "committed"))


def run_migrations_online() -> None:
    url = config.get_main_option("sqlalchemy.url")
    assert url is not None
    engine = _migration_engine(url)
    points = _CrashPoints(context.script)
    # first: the previous migration is committed, the next BEGIN not yet emitted
    event.listen(engine, "begin", points.transaction_ended, insert=True)
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            transaction_per_migration=True,
            # true of SQLite too on this engine: Alembic then opens one transaction
            # per migration that holds both its DDL and its version stamp
            transactional_ddl=True,
            on_version_apply=points.on_version_apply,
        )
        with context.begin_transaction():
            context.run_migrations()
        points.transaction_ended()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
