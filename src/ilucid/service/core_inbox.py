"""How committed submissions reach the core without waiting for the scheduler's lock.

A submission is committed by the group-commit writer (no lock held), then put in
the :class:`Inbox`. The service's lock is a :class:`CoreLock`: whoever takes it
(the pass, a cancel, a question, or the submitter itself when no one holds it)
first hands every job in the inbox to the core, in memory. So a submission
never waits for a pass, and every holder of the lock sees a core that knows
every job committed before it took the lock: a cancel that follows an answered
submission finds the job in the core, never a core that learns of it later.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Generic, TypeVar

__all__ = ["CoreLock", "Inbox"]

Job = TypeVar("Job")


class Inbox(Generic[Job]):
    """Committed jobs the core has not taken yet, oldest first (thread-safe)."""

    def __init__(self) -> None:
        self._jobs: deque[Job] = deque()

    def put(self, jobs: list[Job]) -> None:
        self._jobs.extend(jobs)

    def take(self) -> list[Job]:
        """Every job put so far, oldest first; the inbox is left empty."""
        taken = []
        while True:
            try:
                taken.append(self._jobs.popleft())
            except IndexError:
                return taken

    def __len__(self) -> int:
        return len(self._jobs)


class CoreLock:
    """A re-entrant lock that runs ``on_hold`` each time it is taken (re-entered too:
    a thread that submits while it holds the lock finds its job in the core), before
    the holder does anything else."""

    def __init__(self, on_hold: Callable[[], None]) -> None:
        self._lock = threading.RLock()
        self._on_hold = on_hold

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not self._lock.acquire(blocking, timeout):
            return False
        try:
            self._on_hold()
        except BaseException:
            self._lock.release()
            raise
        return True

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.release()
