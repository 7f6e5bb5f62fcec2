"""One spawned process that fits models beside whoever asked (a service, a replay).

A fit is seconds of CPU that must not stall the caller: the service's reconcile
loop, or a replay whose clock waits for nothing else. Both hand it to one
worker process, started with ``spawn`` (a fresh interpreter: nothing inherited
from the caller's threads or locks) that dies with its parent, so a ``kill -9``
leaves no orphan fitting for nobody.

A replay's worker (:class:`FitsAside`) is also daemonic, and
:meth:`FitsAside.close` ends it and waits until it has gone. Why: a process
that exits joins its non-daemonic children (multiprocessing's exit handler),
and that handler first stops the executor's queue feeder; a fit worker still
busy when its replay ended then never got the executor's stop signal and
waited for work for ever, and so did the pool worker above it and the CLI
above that (issue 30).
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.context import SpawnContext, SpawnProcess
from multiprocessing.process import BaseProcess
from typing import Any, Generic, ParamSpec, TypeVar

__all__ = ["FitsAside", "can_start_processes", "one_fit_process"]

P = ParamSpec("P")
T = TypeVar("T")


def _die_with_parent(parent: int, niceness: int) -> None:
    """Worker initializer: lower the worker's priority by ``niceness``, and exit as soon
    as ``parent`` is gone."""
    if niceness:
        with contextlib.suppress(OSError):
            os.nice(niceness)

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(1)
            time.sleep(0.2)

    threading.Thread(target=watch, daemon=True).start()


def can_start_processes() -> bool:
    """Whether this process may have children: a daemonic one (a ``multiprocessing.Pool``
    worker, a Dask worker) may not."""
    return not multiprocessing.current_process().daemon


class _FitContext(SpawnContext):
    """``spawn``, with workers made daemonic (if asked) and remembered, so their owner
    can end them (a ``ProcessPoolExecutor`` keeps its processes to itself)."""

    def __init__(self, daemon: bool) -> None:
        super().__init__()
        self.daemon = daemon
        self.workers: list[SpawnProcess] = []

    def Process(self, *args: Any, **kwargs: Any) -> SpawnProcess:  # type: ignore[override]
        process = SpawnProcess(*args, **kwargs)
        process.daemon = self.daemon
        self.workers.append(process)
        return process


def one_fit_process(niceness: int = 0, daemon: bool = False) -> ProcessPoolExecutor:
    """An executor of one spawned worker that exits with this process; a ``daemon``
    worker (it may not start processes of its own) is ended by multiprocessing's exit
    handler rather than waited for."""
    return _fit_executor(_FitContext(daemon), niceness)


def _fit_executor(context: _FitContext, niceness: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(
        1, mp_context=context, initializer=_die_with_parent, initargs=(os.getpid(), niceness)
    )


def _end(workers: Sequence[BaseProcess], within_s: float) -> None:
    """Stop ``workers`` (SIGTERM, then SIGKILL after ``within_s``) and reap them."""
    for process in workers:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + within_s
    for process in workers:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()


def _import(modules: Sequence[str]) -> None:
    for name in modules:
        importlib.import_module(name)


class _Result(Generic[T]):
    """A fit's result, waited for when asked; if the worker died, fitted here instead."""

    def __init__(self, future: Future[T], again: Callable[[], T]) -> None:
        self._future, self._again = future, again

    def __call__(self) -> T:
        try:
            return self._future.result()
        except (BrokenProcessPool, CancelledError):  # its worker was killed, or closed
            return self._again()


class FitsAside:
    """Fits run in one worker process, started at once so that it has imported
    ``warm`` before the first fit; where this process may not have children, a fit
    runs here when it is asked for. Either way a fit's result is the same: only
    when the caller's wall time is spent differs."""

    def __init__(self, warm: Sequence[str] = ()) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._context = _FitContext(daemon=True)  # it fits, it starts no processes
        if can_start_processes():
            self._pool = _fit_executor(self._context, 0)
            self._pool.submit(_import, tuple(warm))

    def __enter__(self) -> FitsAside:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def fit(self, fit: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> Callable[[], T]:
        """Start ``fit(*args, **kwargs)``; the returned function gives its result."""

        def here() -> T:
            return fit(*args, **kwargs)

        if self._pool is None:
            return here
        try:
            return _Result(self._pool.submit(fit, *args, **kwargs), here)
        except BrokenProcessPool:
            self._pool = None
            return here

    def close(self, within_s: float = 5.0) -> None:
        """Stop the worker and wait until it has exited (a fit still running is
        dropped): nothing of it outlives its owner's replay. ``within_s``: how long
        it may take to end on SIGTERM before it is killed."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        # a worker busy fitting would go on until its fit is done, for nobody
        _end(self._context.workers, within_s)
        self._context.workers.clear()
