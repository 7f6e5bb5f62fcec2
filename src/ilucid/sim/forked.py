"""A function mapped over items in forked worker processes that fails rather than hangs.

Why not ``multiprocessing.Pool``: when a worker dies, or its result cannot be
unpickled in the parent, a Pool's result thread dies and ``map`` waits for ever;
an executor fails the call with ``BrokenProcessPool`` and the cause. Forked, so
workers inherit the trace a module global holds instead of unpickling it.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

__all__ = ["forked_map"]

T = TypeVar("T")
R = TypeVar("R")


def forked_map(function: Callable[[T], R], items: Iterable[T], workers: int) -> Iterator[R]:
    """``function`` over ``items`` in ``workers`` forked processes, results in order."""
    with cf.ProcessPoolExecutor(workers, mp_context=mp.get_context("fork")) as pool:
        yield from pool.map(function, items)
