"""Why a database cannot be brought to the newest schema, as the one sentence a start
prints: which schema version it found and what the operator can do.

Four cases: the file is no database ilucid can read (corrupt, or not SQLite); it is
at a version this ilucid does not know (written by a newer release); it is
half-built (a recorded version whose next migration finds its changes already
there, as a crash during the first start of a release whose migrations were not
atomic leaves it); or something around it failed (locked, read-only), which the
driver's own words say.
"""

from __future__ import annotations

from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import create_engine, inspect, make_url
from sqlalchemy.exc import DatabaseError, DBAPIError, OperationalError, SQLAlchemyError

__all__ = ["UnreadableDatabase", "explain"]

#: what SQLite and PostgreSQL say when a migration meets its own changes, or misses
#: a table or column an earlier one should have made
_HALF_BUILT = ("already exists", "duplicate column", "no such table", "no such column")


class UnreadableDatabase(Exception):
    """A database this ilucid cannot migrate; ``str()`` is one sentence for the operator."""


def _where(url: str) -> str:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database:
        return f"the database {parsed.database}"
    return f"the database {parsed.render_as_string(hide_password=True)}"


def _reason(error: BaseException) -> str:
    """The driver's own words, on one line, without SQLAlchemy's SQL and links."""
    if isinstance(error, DBAPIError) and error.orig is not None:
        error = error.orig
    return " ".join(str(error).split()).rstrip(".") or type(error).__name__


def _found(url: str) -> tuple[tuple[str, ...], bool] | SQLAlchemyError:
    """The versions recorded and whether any ilucid table exists, or why the database
    could not be read."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            heads = MigrationContext.configure(connection).get_current_heads()
            tables = set(inspect(connection).get_table_names()) - {"alembic_version"}
    except SQLAlchemyError as exc:
        return exc
    finally:
        engine.dispose()
    return tuple(heads), bool(tables)


def explain(url: str, script: ScriptDirectory, error: Exception) -> str:
    """The sentence for ``error``, raised while migrating the database at ``url``."""
    where, head = _where(url), script.get_current_head()
    found = _found(url)
    # the driver read the file and found no database in it (not: it could not get at it)
    if isinstance(found, DatabaseError) and not isinstance(found, OperationalError):
        return (
            f"{where} is not a database this ilucid can read ({_reason(found)}), so it has no"
            " schema version to find: restore it from a backup, or move it aside to start"
            " with an empty one"
        )
    if isinstance(found, SQLAlchemyError):
        return (
            f"{where} could not be read to find its schema version ({_reason(found)}): check"
            " that this user may open and write it and that no other process holds it"
            " locked, then start again"
        )
    heads, has_tables = found
    known = {revision.revision for revision in script.walk_revisions()}
    version = ", ".join(heads) if heads else "none"
    recorded = f"schema version {version} recorded" if heads else "no schema version recorded"
    unknown = [h for h in heads if h not in known]
    if unknown:
        return (
            f"{where} is at schema version {', '.join(unknown)}, newer than this ilucid knows"
            f" (its newest is {head}): run the ilucid release that upgraded it or a newer one,"
            " or restore a backup taken before that upgrade"
        )
    reason = _reason(error)
    if (
        has_tables
        and not isinstance(error, CommandError)
        and any(words in reason.lower() for words in _HALF_BUILT)
    ):
        return (
            f"{where} is half-built ({recorded}, yet migrating it to"
            f" {head} fails: {reason}), as a crash during the first start or upgrade of an"
            " ilucid release without atomic migrations leaves it: restore it from a backup,"
            " or, if it holds nothing to keep, remove it and start again"
        )
    return (
        f"{where} (schema version {version}) could not be migrated to {head} ({reason}):"
        " check that this user may open and write it and that no other process holds it"
        " locked, then start again"
    )
