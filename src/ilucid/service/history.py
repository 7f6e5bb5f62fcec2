"""What the service's records say over time: the history as a trace, who holds
which GPUs, and the /timeline step series replayed from stored transitions."""

import csv
import io
import math
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Engine, func, or_, select
from sqlalchemy.orm import Session

from ilucid.core import JobClass
from ilucid.service.db import JobRow, TransitionRow
from ilucid.service.scheduler_service import SchedulerService
from ilucid.service.uptime import UptimeRow, down_periods
from ilucid.traces.csv_cells import formula_safe

__all__ = ["TIMELINE_POINTS", "export_history", "gpu_holders", "gpu_shares", "timeline"]

#: Most points one /timeline series holds; denser changes are merged (see :func:`timeline`)
TIMELINE_POINTS = 2000


def export_history(service: SchedulerService) -> str:
    """Ended jobs as ilucid's generic trace; text cells formula-safe (``ilucid.traces``
    reads them back as they were)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["id", "submit_time", "num_gpus", "duration", "job_class", "tenant", "user"])
    with Session(service.engine) as session:
        rows = session.scalars(
            select(JobRow)
            .where(JobRow.state.in_(["succeeded", "failed"]))
            .order_by(JobRow.submit_time, JobRow.id)
        )
        for row in rows:
            if row.first_start is None or row.end_time is None:
                continue
            duration = max(0.0, row.end_time - row.first_start)
            job_class = (
                row.job_class if row.job_class in {c.value for c in JobClass} else "training"
            )
            writer.writerow(
                formula_safe(  # a tenant or user named "=..." is not a spreadsheet formula
                    [
                        row.id,
                        f"{row.submit_time:.3f}",
                        row.gpus,
                        f"{duration:.3f}",
                        job_class,
                        row.tenant,
                        row.user,
                    ]
                )
            )
    return out.getvalue()


def gpu_holders(
    node_sizes: Sequence[int], running: Iterable[tuple[str, str]]
) -> list[list[str | None]]:
    """Per node, per GPU: the id of the running job holding it (``a + b`` for a GPU
    that jobs share), or None.

    ``running`` holds ``(job id, gpu_indices)`` of running jobs, where
    ``gpu_indices`` is what the backend launched the job on: comma-separated
    GPU indices, ``"-"`` for a job without GPUs and ``""`` for one not launched
    yet. On one node these are the node's own indices. On several nodes they are
    read as host-wide indices in node order, node 0's GPUs first, then node 1's,
    and so on (how the local backend numbers the GPUs of the logical nodes it
    splits a host into). Indices outside the cluster are ignored.
    """
    holders: list[list[str | None]] = [[None] * size for size in node_sizes]
    places: list[tuple[int, int]] = [
        (node, gpu) for node, size in enumerate(node_sizes) for gpu in range(size)
    ]
    for job_id, indices in running:
        for text in indices.split(","):
            text = text.strip()
            if text.isdigit() and int(text) < len(places):
                node, gpu = places[int(text)]
                held = holders[node][gpu]  # a GPU shared by fractions names each job
                holders[node][gpu] = job_id if held is None else f"{held} + {job_id}"
    return holders


def gpu_shares(
    node_sizes: Sequence[int], running: Sequence[tuple[str, str, int | None]]
) -> list[list[list[int]]]:
    """Per node, per GPU: the thousandths of it each of its holders holds, in the order
    :func:`gpu_holders` names them (``[1000]`` for a whole GPU, ``[500]`` for half of one
    nobody else shares, ``[]`` for a free GPU).

    ``running`` holds ``(job id, gpu_indices, gpu_milli)``; a GPU map draws a share
    as a part of its GPU, not as the whole GPU."""
    holders = gpu_holders(node_sizes, [(job_id, indices) for job_id, indices, _ in running])
    milli = {job_id: share or 1000 for job_id, _, share in running}
    return [
        [[] if held is None else [milli[j] for j in held.split(" + ")] for held in node]
        for node in holders
    ]


def timeline(engine: Engine, start: float, end: float) -> dict[str, Any]:
    """Busy GPUs, pending and running jobs from ``start`` to ``end`` as step series.

    Replayed from the stored state transitions (the record that outlives
    restarts): entering or leaving ``pending`` moves the pending count, entering
    or leaving ``running`` moves the running count and the busy GPUs by the
    job's size; ``decided -> running`` rows (and older ``running -> running``
    ones) are launch notes and change nothing.
    Value ``i`` holds from ``times[i]`` until ``times[i + 1]``; the first point is
    the state at ``start`` and the last is ``end``. When there are more than
    :data:`TIMELINE_POINTS` changes, each of as many equal slices of the window
    keeps only its last value (a short spike inside one slice may not show).
    ``down`` lists the ``[from, to]`` periods of the window when the service was not
    running (:func:`ilucid.service.uptime.down_periods`): the series say nothing
    about them, and charts draw them as gaps. ``first_up`` is when the service first
    started, if inside the window (else None): before it there is nothing to show,
    and charts leave that time blank rather than draw zeros.
    """
    query = (
        select(TransitionRow.time, TransitionRow.from_state, TransitionRow.to_state, JobRow.gpus)
        .join(JobRow, JobRow.id == TransitionRow.job_id)
        .where(TransitionRow.from_state != TransitionRow.to_state, TransitionRow.time <= end)
        .where(TransitionRow.from_state != "decided")  # a launch: running since its decision
        # a job that ended before the window contributes nothing to it
        .where(or_(JobRow.end_time.is_(None), JobRow.end_time >= start))
        .order_by(TransitionRow.id)  # each job's transitions in the order they happened
    )
    slice_s = max(end - start, 1e-9) / TIMELINE_POINTS
    times, busy_series, pending_series, running_series = [start], [0], [0], [0]
    busy = pending = running = 0
    last_time, last_slice = start, -1  # slice of the newest point after ``start``
    with Session(engine) as session:
        for when, from_state, to_state, gpus in session.execute(query):
            if from_state == "pending":
                pending -= 1
            elif from_state == "running":
                running -= 1
                busy -= gpus
            if to_state == "pending":
                pending += 1
            elif to_state == "running":
                running += 1
                busy += gpus
            last_time = max(last_time, when)  # ordered by id: clocks may step back a little
            index = math.floor((last_time - start) / slice_s) if last_time > start else -1
            if index < 0 or index == last_slice:  # the state at ``start``, or a merge
                busy_series[-1], pending_series[-1], running_series[-1] = busy, pending, running
                continue
            last_slice = index
            times.append(last_time)
            busy_series.append(busy)
            pending_series.append(pending)
            running_series.append(running)
    if end > times[-1]:
        times.append(end)
        busy_series.append(busy)
        pending_series.append(pending)
        running_series.append(running)
    return {
        "start": start,
        "now": end,
        "times": [round(t, 3) for t in times],
        "busy_gpus": busy_series,
        "pending": pending_series,
        "running": running_series,
        "down": [[round(a, 3), round(b, 3)] for a, b in down_periods(engine, start, end)],
        "first_up": _first_up(engine, start, end),
    }


def _first_up(engine: Engine, start: float, end: float) -> float | None:
    """When the service's first recorded run started, if within ``(start, end]``."""
    with Session(engine) as session:
        first = session.scalar(select(func.min(UptimeRow.started)))
    return round(first, 3) if first is not None and start < first <= end else None
