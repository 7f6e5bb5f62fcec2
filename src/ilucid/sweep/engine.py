"""Run a grid's cells on Dask distributed (or in this process), streaming rows to the table.

A cell is one task. Tasks go to a ``LocalCluster`` started here (one single-threaded
worker process per ``workers``), or to an existing scheduler (``tcp://host:8786``)
whose workers can import ilucid and read the traces. Dask itself moves the task of a
worker that dies to another worker; a task that fails (its replay raised, or Dask
gave up on it) is reported and submitted once more, then recorded as failed. Every
finished cell is written to the table as it ends, in whatever order cells end.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ilucid.sweep.cell import CellFailed, run_cell
from ilucid.sweep.grid import METRICS, Cell
from ilucid.sweep.table import ResultTable, TableError

if TYPE_CHECKING:
    from distributed import Client

__all__ = [
    "MAX_ATTEMPTS",
    "SweepEvent",
    "SweepOutcome",
    "open_client",
    "pending_cells",
    "run_sweep",
]

#: a failed cell runs once more, then is recorded as failed
MAX_ATTEMPTS = 2


@dataclass(frozen=True, slots=True)
class SweepEvent:
    """A cell ended (``done``), failed and goes again (``retry``) or failed for good."""

    kind: Literal["done", "retry", "failed"]
    cell: Cell
    attempt: int
    error: str | None = None


@dataclass(slots=True)
class SweepOutcome:
    cells: int = 0  # cells this run had to run (the grid less the finished ones)
    done: int = 0
    failed: list[tuple[Cell, str]] = field(default_factory=list)
    wall_s: float = 0.0


@contextmanager
def open_client(workers: int, scheduler: str | None = None) -> Iterator[Client | None]:
    """A client of ``scheduler``, else of a new LocalCluster of ``workers`` single-threaded
    worker processes; ``workers == 0`` yields None (cells run in this process)."""
    if scheduler is None and workers == 0:
        yield None
        return
    from distributed import Client, LocalCluster

    if scheduler is not None:
        with Client(scheduler, timeout="30s") as client:  # type: ignore[no-untyped-call, unused-ignore]
            yield client
        return
    with _workers_ignore_ctrl_c():
        # the workers' own warnings (e.g. one slow to stop on a loaded machine) are not
        # the user's business: a cell that fails is reported by the sweep itself
        cluster = LocalCluster(  # type: ignore[no-untyped-call, unused-ignore]
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            silence_logs=logging.ERROR,
        )
    try:
        with Client(cluster) as client:  # type: ignore[no-untyped-call, unused-ignore]
            yield client
    finally:
        cluster.close()


@contextmanager
def _workers_ignore_ctrl_c() -> Iterator[None]:
    """Worker processes started in here inherit an ignored SIGINT (Python then installs no
    KeyboardInterrupt handler): Ctrl-C stops the sweep, which stops its workers, instead of
    every worker printing a traceback."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def pending_cells(cells: Sequence[Cell], table: ResultTable) -> list[Cell]:
    """The cells the table has no successful row for.

    A finished perturbed cell made with another perturbation is an error, not a skip:
    its figures would not be this grid's.
    """
    finished = table.finished()
    for cell in cells:
        row = finished.get(cell.key)
        if row is not None and cell.seed != 0 and row["perturbation"] != cell.perturbation.label:
            raise TableError(
                f"{table.path}: {cell.label} was run with perturbation {row['perturbation']},"
                f" this grid asks for {cell.perturbation.label}; give another --out or --fresh"
            )
    return [c for c in cells if c.key not in finished]


def _row(
    cell: Cell, attempt: int, figures: dict[str, Any] | None, error: str | None
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "trace": cell.trace,
        "profile": cell.profile,
        "params": cell.params,
        "seed": cell.seed,
        "perturbation": cell.perturbation.label,
        "status": "ok" if error is None else "failed",
        "attempts": attempt,
        "error": error,
    }
    if figures is not None:
        row.update({k: figures.get(k) for k in ("worker", "elapsed_s", "wall_s", *METRICS)})
    return row


def _describe(exc: BaseException) -> str:
    """One line: the cell's own message, or the exception's name and message (e.g.
    KilledWorker when Dask gave up on a task whose workers kept dying)."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else ""
    if isinstance(exc, CellFailed):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _Books:
    """What happens when an attempt ends: the row, the event, the retry."""

    def __init__(
        self, table: ResultTable, outcome: SweepOutcome, emit: Callable[[SweepEvent], None]
    ) -> None:
        self.table, self.outcome, self.emit = table, outcome, emit

    def succeeded(self, cell: Cell, attempt: int, figures: dict[str, Any]) -> None:
        self.table.append(_row(cell, attempt, figures, None))
        self.outcome.done += 1
        self.emit(SweepEvent("done", cell, attempt))

    def failed(self, cell: Cell, attempt: int, error: str) -> bool:
        """Whether the cell goes again."""
        if attempt < MAX_ATTEMPTS:
            self.emit(SweepEvent("retry", cell, attempt, error))
            return True
        self.table.append(_row(cell, attempt, None, error))
        self.outcome.failed.append((cell, error))
        self.emit(SweepEvent("failed", cell, attempt, error))
        return False


def run_sweep(
    cells: Sequence[Cell],
    table: ResultTable,
    client: Client | None,
    on_event: Callable[[SweepEvent], None] | None = None,
) -> SweepOutcome:
    """Run ``cells`` (those :func:`pending_cells` left) on ``client``, or here when None."""
    started = time.perf_counter()
    outcome = SweepOutcome(cells=len(cells))
    books = _Books(table, outcome, on_event or (lambda _event: None))
    if client is None:
        for cell in cells:
            for attempt in range(1, MAX_ATTEMPTS + 1):
                try:
                    figures = run_cell(cell)
                except Exception as exc:  # a cell's failure must not sink the sweep
                    if books.failed(cell, attempt, _describe(exc)):
                        continue
                    break
                books.succeeded(cell, attempt, figures)
                break
    else:
        _run_distributed(cells, client, books)
    outcome.wall_s = time.perf_counter() - started
    return outcome


def _run_distributed(cells: Sequence[Cell], client: Client, books: _Books) -> None:
    from distributed import as_completed

    run = uuid.uuid4().hex[:8]

    def submit(index: int, cell: Cell, attempt: int) -> Any:
        # the key's prefix groups the tasks on a dashboard; run and index make it unique
        key = f"ilucid-cell-{run}-{index}-{attempt}"
        return client.submit(run_cell, cell, key=key, pure=False)

    tasks = {submit(i, c, 1): (i, c, 1) for i, c in enumerate(cells)}
    finished = as_completed(list(tasks))  # type: ignore[no-untyped-call, unused-ignore]
    for future in finished:
        index, cell, attempt = tasks.pop(future)
        try:
            figures = future.result()
        except Exception as exc:  # the replay raised, or Dask gave up on the task
            if books.failed(cell, attempt, _describe(exc)):
                again = submit(index, cell, attempt + 1)
                tasks[again] = (index, cell, attempt + 1)
                finished.add(again)  # type: ignore[no-untyped-call, unused-ignore]
            continue
        finally:
            future.release()
        books.succeeded(cell, attempt, figures)
