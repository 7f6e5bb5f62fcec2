"""The live scheduler: the same core as the simulator, against the wall clock.

``SchedulerService`` is the top: it takes requests (submit, cancel, questions),
gates the loop on leadership, and holds the lock its pieces run under:

* :class:`~ilucid.service.job_store.JobStore`: persistence, ids and every stored
  move of a job's lifecycle, with its stimulus;
* :class:`~ilucid.service.reconciler.Reconciler`: the pass (observe -> record ->
  schedule -> apply) and the core it keeps in step;
* :class:`~ilucid.service.profiling_coordinator.ProfilingCoordinator`: ends
  profiling runs and hands their measurements to the policy;
* :class:`~ilucid.service.live_sampling.Sampler`: GPU use of running jobs.

Every accepted job is in the database before the API answers, so a crash of
the service loses nothing: on restart the core is rebuilt from the database
and running processes are re-adopted from the backend.

Submissions never wait for the lock: they are committed together
(:mod:`~ilucid.service.group_commit`), then reach the core through an inbox that
whoever takes the lock next empties, in memory (:mod:`~ilucid.service.core_inbox`).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ilucid.backends.base import Backend, Capabilities, NotAllowed
from ilucid.backends.metrics import MetricsSource
from ilucid.core import (
    Cluster,
    Decision,
    JobClass,
    JobSpec,
    JobStatus,
    Policy,
    Scheduler,
    SchedulerConfig,
)
from ilucid.core.policies import DEFAULT_PROFILE, needs_profiler
from ilucid.core.start_range import StartRange
from ilucid.estimators.live import DurationEstimate
from ilucid.estimators.packing import PackingAnalyzer
from ilucid.service.core_inbox import CoreLock, Inbox
from ilucid.service.db import JobRow
from ilucid.service.duration_keeper import DurationKeeper
from ilucid.service.estimate_memo import EstimateMemo
from ilucid.service.estimator_log import record_estimators
from ilucid.service.group_commit import GroupCommit
from ilucid.service.job_accounts import DEFAULT_DYNAMIC_UIDS, run_as_for
from ilucid.service.job_model import (
    NotPermitted,
    ServiceError,
    TryAgain,
    Unsatisfiable,
    check_request,
)
from ilucid.service.job_store import (
    CANCELLED,
    ENDED,
    JobRequest,
    JobStore,
    StoryLine,
    phase,
    spec_of,
)
from ilucid.service.latency import Latency
from ilucid.service.lifecycle import Cause, Phase, Stimulus, new_stimulus_id
from ilucid.service.live_policies import live_policy_factory
from ilucid.service.live_sampling import Sampler, measured_summary
from ilucid.service.profiling_coordinator import ProfilingCoordinator
from ilucid.service.progress_view import progress_sentence
from ilucid.service.reconciler import Queued, Reconciler
from ilucid.service.restart_outcome import RestartOutcome
from ilucid.service.retries import DEFAULT_MAX_RETRIES
from ilucid.service.running_sentence import describe_running

__all__ = ["SchedulerService"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class _Accepted:
    """A checked submission on its way into the database."""

    request: JobRequest
    job_class: JobClass
    estimate: DurationEstimate
    submitted: float


class SchedulerService:
    """Requests in, decisions out: the live scheduler a site runs (one per database;
    replicas behind leader election pass only while they lead)."""

    def __init__(
        self,
        engine: Engine,
        backend: Backend,
        policy: str = DEFAULT_PROFILE,
        config: SchedulerConfig | None = None,
        clock: Callable[[], float] = time.time,
        metrics: MetricsSource | None = None,
        sample_every_s: float = 10.0,
        policy_factory: Callable[[str], Policy] | None = None,
        packing: PackingAnalyzer | None = None,
        packing_source: str = "",
        durations: DurationKeeper | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        dynamic_uids: tuple[int, int] | None = DEFAULT_DYNAMIC_UIDS,
    ) -> None:
        """``max_retries``: retries of a job whose launch failed or whose process vanished,
        for jobs that give none (see :mod:`~ilucid.service.retries`)."""
        self.engine = engine
        self.backend = backend
        #: uids for users without a Unix account, when the backend runs jobs as users
        self.dynamic_uids = dynamic_uids
        #: what the backend can do beyond starting and stopping, found once, here
        self.capabilities = Capabilities.of(backend)
        self.policy_name = policy
        # built as a live service builds it: without a metrics source nothing is profiled
        self.policy_factory = policy_factory or live_policy_factory(profiling=metrics is not None)
        self.clock = clock
        #: committed submissions the core has not taken yet: taking the lock takes them
        self.inbox: Inbox[JobRow] = Inbox()
        self.lock = CoreLock(self._take_inbox)
        self.wake = threading.Event()
        self.leading = True  # a replica behind leader election starts as a follower
        self.store = JobStore(engine, clock)
        record_estimators(engine, packing, packing_source, clock())
        # without a model folder (tests, the demo) estimates are medians and nothing refits
        self.durations = durations or DurationKeeper()
        self.durations.start(engine)
        self.estimates = EstimateMemo(self.durations)
        #: submissions that arrive together share one transaction
        self.commits: GroupCommit[_Accepted, str] = GroupCommit(self._store_batch)
        self._dynamic_run_as: dict[str, str] = {}  # user -> "#uid": given once, for good
        self.reconciler = Reconciler(
            store=self.store,
            backend=backend,
            capabilities=self.capabilities,
            config=config or SchedulerConfig(),
            clock=clock,
            durations=self.durations,
            profiling=ProfilingCoordinator(self.store, packing),
            sampler=Sampler(metrics, sample_every_s) if metrics is not None else None,
            max_retries=max_retries,
        )
        with self.lock:
            self._rebuild(restart=True)

    # -- what the pieces hold, for the API and the tests ---------------------------------
    @property
    def scheduler(self) -> Scheduler:
        return self.reconciler.scheduler

    @property
    def cluster(self) -> Cluster:
        return self.reconciler.cluster

    @property
    def pass_latency(self) -> Latency:
        return self.reconciler.pass_latency

    @property
    def reconcile_latency(self) -> Latency:
        return self.reconciler.reconcile_latency

    @property
    def readopted(self) -> list[str]:
        """Running jobs taken back at the last rebuild (start, policy change, leadership)."""
        return self.reconciler.readopted

    @property
    def restart_outcome(self) -> RestartOutcome:
        """What the last rebuild found of every job stored running."""
        return self.reconciler.outcome

    def _rebuild(self, restart: bool = False) -> None:
        """``restart``: this service (or replica, as it becomes leader) starts watching."""
        name = self.policy_name
        self.reconciler.rebuild(
            lambda: self.policy_factory(name), needs_profiler(name), restart=restart
        )

    # -- requests ----------------------------------------------------------------------
    def submit(self, request: JobRequest) -> str:
        """Accept a job: checked, stored and committed before its id is returned.

        Never under the lock: the job is committed with the submissions that arrive
        with it, then handed to the core now if no one holds the lock, else by the
        lock's next holder (the pass among them)."""
        request = self._with_account(request)
        self._check(request)
        job_id = self._store(request, JobClass(request.job_class))
        if self.lock.acquire(blocking=False):  # taking it hands the inbox to the core
            self.lock.release()
        return job_id

    def _with_account(self, request: JobRequest) -> JobRequest:
        """The request with the Unix identity its job runs as, where the backend runs
        each job as a user (a root local backend): never the service's own."""
        accounts = self.capabilities.accounts
        if accounts is None or not accounts.needs_account():
            return request
        if request.run_as is not None:  # the token's own Unix account
            return request
        # a user's dynamic uid is recorded once and never changes: asked once per user
        run_as = self._dynamic_run_as.get(request.user)
        if run_as is None:
            run_as = run_as_for(self.engine, request.user, None, self.dynamic_uids)
            self._dynamic_run_as[request.user] = run_as
        return dataclasses.replace(request, run_as=run_as)

    def _check(self, request: JobRequest) -> None:
        check_request(request, self.cluster)
        if request.gpu_milli < 1000 and self.capabilities.shares is None:
            raise Unsatisfiable(
                f"gpu_milli: the {self.backend.name} backend gives jobs whole GPUs only"
                " (leave gpu_milli out to ask for one whole GPU)"
            )
        checker = self.capabilities.checks
        if checker is not None:
            try:
                checker.check(list(request.command), request.cwd, request.run_as)
            except NotAllowed as exc:
                raise NotPermitted(str(exc)) from None
            except ValueError as exc:  # what this backend cannot run, however well asked
                raise Unsatisfiable(str(exc)) from None

    def _store(self, request: JobRequest, job_class: JobClass) -> str:
        # estimated outside any lock and transaction: no one waits for a model
        submitted = self.clock()
        estimate = self.estimates.estimate(
            JobSpec("", submitted, request.gpus, 0.0, tenant=request.tenant, user=request.user)
        )
        return self.commits.submit(_Accepted(request, job_class, estimate, submitted))

    def _store_batch(self, batch: Sequence[_Accepted]) -> list[str]:
        """Every submission that arrived together, in one transaction; once committed
        they go to the inbox, and the loop wakes (one pass for the whole burst)."""
        for _ in range(5):
            # expire_on_commit off: the core reads the rows once more, without a reload
            with Session(self.engine, expire_on_commit=False) as session:
                now = self.clock()
                rows = [
                    self.store.add(
                        session, a.request, a.job_class, a.estimate, max(now, a.submitted)
                    )
                    for a in batch
                ]
                try:
                    session.commit()  # accepted only once stored
                except IntegrityError:  # another replica took an id: count on from the database
                    session.rollback()
                    self.store.catch_up_job_numbers()
                    continue
            self.inbox.put(rows)
            self.wake.set()
            return [row.id for row in rows]
        raise TryAgain("could not store the job (job ids kept colliding); try again")

    def _take_inbox(self) -> None:
        """The core takes every committed submission it lacks (in memory: the lock's
        holder runs this as it takes the lock)."""
        for row in self.inbox.take():
            if row.id in self.scheduler.jobs:  # a rebuild read it from the database
                continue
            try:
                self.scheduler.submit(spec_of(row), row.submit_time)
            except ValueError as exc:  # the cluster shrank below it: kept, never lost
                logger.warning(
                    "ilucid serve: %s stays pending outside the queue until the cluster"
                    " can hold it: %s",
                    row.id,
                    exc,
                    extra={"job_id": row.id},
                )
            self.reconciler.backend_queue.enqueue(row)

    def cancel(self, job_id: str) -> str:
        """Cancel a job: a pending one at once, one with a process once the process is
        gone. The intent is committed before it is answered or acted on, so a crash
        cannot lose it: a restart finishes it, and a cancelled job is never launched."""
        canceller = self.capabilities.cancels
        cause = Cause(Stimulus.CANCEL, new_stimulus_id("cancel"))
        with self.lock, Session(self.engine) as session:
            row = session.get(JobRow, job_id)
            if row is None:
                raise ServiceError(f"no job {job_id}")
            if row.state in ENDED:
                return row.state
            current = phase(row)
            if current is Phase.STOPPING_CANCEL:
                return "stopping"
            now = self.clock()
            queued = self.scheduler.jobs.get(job_id)
            if queued is not None and queued.status is JobStatus.PENDING:
                self.scheduler.withdraw(job_id, now)  # it never starts again
            self.reconciler.retries.waiting.pop(job_id, None)  # nor one held for a retry
            if current is Phase.PENDING:
                self.store.transition(
                    session, row, Phase.CANCELLED, cause, "cancelled while pending"
                )
                session.commit()
                if canceller is not None:
                    canceller.cancel(job_id)  # a queued copy in the backend (Slurm) goes too
                return CANCELLED
            self.store.transition(
                session, row, Phase.STOPPING_CANCEL, cause, "cancel asked by its owner"
            )
            session.commit()  # the promise is stored before it is kept or answered
            if canceller is not None:
                canceller.cancel(job_id)
            else:
                self.reconciler.stop(job_id)
            return "stopping"

    # -- the loop ------------------------------------------------------------------------
    def reconcile(self) -> list[Decision]:
        """One pass (see :class:`~ilucid.service.reconciler.Reconciler`); taking the lock
        hands the inbox's submissions to the core first (timed as part of the pass)."""
        began = time.perf_counter()
        with self.lock:
            return self.reconciler.reconcile(began)

    def run(
        self,
        interval_s: float = 2.0,
        stop: threading.Event | None = None,
        heartbeat: Callable[[], None] | None = None,
        gate: Callable[[], bool] | None = None,
    ) -> None:
        """Reconcile every ``interval_s`` and whenever a request wakes the loop;
        ``heartbeat`` is called after every pass that completed; with ``gate`` (leader
        election) a pass runs only while it answers True."""
        stop = stop or threading.Event()
        while not stop.is_set():
            try:
                if self._may_act(gate):
                    self.reconcile()
                    if heartbeat is not None:
                        heartbeat()
            except Exception as exc:  # a running service never dies on one bad pass
                logger.exception("ilucid serve: reconcile failed: %r", exc)
            self.wake.wait(interval_s)
            # let a burst of submissions gather: one pass serves them all. At least as
            # long as the last pass took, so that under a steady stream of submissions
            # the loop holds at most half of the process's time and the API the rest
            last = self.reconciler.last_split.total_s
            stop.wait(min(max(0.05, last), interval_s))
            self.wake.clear()

    def _may_act(self, gate: Callable[[], bool] | None) -> bool:
        """Whether this replica leads; one that just became leader first rebuilds its core
        from the shared database and the backend (the previous leader changed both)."""
        if gate is None:
            return True
        leading = gate()
        if leading and not self.leading:
            with self.lock:
                self.store.catch_up_job_numbers()
                self._rebuild(restart=True)
        self.leading = leading
        return leading

    def set_policy(self, policy: str) -> None:
        """Switch policy: the core is rebuilt from the database (running jobs adopted)."""
        with self.lock:
            self.policy_factory(policy)  # fails early on an unknown name
            self.policy_name = policy
            self._rebuild()
        self.wake.set()

    # -- questions -------------------------------------------------------------------------
    def explain(self, job_id: str) -> str:
        """Why the job waits (or what it does now), with the cluster manager's own word."""
        explains = self.capabilities.explains
        with self.lock:
            waits = self.reconciler.retries.waiting.get(job_id)  # held back for a retry
            if waits is not None:
                return waits.sentence(self.clock())
            state = self.scheduler.jobs.get(job_id)
            if state is None or state.status is JobStatus.PENDING:
                with Session(self.engine) as session:
                    row = session.get(JobRow, job_id)
                if row is not None and row.stopping == "cancelled":
                    return (
                        "cancelled by its owner: waiting for its process to end, then"
                        " recorded cancelled (never started again)"
                    )
            if state is None:
                return ""
            backend_says = explains.reason(job_id) if explains is not None else None
            now = self.clock()
            if state.status is JobStatus.PENDING:
                why = self.scheduler.why_pending(job_id, now)
            else:
                with Session(self.engine) as session:
                    row = session.get(JobRow, job_id)
                if row is None:
                    return ""
                story = self.store.story(job_id)
                why = describe_running(row, story, state.placement, self.cluster, row.stopping, now)
            return f"{why}; {backend_says}" if backend_says else why

    def progress_words(self, job_id: str) -> str | None:
        """How far the job says it is and what that does to its estimate: the core's
        words once it measured a rate, else the service's from the stored report."""
        with self.lock:
            state = self.scheduler.jobs.get(job_id)
            running = state is not None and state.status is JobStatus.RUNNING
            said = self.scheduler.progress_words(job_id) if running else None
        if said:
            return said
        with Session(self.engine) as session:
            row = session.get(JobRow, job_id)
            return progress_sentence(row) if row is not None else None

    def story(self, job_id: str) -> list[StoryLine]:
        """Every stored move of the job with what caused it, oldest first."""
        return self.store.story(job_id)

    def queue(self) -> list[Queued]:
        """Pending jobs with their queue position and expected start (a range)."""
        with self.lock:
            return self.reconciler.queue(self.clock())

    def start_outlook(self, job_id: str) -> tuple[StartRange, str] | None:
        """A pending job's expected start and what it assumes (None: not in the core's
        queue, or the projection cannot place it)."""
        with self.lock:
            now = self.clock()
            state = self.scheduler.jobs.get(job_id)
            if state is None or state.status is not JobStatus.PENDING:
                return None
            outlook = self.scheduler.start_range(job_id, now)
            if outlook is None:
                return None
            return outlook, self.scheduler.start_assumptions(job_id, outlook, now)

    def profile(self, job_id: str) -> dict[str, float]:
        """What the live profiler measured for a job: means and peak memory."""
        return measured_summary(self.engine, job_id)
