"""Keeps the live duration model trained on this service's own finished jobs.

Refits run in a separate worker *process* (``spawn``), or on a Dask cluster's
workers when ``workers`` names its scheduler, never in the reconcile loop:
fitting an EBM takes seconds of CPU and would stall scheduling passes. The
worker reads the finished jobs from the database itself, fits on one core at a
lower priority, and writes the model atomically (temporary file, then
``os.replace``) to ``<data dir>/models/duration-v<N>.pkl``. Only then does the
service record version N in the ``models`` table and install it. A crash at any
point therefore loses nothing: jobs are in the database, and the next start
loads the newest *recorded* model (a file written but not recorded is ignored
and overwritten by the next refit of that version).

A refit starts every ``refit_every`` finished jobs, every ``refit_interval_s``
seconds when jobs finished since the last one, and on demand
(``POST /model/refit``, ``ilucid model refit``).

The keeper also keeps each user's record of stated estimates (:class:`TrustBook`),
filled from the database at start and updated as jobs succeed, and writes how much a
user's statement counts into each estimate's note (:mod:`~ilucid.service.estimate_trust`).

For tests, ``ILUCID_REFIT_GATE=<path>`` holds a fitted model before it is saved
for as long as ``<path>`` exists, after touching ``<path>.reached``: the only way
to kill a service deterministically while a refit is under way.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from ilucid.core import JobSpec
from ilucid.estimators.fit_process import one_fit_process
from ilucid.estimators.live import (
    DurationEstimate,
    FinishedJob,
    LiveDurationModel,
    fit_duration_model,
    load_model,
    save_model,
    training_set,
)
from ilucid.service.db import JobRow, ModelRow, make_engine
from ilucid.service.estimate_trust import TrustBook, overran, stated_history

__all__ = ["DurationKeeper", "RefitRefused"]

logger = logging.getLogger(__name__)

KIND = "duration"
GATE_ENV = "ILUCID_REFIT_GATE"


class RefitRefused(ValueError):
    """A refit asked for when it cannot run (too little history, no model folder)."""


@dataclass(frozen=True, slots=True)
class _Fitted:
    version: int
    path: str
    rows: int
    fit_s: float


def _spec(job_id: str, submit: float, gpus: int, user: str, tenant: str) -> JobSpec:
    return JobSpec(job_id, submit, gpus, 0.0, tenant=tenant, user=user)


def finished_jobs(session: Session) -> list[FinishedJob]:
    """Jobs that succeeded, in the order they ended; duration = end - first start."""
    query = (
        select(
            JobRow.id,
            JobRow.submit_time,
            JobRow.gpus,
            JobRow.user,
            JobRow.tenant,
            JobRow.first_start,
            JobRow.end_time,
        )
        .where(
            JobRow.state == "succeeded",
            JobRow.first_start.is_not(None),
            JobRow.end_time.is_not(None),
        )
        .order_by(JobRow.end_time, JobRow.id)
    )
    jobs = []
    for job_id, submit, gpus, user, tenant, start, end in session.execute(query):
        if start is not None and end is not None:  # the query's filter, for the type checker
            spec = _spec(job_id, submit, gpus, user, tenant)
            jobs.append(FinishedJob(spec, end, max(0.0, end - start)))
    return jobs


def _refit(db_url: str, model_dir: str, version: int) -> _Fitted:
    """In the worker process: fit on every finished job in the database, save atomically."""
    began = time.perf_counter()
    engine = make_engine(db_url)
    try:
        with Session(engine) as session:
            jobs = finished_jobs(session)
    finally:
        engine.dispose()
    rows, durations = training_set(jobs)
    model = fit_duration_model(rows, durations)
    gate = os.environ.get(GATE_ENV)
    if gate:
        Path(f"{gate}.reached").touch()
        while Path(gate).exists():  # a test holds the refit here to kill the service
            time.sleep(0.05)
    path = Path(model_dir) / f"{KIND}-v{version}.pkl"
    save_model(model, version, path)
    return _Fitted(version, str(path), len(rows), time.perf_counter() - began)


class DurationKeeper:
    """The service's :class:`LiveDurationModel` plus its refit schedule and worker."""

    def __init__(
        self,
        model_dir: Path | None = None,
        min_jobs: int = 30,
        refit_every: int = 20,
        refit_interval_s: float = 0.0,
        clock: Callable[[], float] = time.time,
        workers: str | None = None,
    ) -> None:
        if refit_every < 1:
            raise ValueError(f"refit_every must be at least 1 finished job, not {refit_every}")
        if refit_interval_s < 0:
            raise ValueError(f"refit_interval_s must not be negative, not {refit_interval_s}")
        self.live = LiveDurationModel(min_jobs)
        #: each user's record of stated estimates: how much their next one counts
        self.trust = TrustBook()
        self.model_dir = model_dir
        self.refit_every = refit_every
        self.refit_interval_s = refit_interval_s
        self.clock = clock
        self.engine: Engine | None = None
        self.trained_rows = 0
        self.trained_at: float | None = None
        self.last_error = ""
        # re-entrant: a refit that fails at once calls back inside ``_start_locked``
        self._lock = threading.RLock()
        #: a Dask scheduler's address (``tcp://host:8786``): refits run on its workers,
        #: which must reach the database and the model folder; None: a local process
        self.workers = workers
        self._pool: Executor | None = None
        self._client: Any = None  # the Dask client behind ``_pool``, when ``workers``
        self._running: Future[_Fitted] | None = None
        self._target = 0  # version the running refit will get
        self._last_version = 0  # newest version recorded in the database
        self._since_refit = 0  # finished jobs since the last refit started
        self._refit_at = 0.0
        self._done = threading.Condition(self._lock)

    # -- start -------------------------------------------------------------------------
    def start(self, engine: Engine) -> None:
        """History from the database; the newest recorded model whose file loads."""
        self.engine = engine
        self._refit_at = self.clock()
        with Session(engine) as session:
            finished = finished_jobs(session)
            recorded = session.scalars(
                select(ModelRow).where(ModelRow.kind == KIND).order_by(ModelRow.version.desc())
            ).all()
            for user, stated, ran in stated_history(session):
                self.trust.observe(user, stated, ran)
        for item in finished:
            self.live.observe(item.job, item.duration)
        if recorded:
            self._last_version = recorded[0].version
        for row in recorded:
            try:
                model, version = load_model(Path(row.path))
            except (OSError, ValueError, EOFError, ImportError, AttributeError) as exc:
                logger.warning("ilucid serve: duration model v%s unusable: %s", row.version, exc)
                continue
            self.live.install(model, version)
            self.trained_rows, self.trained_at = row.rows, row.trained_at
            break
        self._since_refit = max(0, len(finished) - self.trained_rows)

    # -- estimates ---------------------------------------------------------------------
    def estimate(self, job: JobSpec) -> DurationEstimate:
        """The model's estimate; its note also says how much the user's statement counts
        when the user has a record (read back by ``estimate_trust.weight_of``)."""
        estimate = self.live.estimate(job)
        clause = self.trust.note(job.user)
        return dataclasses.replace(estimate, note=estimate.note + clause) if clause else estimate

    def finished(self, job: JobSpec, duration: float) -> None:
        """A job succeeded: it joins the history (and counts toward the next refit), and
        its statement, if it made one, joins its user's record."""
        self.live.observe(job, duration)
        if job.stated_estimate is not None:
            self.trust.observe(job.user, job.stated_estimate, duration)
        with self._lock:
            self._since_refit += 1

    def ended_unfinished(self, job: JobSpec, ran: float) -> None:
        """A job failed or was cancelled after running ``ran`` s: it does not join the
        history, but a statement it ran past by more than 2x still joins its user's
        record (cancelling an overrun does not hide it)."""
        if job.stated_estimate is not None and overran(job.stated_estimate, ran):
            self.trust.observe(job.user, job.stated_estimate, ran)

    # -- refits ------------------------------------------------------------------------
    def maybe_refit(self) -> None:
        """Start a refit when one is due; called by the reconcile loop, returns at once."""
        if self.model_dir is None or self.live.finished_jobs < self.live.min_jobs:
            return
        with self._lock:
            if self._running is not None or self._since_refit == 0:
                return
            due = (
                self.live.version == 0
                or self._since_refit >= self.refit_every
                or (
                    self.refit_interval_s > 0
                    and self.clock() - self._refit_at >= self.refit_interval_s
                )
            )
            if due:
                self._start_locked()

    def refit(self, wait_s: float = 0.0) -> dict[str, Any]:
        """Start a refit now (or join the one running); wait up to ``wait_s`` for it."""
        if self.model_dir is None:
            raise RefitRefused("this service keeps no model folder: refits are off")
        finished = self.live.finished_jobs
        if finished < self.live.min_jobs:
            raise RefitRefused(
                f"too little history for a model: {finished} of {self.live.min_jobs} finished jobs"
            )
        with self._lock:
            started = self._running is None
            if started:
                self._start_locked()
            target = self._target
            deadline = time.monotonic() + wait_s
            while self._running is not None and self._target == target:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._done.wait(left)
            return self._outcome_locked(target, started)

    def refit_outcome(self, target: int, started: bool) -> dict[str, Any]:
        """Where the refit to version ``target`` stands now, without waiting: what
        :meth:`refit` answers (an async waiter polls it, holding no thread)."""
        with self._lock:
            return self._outcome_locked(target, started)

    def _outcome_locked(self, target: int, started: bool) -> dict[str, Any]:
        if self.live.version >= target:
            return {"status": "done", "version": target}
        if self._running is None:  # it failed
            return {"status": "failed", "version": target, "error": self.last_error}
        return {"status": "started" if started else "running", "version": target}

    def _executor(self) -> Executor:
        """Where refits run: a Dask cluster's workers, else one local spawned process."""
        if self._pool is None:
            if self.workers:
                from distributed import Client

                # a worker lost mid-refit: Dask runs the task again on another one
                self._client = Client(  # type: ignore[no-untyped-call, unused-ignore]
                    self.workers, timeout="10s", set_as_default=False
                )
                self._pool = self._client.get_executor()
            else:
                # below the service's priority: the loop comes first
                self._pool = one_fit_process(niceness=10)
        return self._pool

    def _start_locked(self) -> None:
        pool = self._executor()
        assert self.engine is not None and self.model_dir is not None
        self._target = max(self._last_version, self.live.version) + 1
        self._since_refit = 0
        self._refit_at = self.clock()
        url = self.engine.url.render_as_string(hide_password=False)
        try:
            future = pool.submit(_refit, url, str(self.model_dir), self._target)
        except RuntimeError:  # BrokenProcessPool (its worker was killed): a fresh one
            pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
            self._start_locked()
            return
        self._running = future
        future.add_done_callback(self._finished_refit)

    def _finished_refit(self, future: Future[_Fitted]) -> None:
        """Record the new version, then install it (off the reconcile loop: a pool thread)."""
        try:
            fitted = future.result()
            model, version = load_model(Path(fitted.path))
            assert self.engine is not None
            now = self.clock()
            with Session(self.engine) as session:
                session.add(
                    ModelRow(
                        kind=KIND,
                        version=version,
                        path=fitted.path,
                        trained_at=now,
                        rows=fitted.rows,
                        fit_s=fitted.fit_s,
                    )
                )
                session.commit()
            self.live.install(model, version)
            with self._lock:
                self._last_version = max(self._last_version, version)
                self.trained_rows, self.trained_at = fitted.rows, now
                self.last_error = ""
            logger.info(
                "ilucid serve: duration model v%s fitted on %s jobs in %.1f s",
                version,
                fitted.rows,
                fitted.fit_s,
            )
        except Exception as exc:  # a failed refit keeps the previous model
            with self._lock:
                self.last_error = f"{type(exc).__name__}: {exc}"
                if self._pool is not None and isinstance(exc, BrokenProcessPool):
                    self._pool.shutdown(wait=False, cancel_futures=True)
                    self._pool = None
            logger.exception("ilucid serve: duration model refit failed: %r", exc)
        finally:
            with self._lock:
                if self._running is future:
                    self._running = None
                self._done.notify_all()

    def status(self) -> dict[str, Any]:
        """What /model shows: the current version and whether a refit is under way."""
        with self._lock:
            return {
                "kind": KIND,
                "version": self.live.version,
                "trained_at": self.trained_at,
                "trained_rows": self.trained_rows,
                "finished_jobs": self.live.finished_jobs,
                "min_jobs": self.live.min_jobs,
                "refit_every": self.refit_every,
                "refit_interval_s": self.refit_interval_s,
                "refitting": self._running is not None,
                "refit_version": self._target if self._running is not None else None,
                "last_error": self.last_error,
            }

    def close(self) -> None:
        """Stop the worker (a refit under way is abandoned; the last model stays)."""
        with self._lock:
            pool, self._pool = self._pool, None
            client, self._client = self._client, None
        if client is not None:  # a Dask executor: closing the client cancels its tasks
            client.close()
        elif isinstance(pool, ProcessPoolExecutor):
            # a refit under way would hold the service's exit until it is done (the
            # executor joins its worker at exit): end the worker now. Python 3.11 has
            # no public call for it (3.14's terminate_workers), hence ``_processes``.
            workers = list(pool._processes.values()) if pool._processes else []
            pool.shutdown(wait=False, cancel_futures=True)
            for worker in workers:
                worker.terminate()
