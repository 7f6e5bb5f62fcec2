"""Persistent state of the service: jobs, their transitions, decisions, tokens, models.

SQLAlchemy 2.0 models; the schema is created and upgraded by Alembic
migrations (``ilucid/service/migrations``), never by ``create_all``. SQLite
(the default, a file in the data directory) runs in WAL mode so the API and
the reconcile loop read while the other writes; PostgreSQL is used by URL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import (
    Boolean,
    Engine,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    true,
)
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from ilucid.service.unreadable import UnreadableDatabase, explain

__all__ = [
    "Base",
    "CloudLedgerRow",
    "DecisionRow",
    "DynamicUidRow",
    "EstimatorVersion",
    "JobRow",
    "ModelRow",
    "ProgressRow",
    "SampleRow",
    "StartOutcomeRow",
    "TokenRow",
    "TransitionRow",
    "make_engine",
    "migrate",
]

MIGRATIONS = Path(__file__).with_name("migrations")


class Base(DeclarativeBase):
    pass


class JobRow(Base):
    __tablename__ = "jobs"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    user: Mapped[str] = mapped_column(String(128), index=True)
    tenant: Mapped[str] = mapped_column(String(128), index=True)
    job_class: Mapped[str] = mapped_column(String(32))
    gpus: Mapped[int] = mapped_column(Integer)
    command: Mapped[str] = mapped_column(Text)  # JSON list of arguments
    cwd: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: indexed by ``ix_jobs_launched``, whose first column it is (migration 0012)
    state: Mapped[str] = mapped_column(String(32))
    submit_time: Mapped[float] = mapped_column(Float)
    first_start: Mapped[float | None] = mapped_column(Float, nullable=True)
    end_time: Mapped[float | None] = mapped_column(Float, nullable=True)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    gpu_indices: Mapped[str] = mapped_column(String(256), default="")
    preemptions: Mapped[int] = mapped_column(Integer, default=0)
    estimate_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    checkpoint_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    priority: Mapped[int] = mapped_column(Integer, default=0)
    #: end of the live profiling run now under way (None: not profiling)
    profile_until: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: the live duration model's estimate (``estimate_s``, the user's, wins when given)
    model_estimate_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: what made ``model_estimate_s``: "v3" (model version 3), "median" or "none"
    estimate_version: Mapped[str | None] = mapped_column(String(32), nullable=True)
    #: the estimate explained, as it was at submission
    estimate_note: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: the Unix user the job runs as (its token's, at submission; None: the default)
    run_as: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # -- what the job asked for beyond a GPU count (migration 0008; None: not asked)
    name: Mapped[str | None] = mapped_column(String(128), nullable=True)
    gpu_type: Mapped[str | None] = mapped_column(String(64), nullable=True)
    #: JSON list, best first (soft); ``gpu_type`` is hard
    preferred_gpu_types: Mapped[str | None] = mapped_column(Text, nullable=True)
    gpu_memory_gb: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: a gang's shape: ``nodes`` x ``gpus_per_node`` (= gpus)
    nodes: Mapped[int | None] = mapped_column(Integer, nullable=True)
    gpus_per_node: Mapped[int | None] = mapped_column(Integer, nullable=True)
    #: a share of one GPU in thousandths (None or 1000: whole GPUs)
    gpu_milli: Mapped[int | None] = mapped_column(Integer, nullable=True)
    cpus: Mapped[float | None] = mapped_column(Float, nullable=True)
    memory_gb: Mapped[float | None] = mapped_column(Float, nullable=True)
    # -- retries of a job that could not be launched or vanished (migration 0009)
    #: failed attempts retried so far (preemptions never count)
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    #: when a job held back after a failed attempt goes back to the queue (None: not held)
    retry_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: retries the job allows (None: the service's default)
    max_retries: Mapped[int | None] = mapped_column(Integer, nullable=True)
    #: why the service is stopping the job ("cancelled", "preempted", "profiled"), until
    #: its process is gone: committed before it is answered (migration 0011)
    stopping: Mapped[str | None] = mapped_column(String(16), nullable=True, index=True)
    # -- the job's own progress report, the last one (migration 0013; None: none yet)
    progress_step: Mapped[float | None] = mapped_column(Float, nullable=True)
    progress_total: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: when the service saw it, epoch s
    progress_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: steps per second of run, between its reports (None until two of one run)
    progress_rate: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: whether the job may burst to a paid pool (migration 0014; ``--no-cloud``: false)
    cloud: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())

    __table_args__ = (
        # what every reconcile pass asks at 10,000 nodes (migration 0012): the launched
        # running jobs' ids, read from the index alone (it holds every column the
        # question names), and the starts still waiting for their GPUs
        Index("ix_jobs_launched", "state", "gpu_indices", "stopping", "id"),
        # the profiling runs that are due, without a look at every running job
        Index("ix_jobs_profile_until", "profile_until"),
    )


class TransitionRow(Base):
    __tablename__ = "transitions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), index=True)
    time: Mapped[float] = mapped_column(Float)
    from_state: Mapped[str] = mapped_column(String(32))
    to_state: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str] = mapped_column(Text, default="")
    #: what caused the move (a :class:`~ilucid.service.lifecycle.Stimulus` value)
    stimulus: Mapped[str] = mapped_column(String(32), default="", server_default="")
    #: the one request, pass or observation that caused it (migration 0011)
    stimulus_id: Mapped[str] = mapped_column(String(40), default="", server_default="")
    #: the lifecycle's phases of the move (``decided``, ``stopping: cancel``...)
    from_phase: Mapped[str] = mapped_column(String(32), default="", server_default="")
    to_phase: Mapped[str] = mapped_column(String(32), default="", server_default="")


class DecisionRow(Base):
    __tablename__ = "decisions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    time: Mapped[float] = mapped_column(Float, index=True)
    job_id: Mapped[str] = mapped_column(String(64), index=True)
    action: Mapped[str] = mapped_column(String(16))
    code: Mapped[str] = mapped_column(String(64))
    message: Mapped[str] = mapped_column(Text)
    placement: Mapped[str] = mapped_column(String(256), default="")
    #: the pass that decided it (its transitions carry the same id)
    stimulus_id: Mapped[str] = mapped_column(String(40), default="", server_default="")


class SampleRow(Base):
    __tablename__ = "samples"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), index=True)
    time: Mapped[float] = mapped_column(Float)
    gpu_util: Mapped[float] = mapped_column(Float)
    mem_util: Mapped[float] = mapped_column(Float)
    mem_mib: Mapped[float] = mapped_column(Float)


class ProgressRow(Base):
    """A job's progress over time: a row when its step changed (thinned, about 200 a job)."""

    __tablename__ = "job_progress"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id"), index=True)
    at: Mapped[float] = mapped_column(Float)
    step: Mapped[float] = mapped_column(Float)
    total: Mapped[float] = mapped_column(Float)
    gpu_type: Mapped[str | None] = mapped_column(String(64), nullable=True)


