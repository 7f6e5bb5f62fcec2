"""How often a backend reads a job's progress: at most once every few seconds a job.

Reading progress means reading a file's tail or asking the cluster manager for a
pod's log; a pass over 10,000 running jobs every second cannot do that for each.
The memo keeps each job's last answer and reads it again only when it is older
than ``every_s``, and at most ``per_pass`` jobs a pass (a backend that asks an API
server for each read spreads its reads over passes); jobs no longer running are
dropped with :meth:`ProgressMemo.end_pass`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from ilucid.backends.progress_read import Progress

__all__ = ["READ_EVERY_S", "ProgressMemo"]

logger = logging.getLogger(__name__)

#: seconds between two reads of one job's progress
READ_EVERY_S = 10.0


class ProgressMemo:
    def __init__(
        self,
        clock: Callable[[], float],
        every_s: float = READ_EVERY_S,
        per_pass: int | None = None,
    ) -> None:
        self.clock = clock
        self.every_s = every_s
        self.per_pass = per_pass
        self._reads = 0  # this pass's
        self._warned = False
        self._last: dict[str, tuple[float, Progress | None]] = {}

    def get(self, job_id: str, read: Callable[[], Progress | None]) -> Progress | None:
        """The job's progress: read now with ``read`` if the last read is old enough
        (or there was none), else the last read's answer. A read that failed keeps
        the last answer it had (a report does not vanish with one unreadable log)."""
        now = self.clock()
        last = self._last.get(job_id)
        if last is not None and now - last[0] < self.every_s:
            return last[1]
        if self.per_pass is not None and self._reads >= self.per_pass:
            return last[1] if last is not None else None  # read on a later pass
        self._reads += 1
        try:
            found = read()
        except Exception as exc:  # a job's output or the manager's answer: never the pass's
            if not self._warned:  # a missing permission would otherwise go unseen
                logger.warning("ilucid: reading %s's progress failed: %s", job_id, exc)
                self._warned = True
            found = None
        if found is None and last is not None:
            found = last[1]
        self._last[job_id] = (now, found)
        return found

    def end_pass(self, running: Iterable[str]) -> None:
        """Forget every job but ``running``; the next pass may read ``per_pass`` again."""
        self._reads = 0
        wanted = set(running)
        for job_id in [j for j in self._last if j not in wanted]:
            del self._last[job_id]
