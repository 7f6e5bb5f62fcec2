"""The launched running jobs (not being stopped), kept between reads of the database.

Finding which jobs ended means comparing the backend's observation with the jobs the
database says are launched and running: tens of thousands at 10,000 nodes, too many
to read at every pass. They are read from a covering index at most every
:data:`REREAD_S` and after a rebuild; between reads launches add to the set and
settled ends remove from it. The set can only be too large (a job another replica's
cancel is stopping), which the rows the caller loads for ended jobs correct, never
too small: jobs start running only through the reconciler's launch.
"""

from __future__ import annotations

import time

from sqlalchemy.orm import Session

from ilucid.service.pass_queries import launched_job_ids

__all__ = ["REREAD_S", "LaunchedJobs"]

#: seconds between two reads of the launched running jobs from the database
REREAD_S = 30.0


class LaunchedJobs:
    def __init__(self) -> None:
        self._ids: set[str] | None = None
        self._read_at = 0.0

    def ids(self, session: Session) -> set[str]:
        """The set (the caller's to change), read again when due."""
        clock = time.monotonic()
        if self._ids is None or clock - self._read_at >= REREAD_S:
            session.flush()  # the moves settled so far, seen by the query below
            # plain rows, not the ORM's per-row machinery
            self._ids = set(session.connection().execute(launched_job_ids()).scalars())
            self._read_at = clock
        return self._ids

    def launched(self, job_id: str) -> None:
        if self._ids is not None:
            self._ids.add(job_id)

    def forget_all(self) -> None:
        """After a rebuild: read again at the next pass."""
        self._ids = None