class TokenRow(Base):
    __tablename__ = "tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    token_hash: Mapped[str] = mapped_column(String(128), unique=True)
    user: Mapped[str] = mapped_column(String(128))
    tenant: Mapped[str] = mapped_column(String(128))
    admin: Mapped[bool] = mapped_column(Boolean, default=False)
    created: Mapped[float] = mapped_column(Float)
    #: the Unix user this token's jobs run as when the service is root (None: default)
    unix_user: Mapped[str | None] = mapped_column(String(64), nullable=True)


class DynamicUidRow(Base):
    """The uid of its own a user without a Unix account runs jobs as (never shared)."""

    __tablename__ = "dynamic_uids"

    uid: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    user: Mapped[str] = mapped_column(String(128), unique=True)


class CloudLedgerRow(Base):
    """What paid pools cost, kept across restarts (migration 0014): a tenant's closed
    runs per month, a pool's closed node time (month ``all``), a node up ``since``."""

    __tablename__ = "cloud_ledger"

    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    month: Mapped[str] = mapped_column(String(16), primary_key=True)
    cost: Mapped[float] = mapped_column(Float, default=0.0)
    gpu_hours: Mapped[float] = mapped_column(Float, default=0.0)
    since: Mapped[float | None] = mapped_column(Float, nullable=True)


class StartOutcomeRow(Base):
    """How a job's first expected start came out (migration 0015): the range given, the
    projection it calibrated and the real start; replayed at a restart
    (``ilucid.core.start_range``)."""

    __tablename__ = "start_outcomes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(64))
    made_at: Mapped[float] = mapped_column(Float)
    projected: Mapped[float] = mapped_column(Float)
    low: Mapped[float] = mapped_column(Float)
    high: Mapped[float] = mapped_column(Float)
    started: Mapped[float] = mapped_column(Float)


class EstimatorVersion(Base):
    __tablename__ = "estimator_versions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(32))
    path: Mapped[str] = mapped_column(Text)
    trained_at: Mapped[float] = mapped_column(Float)
    rows: Mapped[int] = mapped_column(Integer)


class ModelRow(Base):
    """A refitted model whose file was completely written (the newest is loaded on start)."""

    __tablename__ = "models"
    __table_args__ = (UniqueConstraint("kind", "version", name="uq_models_kind_version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(32))
    version: Mapped[int] = mapped_column(Integer)
    path: Mapped[str] = mapped_column(Text)
    trained_at: Mapped[float] = mapped_column(Float)
    rows: Mapped[int] = mapped_column(Integer)
    fit_s: Mapped[float] = mapped_column(Float)


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite gets WAL mode and a busy timeout on every connection."""
    engine = create_engine(url, future=True)
    if engine.dialect.name == "sqlite":

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(connection: Any, _record: Any) -> None:
            cursor = connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            # WAL + NORMAL: a commit survives a crash of the service (not of the host's
            # power), without an fsync per submission
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA busy_timeout=5000")
            cursor.execute("PRAGMA foreign_keys=ON")
            # 64 MiB of pages (the default is 2 MiB): a pass at 10,000 nodes updates
            # hundreds of job rows spread over the table and its indexes, each a page
            # read from the file again when the cache cannot hold them
            cursor.execute("PRAGMA cache_size=-65536")
            cursor.close()

    return engine


def migrate(url: str) -> None:
    """Bring the database at ``url`` to the newest schema (Alembic ``upgrade head``).

    Each migration commits with its version stamp or not at all (see
    ``migrations/env.py``), so a crash here leaves the last complete revision and the
    next start carries on. A database that cannot be migrated (corrupt, newer than
    this release, half-built by an older one) raises :class:`UnreadableDatabase`,
    whose message says which version was found and what to do."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    try:
        command.upgrade(config, "head")
        return
    except (CommandError, SQLAlchemyError):
        pass
    # once more, from what is committed now: a second start on the same database may
    # have run a migration this one meant to (each waits for the other's write lock)
    try:
        command.upgrade(config, "head")
    except (CommandError, SQLAlchemyError) as exc:
        script = ScriptDirectory.from_config(config)
        raise UnreadableDatabase(explain(url, script, exc)) from exc
