"""One spawned process that fits models beside whoever asked (a service, a replay).

A fit is seconds of CPU that must not stall the caller: the service's reconcile
loop, or a replay whose clock waits for nothing else. Both hand it to one
worker process, started with ``spawn`` (a fresh interpreter: nothing inherited
from the caller's threads or locks) that dies with its parent, so a ``kill -9``
leaves no orphan fitting for nobody.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Generic, ParamSpec, TypeVar

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


def one_fit_process(niceness: int = 0) -> ProcessPoolExecutor:
    """An executor of one spawned worker that exits with this process."""
    return ProcessPoolExecutor(
        1,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_die_with_parent,
        initargs=(os.getpid(), niceness),
    )


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
        except BrokenProcessPool:
            return self._again()


class FitsAside:
    """Fits run in one worker process, started at once so that it has imported
    ``warm`` before the first fit; where this process may not have children, a fit
    runs here when it is asked for. Either way a fit's result is the same: only
    when the caller's wall time is spent differs."""

    def __init__(self, warm: Sequence[str] = ()) -> None:
        self._pool: ProcessPoolExecutor | None = None
        if can_start_processes():
            self._pool = one_fit_process()
            self._pool.submit(_import, tuple(warm))

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

    def close(self) -> None:
        """Stop the worker (a fit still running is dropped)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
