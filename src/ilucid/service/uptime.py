"""When the service was up: one row per start of the API process, its last sign of life
kept fresh while it runs, so charts can show the periods it was down as gaps.

Nothing else the service stores says so: transitions and decisions are written only
when something happens, and the profiler's samples only for running jobs on machines
with a metrics source. A quiet service and a stopped one would look the same.

Each start inserts a row (``started``); every :data:`BEAT_S` seconds its
``last_seen`` moves to the service clock's now. Between one row's ``last_seen`` and
the next start the service was down. A clean stop ends the row exactly: the API's
shutdown writes a last beat, and ``ilucid serve`` (SIGINT or SIGTERM) writes the stop
time once its scheduling loop, which may still be in a pass then, has ended
(:func:`record_stop`). An unclean end (``kill -9``, a crash, a lost machine) writes
nothing: that down period begins at the last beat, up to :data:`BEAT_S` seconds
before the real end. Replicas (leader election) each keep a row; periods
are down only when no replica was up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from fastapi import FastAPI
from sqlalchemy import Engine, Float, Integer, select, update
from sqlalchemy.orm import Mapped, Session, mapped_column

from ilucid.service.db import Base
from ilucid.service.scheduler_service import SchedulerService

__all__ = [
    "BEAT_S",
    "UptimeRow",
    "down_periods",
    "keep_uptime",
    "record_beat",
    "record_start",
    "record_stop",
]

logger = logging.getLogger(__name__)

#: Seconds between two signs of life of a running service.
BEAT_S = 15.0


class UptimeRow(Base):
    """One run of the service: from its start until its last sign of life."""

    __tablename__ = "uptime"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    started: Mapped[float] = mapped_column(Float)
    last_seen: Mapped[float] = mapped_column(Float)


def record_start(engine: Engine, now: float) -> int:
    """A new run starting ``now``; its id, for :func:`record_beat`."""
    with Session(engine) as session:
        row = UptimeRow(started=now, last_seen=now)
        session.add(row)
        session.commit()
        return row.id


def record_beat(engine: Engine, run_id: int, now: float) -> None:
    """The run ``run_id`` is alive at ``now``."""
    with Session(engine) as session:
        session.execute(update(UptimeRow).where(UptimeRow.id == run_id).values(last_seen=now))
        session.commit()


def record_stop(app: FastAPI, now: float) -> None:
    """The service behind ``app`` stopped cleanly at ``now``: its run ends exactly there.

    For the process that served ``app``, after its lifespan started (which recorded
    the run) and once nothing of the service runs any more."""
    service: SchedulerService = app.state.service
    record_beat(service.engine, app.state.uptime_run, now)


def down_periods(engine: Engine, start: float, end: float) -> list[tuple[float, float]]:
    """The periods within ``[start, end]`` when no run of the service was up.

    Only between runs: before the first recorded run the service did not exist (or
    predates this record), and the newest run is taken as up until now (it answers
    the request that asks). One row per start: reading them all costs little."""
    with Session(engine) as session:
        runs = session.execute(
            select(UptimeRow.started, UptimeRow.last_seen).order_by(UptimeRow.started, UptimeRow.id)
        ).all()
    periods: list[tuple[float, float]] = []
    seen_until: float | None = None
    for started, last_seen in runs:
        if seen_until is not None and started > seen_until:
            low, high = max(seen_until, start), min(started, end)
            if high > low:
                periods.append((low, high))
        if started >= end:
            break
        seen_until = last_seen if seen_until is None else max(seen_until, last_seen)
    return periods


async def _beat(service: SchedulerService, run_id: int, every_s: float) -> None:
    while True:
        await asyncio.sleep(every_s)
        try:
            await asyncio.to_thread(record_beat, service.engine, run_id, service.clock())
        except Exception as exc:  # a database hiccup must not stop the service
            logger.warning("ilucid serve: recording uptime failed: %r", exc)


@contextlib.asynccontextmanager
async def keep_uptime(app: FastAPI) -> AsyncIterator[None]:
    """The API's lifespan part that records this run (see the module docstring)."""
    service: SchedulerService = app.state.service
    run_id = await asyncio.to_thread(record_start, service.engine, service.clock())
    app.state.uptime_run = run_id  # for record_stop
    task = asyncio.create_task(_beat(service, run_id, BEAT_S))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await asyncio.to_thread(record_beat, service.engine, run_id, service.clock())
