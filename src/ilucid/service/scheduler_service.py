"""The live scheduler: the same core as the simulator, against the wall clock.

One reconcile pass (level-triggered, so a missed event heals on the next):

1. observe the backend (what really runs and what ended);
2. record ends in the database and tell the core (``finish``); a job whose
   process vanished without an exit record is requeued, not lost;
3. ask the core to schedule (``schedule(now)``);
4. apply its decisions through the backend (start, stop) and store them with
   their reasons.

Every accepted job is in the database before the API answers, so a crash of
the service loses nothing: on restart the core is rebuilt from the database
and running processes are re-adopted from the backend.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ilucid.backends.base import (
    Backend,
    BackendUnavailable,
    Cancels,
    ChecksSubmissions,
    ExplainsWaits,
    ForgetsEndedJobs,
    Observation,
    ProcessState,
    PublishesReasons,
)
from ilucid.backends.metrics import MetricsSource
from ilucid.core import (
    Action,
    Decision,
    JobClass,
    JobSpec,
    JobStatus,
    Placement,
    Policy,
    Scheduler,
    SchedulerConfig,
    make_policy,
)
from ilucid.core.policies import needs_profiler
from ilucid.estimators.packing import PackingAnalyzer
from ilucid.service.backend_queue import BackendQueue
from ilucid.service.db import DecisionRow, JobRow, TransitionRow
from ilucid.service.duration_keeper import DurationKeeper
from ilucid.service.estimator_log import record_estimators
from ilucid.service.faults import crash_point
from ilucid.service.latency import Latency
from ilucid.service.lifecycle import NO_GPUS, STORED_STATES, Phase, check_move, phase_of
from ilucid.service.live_profiler import profile_report
from ilucid.service.live_sampling import Sampler, measured_run, measured_summary

__all__ = ["JobRequest", "SchedulerService", "ServiceError"]

#: Job states as the service stores them (the lifecycle's stored phases).
PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED = STORED_STATES
ENDED = frozenset({SUCCEEDED, FAILED, CANCELLED})


class ServiceError(ValueError):
    """A request the service refuses; the message says why."""


@dataclass(frozen=True, slots=True)
class JobRequest:
    command: Sequence[str]
    gpus: int = 1
    job_class: str = "training"
    user: str = "default"
    tenant: str = "default"
    cwd: str | None = None
    estimate_s: float | None = None
    checkpoint_s: float | None = None
    priority: int = 0
    run_as: str | None = None  # the Unix user the job runs as (its token's); None: default


class SchedulerService:
    def __init__(
        self,
        engine: Engine,
        backend: Backend,
        policy: str = "tiered",
        config: SchedulerConfig | None = None,
        clock: Callable[[], float] = time.time,
        metrics: MetricsSource | None = None,
        sample_every_s: float = 10.0,
        policy_factory: Callable[[str], Policy] = make_policy,
        packing: PackingAnalyzer | None = None,
        packing_source: str = "",
        durations: DurationKeeper | None = None,
    ) -> None:
        self.metrics = metrics
        self.policy_factory = policy_factory
        self.packing = packing
        #: the core's scheduling pass, and the whole reconcile (observe, database, apply)
        self.pass_latency = Latency()
        self.reconcile_latency = Latency()
        self.sampler = Sampler(metrics, sample_every_s) if metrics is not None else None
        self.engine = engine
        self.backend = backend
        self.policy_name = policy
        self.config = config or SchedulerConfig()
        self.clock = clock
        self.lock = threading.RLock()
        self.wake = threading.Event()
        self._stopping: dict[str, str] = {}  # job id -> "cancelled" or "preempted"
        self._forgets: list[str] = []  # ended jobs whose files go once the end is committed
        self._stop_retry: set[str] = set()  # stops the backend could not take yet
        self.leading = True  # a replica behind leader election starts as a follower
        self._published_at = 0.0
        self._last_number = 0
        self.backend_queue = BackendQueue(
            backend,
            self._new_job_id,
            lambda row, now: self.scheduler.submit(_spec(row), now),
            clock,
        )
        self._catch_up_job_numbers()
        record_estimators(engine, packing, packing_source, clock())
        # without a model folder (tests, the demo) estimates are medians and nothing refits
        self.durations = durations or DurationKeeper()
        self.durations.start(engine)
        with self.lock:
            self._rebuild(backend.observe())

    def _new_job_id(self) -> str:
        self._last_number += 1
        return f"j{self._last_number:06d}"

    def _catch_up_job_numbers(self) -> None:
        """Job ids continue from the newest in the database (shared with other replicas)."""
        with Session(self.engine) as session:
            last = session.scalars(select(JobRow.id).order_by(JobRow.id.desc()).limit(1)).first()
        if last and last[1:].isdigit():
            self._last_number = max(self._last_number, int(last[1:]))

    # -- recovery ----------------------------------------------------------------------
    def _rebuild(self, seen: Observation) -> None:
        """A fresh core from the database; running jobs re-adopted from the backend."""
        self.cluster = seen.cluster
        self.scheduler = Scheduler(
            self.cluster, self.policy_factory(self.policy_name), config=self.config
        )
        node_index = {node.name: i for i, node in enumerate(self.cluster.nodes)}
        #: running jobs found alive (or ended unseen) and taken back at this rebuild
        self.readopted: list[str] = []
        with Session(self.engine) as session:
            rows = session.scalars(
                select(JobRow)
                .where(JobRow.state.in_([PENDING, RUNNING]))
                .order_by(JobRow.submit_time, JobRow.id)
            ).all()
            now = self.clock()
            for row in rows:
                observed = seen.jobs.get(row.id)
                alive = observed is not None and observed.state in (
                    ProcessState.RUNNING,
                    ProcessState.STOPPING,
                )
                # a process that ended while the service was down is adopted too: the
                # first pass records how it ended (requeueing it would run it twice)
                ended = observed is not None and observed.state is ProcessState.EXITED
                if row.state == RUNNING and (alive or ended):
                    assert observed is not None
                    self._adopt(row, observed.parts, node_index, now)
                    self.readopted.append(row.id)
                    if not row.gpu_indices:  # launched, but the crash beat the record
                        row.gpu_indices = ",".join(map(str, observed.gpus)) or NO_GPUS
                    continue
                if row.state == PENDING and alive:  # preempted before the restart
                    self._stopping[row.id] = "preempted"
                    self._stop(row.id)
                if row.state == RUNNING:  # cannot be re-adopted: requeue it cleanly
                    self._transition(session, row, PENDING, "not running after a restart")
                    row.gpu_indices = ""
                self.scheduler.submit(_spec(row), row.submit_time)
            session.commit()
            # a crash after an end was committed and before the backend forgot the job
            exited = [j for j, o in seen.jobs.items() if o.state is ProcessState.EXITED]
            self._forgets += session.scalars(
                select(JobRow.id).where(JobRow.id.in_(exited), JobRow.state.in_(ENDED))
            ).all()
        self._forget_recorded_ends()

    def _adopt(
        self,
        row: JobRow,
        parts: Sequence[tuple[str, int]],
        node_index: dict[str, int],
        now: float,
    ) -> None:
        """Account a job found running after a restart where the backend says it runs.

        When the backend cannot say (Slurm right after its controller restarted reports
        GPUs without their type), or what it says no longer fits the core's books, the
        job is accounted wherever the placer finds room; with no room left it stays out
        of the core's books: it runs on, is never started again, and its end is recorded.
        A restart never crashes on this and never runs a job twice.
        """
        self.scheduler.submit(_spec(row), row.submit_time)
        candidates: list[Placement] = []
        if parts and all(name in node_index for name, _ in parts):
            candidates.append(Placement(tuple((node_index[name], n) for name, n in parts)))
        guess = self.scheduler.placer.place(self.scheduler.jobs[row.id].spec, self.scheduler.free)
        if guess is not None:
            candidates.append(guess)
        candidates.append(Placement(((0, row.gpus),)))
        for placement in candidates:
            try:
                self.scheduler.adopt(row.id, placement, now)
                return
            except ValueError:
                continue
        self.scheduler.withdraw(row.id, now)
        print(
            f"ilucid serve: {row.id} runs but no GPUs are left to account it on; it keeps"
            " running and its end is recorded",
            flush=True,
        )

    def _finish_in_core(self, job_id: str, now: float) -> None:
        """Tell the core a job ended (a job adopted outside its books has nothing to free)."""
        state = self.scheduler.jobs.get(job_id)
        if state is not None and state.status is JobStatus.RUNNING:
            self.scheduler.finish(job_id, now)

    # -- requests ----------------------------------------------------------------------
    def submit(self, request: JobRequest) -> str:
        if not request.command or any(not isinstance(a, str) for a in request.command):
            raise ServiceError("command must be a non-empty list of strings")
        if not request.command[0] or any("\x00" in a for a in request.command):
            raise ServiceError("command: the program must be named and no argument may hold NUL")
        if request.cwd is not None and "\x00" in request.cwd:
            raise ServiceError("cwd must not hold NUL")
        if request.gpus < 0 or request.gpus > self.cluster.total_gpus:
            raise ServiceError(
                f"gpus must be between 0 and {self.cluster.total_gpus} (this cluster's total)"
            )
        try:
            job_class = JobClass(request.job_class)
        except ValueError:
            known = ", ".join(c.value for c in JobClass)
            raise ServiceError(f"class must be one of {known}") from None
        if isinstance(self.backend, ChecksSubmissions):
            try:
                self.backend.check(list(request.command), request.cwd)
            except ValueError as exc:
                raise ServiceError(str(exc)) from None
        for _ in range(5):
            try:
                return self._store(request, job_class)
            except IntegrityError:  # another replica took the id: count on from the database
                self._catch_up_job_numbers()
        raise ServiceError("could not store the job (job ids kept colliding); try again")

    def _store(self, request: JobRequest, job_class: JobClass) -> str:
        # estimated outside the lock: the reconcile loop need not wait for a model
        submitted = self.clock()
        estimate = self.durations.estimate(
            JobSpec("", submitted, request.gpus, 0.0, tenant=request.tenant, user=request.user)
        )
        # expire_on_commit off: the row is read once more below, without a reload query
        with self.lock, Session(self.engine, expire_on_commit=False) as session:
            now = max(self.clock(), submitted)
            job_id = self._new_job_id()
            row = JobRow(
                id=job_id,
                user=request.user,
                tenant=request.tenant,
                job_class=job_class.value,
                gpus=request.gpus,
                command=json.dumps(list(request.command)),
                cwd=request.cwd,
                state=PENDING,
                submit_time=now,
                estimate_s=request.estimate_s,
                model_estimate_s=estimate.seconds,
                estimate_version=estimate.version,
                estimate_note=estimate.note,
                checkpoint_s=request.checkpoint_s,
                priority=request.priority,
                run_as=request.run_as,
                gpu_indices="",
                preemptions=0,
            )
            session.add(row)
            session.add(
                TransitionRow(
                    job_id=job_id, time=now, from_state="", to_state=PENDING, reason="submitted"
                )
            )
            session.commit()  # accepted only once stored
            self.scheduler.submit(_spec(row), now)
            self.backend_queue.enqueue(row)
        self.wake.set()
        return job_id

    def _stop(self, job_id: str) -> None:
        try:
            self.backend.stop(job_id)
        except BackendUnavailable as exc:  # asked again on the next pass
            self._stop_retry.add(job_id)
            print(f"ilucid serve: stopping {job_id} failed for now: {exc}", flush=True)

    def cancel(self, job_id: str) -> str:
        with self.lock, Session(self.engine) as session:
            row = session.get(JobRow, job_id)
            if row is None:
                raise ServiceError(f"no job {job_id}")
            if row.state in ENDED:
                return row.state
            now = self.clock()
            if row.state == RUNNING:
                self._stopping[job_id] = "cancelled"
                if isinstance(self.backend, Cancels):
                    self.backend.cancel(job_id)
                else:
                    self._stop(job_id)
                return "stopping"
            if isinstance(self.backend, Cancels):
                self.backend.cancel(job_id)  # a queued copy in the backend (Slurm) goes too
            self.scheduler.withdraw(job_id, now)
            self._transition(session, row, CANCELLED, "cancelled while pending")
            row.end_time = now
            session.commit()
            return CANCELLED

    # -- the loop ------------------------------------------------------------------------
    def reconcile(self) -> list[Decision]:
        whole = time.perf_counter()
        with self.lock:
            seen = self.backend.observe()
            now = self.clock()
            for job_id in list(self._stop_retry):
                self._stop_retry.discard(job_id)
                if job_id in self._stopping:
                    self._stop(job_id)
            with Session(self.engine) as session:
                self._settle_ended(session, seen, now)
                self.backend_queue.sync(session, seen, self.cluster.total_gpus)
                self._end_profiling(session, now)
                began = time.perf_counter()
                decisions = self.scheduler.schedule(now)
                self.pass_latency.observe(time.perf_counter() - began)
                self._apply(session, decisions, now)
                # write intent before acting: a crash after this commit leaves a job
                # "running" without a process (requeued on restart) or a process the
                # restart re-adopts, never a job started twice
                session.commit()
                self._forget_recorded_ends()
                for decision in decisions:
                    if decision.action is Action.PREEMPT:
                        self._stop(decision.job_id)
                self._retry_starts(session)
                if self.sampler is not None:
                    self.sampler.sample(session, self.backend, now, self._stopping)
                session.commit()
            self._publish_reasons(now)
            self.durations.maybe_refit()  # hands the work to its worker process at once
            self.reconcile_latency.observe(time.perf_counter() - whole)
            return decisions

    def _settle_ended(self, session: Session, seen: Observation, now: float) -> None:
        for job_id, why in list(self._stopping.items()):
            observed = seen.jobs.get(job_id)
            if observed is not None and observed.state in (
                ProcessState.RUNNING,
                ProcessState.STOPPING,
            ):
                continue
            del self._stopping[job_id]
            self._forgets.append(job_id)
            row = session.get(JobRow, job_id)
            if why == "profiled" and row is not None and row.state == RUNNING:
                if observed is not None and observed.exit_code == 0:
                    why = ""  # it finished as its profile ended: recorded below as done
                else:
                    self._profiled(session, row, now)
                    continue
            if why == "cancelled" and row is not None and row.state == RUNNING:
                row.exit_code = observed.exit_code if observed is not None else None
                row.end_time = now
                self._finish_in_core(job_id, now)
                self._transition(session, row, CANCELLED, "cancelled by its owner")
        running = session.scalars(select(JobRow).where(JobRow.state == RUNNING)).all()
        for row in running:
            if row.id in self._stopping or not row.gpu_indices:
                continue  # being stopped, or its start still waits for GPUs
            observed = seen.jobs.get(row.id)
            state = observed.state if observed is not None else ProcessState.LOST
            if state in (ProcessState.RUNNING, ProcessState.STOPPING):
                continue
            if state in (ProcessState.LOST, ProcessState.HELD) or observed is None:
                if row.id in self.scheduler.jobs:
                    self.scheduler.requeue(row.id, now)
                else:  # adopted outside the core's books: it queues afresh
                    self.scheduler.submit(_spec(row), row.submit_time)
                row.gpu_indices = ""
                row.preemptions += 1
                self._transition(session, row, PENDING, "its process vanished without an exit")
                self._forgets.append(row.id)
                continue
            row.exit_code = observed.exit_code
            row.end_time = now
            code = observed.exit_code
            final, why = (
                (SUCCEEDED, "exited with code 0")
                if code == 0
                else (
                    FAILED,
                    f"exited with code {code}",
                )
            )
            crash_point("end-seen")
            self._finish_in_core(row.id, now)
            self._transition(session, row, final, why)
            crash_point("end-recorded")
            self._forgets.append(row.id)
            if final == SUCCEEDED and row.first_start is not None:
                self.durations.finished(_spec(row), max(0.0, now - row.first_start))

    def _end_profiling(self, session: Session, now: float) -> None:
        """Stop each profiling run whose time is up; its measurements go to the policy
        once the process is gone (``_profiled``), and it waits for the main pool."""
        due = session.scalars(
            select(JobRow).where(
                JobRow.state == RUNNING,
                JobRow.profile_until.is_not(None),
                JobRow.profile_until <= now,
            )
        ).all()
        for row in due:
            if row.id in self._stopping or row.gpu_indices in ("", NO_GPUS):
                continue
            if not needs_profiler(self.policy_name):
                row.profile_until = None  # the policy changed: the job simply runs on
                continue
            self._stopping[row.id] = "profiled"
            self._stop(row.id)

    def _profiled(self, session: Session, row: JobRow, now: float) -> None:
        """Hand a finished profiling run's measurements to the policy; the job requeues."""
        run = measured_run(session, row, now)
        past = [
            end - start
            for start, end in session.execute(
                select(JobRow.first_start, JobRow.end_time).where(JobRow.state == SUCCEEDED)
            )
            if start is not None and end is not None
        ]
        report = profile_report(run, row.estimate_s, past, self.packing)
        self.scheduler.profiled(row.id, now, report)
        row.profile_until = None
        row.gpu_indices = ""
        self._transition(session, row, PENDING, f"profiled: {report.note}")

    def _publish_reasons(self, now: float, every_s: float = 5.0, first: int = 200) -> None:
        """Backends that show why a job waits in the cluster manager itself (Kubernetes
        conditions and events) get the sentence of the first jobs in the queue."""
        backend = self.backend
        if not isinstance(backend, PublishesReasons) or now - self._published_at < every_s:
            return
        self._published_at = now
        for job_id, _position, _start in self.queue()[:first]:
            try:
                backend.publish_reason(job_id, self.scheduler.why_pending(job_id, now))
            except BackendUnavailable as exc:
                print(f"ilucid serve: publishing why {job_id} waits: {exc}", flush=True)
                return

    def _forget_recorded_ends(self) -> None:
        """Let the backend drop the files of jobs whose end is now committed.

        Only after the commit: a crash between forgetting a job's exit file and
        recording its end would leave it "running" with no trace of its exit, and
        the restart would run it again. A crash after the commit and before this
        leaves stale files, which the restart clears (``_rebuild``).
        """
        if self._forgets:
            crash_point("end-committed")
        while self._forgets:
            self._forget(self._forgets.pop())
            crash_point("end-forgotten")

    def _forget(self, job_id: str) -> None:
        if isinstance(self.backend, ForgetsEndedJobs):
            self.backend.forget(job_id)

    def _apply(self, session: Session, decisions: list[Decision], now: float) -> None:
        for decision in decisions:
            row = session.get(JobRow, decision.job_id)
            if row is None:
                continue
            reason = decision.reasons[0] if decision.reasons else None
            message = reason.message if reason else ""
            session.add(
                DecisionRow(
                    time=now,
                    job_id=decision.job_id,
                    action=decision.action.value,
                    code=reason.code if reason else "",
                    message=decision.explain(),
                    placement=json.dumps(decision.placement.parts) if decision.placement else "",
                )
            )
            if decision.action is Action.START:
                if row.first_start is None:
                    row.first_start = now
                row.profile_until = None if decision.limit_s is None else now + decision.limit_s
                self._transition(session, row, RUNNING, message)
                row.gpu_indices = ""  # launched by _retry_starts once this is committed
            elif decision.action is Action.PREEMPT:
                # the core has requeued it already; the process ends on the backend's signal
                self._transition(session, row, PENDING, message)
                row.preemptions += 1
                row.gpu_indices = ""
                self._stopping[row.id] = "preempted"

    def _launch(self, row: JobRow) -> None:
        state = self.scheduler.jobs.get(row.id)
        nodes = self.cluster.nodes
        placement = (
            [(nodes[index].name, count) for index, count in state.placement.parts]
            if state is not None and state.placement is not None and row.gpus > 0
            else None
        )
        try:
            gpus = self.backend.start(
                row.id,
                json.loads(row.command),
                row.gpus,
                cwd=row.cwd,
                placement=placement,
                run_as=row.run_as,
            )
        except BackendUnavailable as exc:  # tried again on the next pass
            print(f"ilucid serve: launching {row.id} failed for now: {exc}", flush=True)
            return
        except (OSError, ValueError) as exc:  # e.g. a missing working directory
            session = Session.object_session(row)
            if session is not None:
                now = self.clock()
                row.end_time = now
                self._finish_in_core(row.id, now)
                self._transition(session, row, FAILED, f"could not be launched: {exc}")
            return
        if gpus is not None:
            row.gpu_indices = ",".join(map(str, gpus)) or NO_GPUS
            session = Session.object_session(row)
            if session is not None:
                # the launch ends the hidden "decided" phase (stored: running, no GPUs)
                check_move(row.id, Phase.DECIDED, RUNNING)
                session.add(
                    TransitionRow(
                        job_id=row.id,
                        time=self.clock(),
                        from_state=Phase.DECIDED.value,
                        to_state=RUNNING,
                        reason=f"launched on GPUs {row.gpu_indices}",
                    )
                )

    def _retry_starts(self, session: Session) -> None:
        """Starts that waited for a stopping job's GPUs (or its own old process) to go."""
        waiting = session.scalars(
            select(JobRow).where(JobRow.state == RUNNING, JobRow.gpu_indices == "")
        ).all()
        for row in waiting:
            if row.id not in self._stopping:
                self._launch(row)

    def profile(self, job_id: str) -> dict[str, float]:
        """What the live profiler measured for a job: means and peak memory."""
        return measured_summary(self.engine, job_id)

    def _transition(self, session: Session, row: JobRow, state: str, reason: str) -> None:
        """Move ``row`` to ``state`` (checked against the lifecycle's table), stored with
        its stimulus: the decision's sentence or what was observed."""
        check_move(row.id, phase_of(row.state, row.gpu_indices), state)
        session.add(
            TransitionRow(
                job_id=row.id,
                time=self.clock(),
                from_state=row.state,
                to_state=state,
                reason=reason,
            )
        )
        row.state = state

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
                print(f"ilucid serve: reconcile failed: {exc!r}", flush=True)
            self.wake.wait(interval_s)
            # let a burst of submissions gather: one pass serves them all
            stop.wait(min(0.05, interval_s))
            self.wake.clear()

    def _may_act(self, gate: Callable[[], bool] | None) -> bool:
        """Whether this replica leads; one that just became leader first rebuilds its core
        from the shared database and the backend (the previous leader changed both)."""
        if gate is None:
            return True
        leading = gate()
        if leading and not self.leading:
            with self.lock:
                self._catch_up_job_numbers()
                self._rebuild(self.backend.observe())
        self.leading = leading
        return leading

    def set_policy(self, policy: str) -> None:
        """Switch policy: the core is rebuilt from the database (running jobs adopted)."""
        with self.lock:
            self.policy_factory(policy)  # fails early on an unknown name
            self.policy_name = policy
            self._rebuild(self.backend.observe())
        self.wake.set()

    # -- questions -------------------------------------------------------------------------
    def explain(self, job_id: str) -> str:
        with self.lock:
            state = self.scheduler.jobs.get(job_id)
            if state is None:
                return ""
            backend_says = (
                self.backend.reason(job_id) if isinstance(self.backend, ExplainsWaits) else None
            )
            if state.status is JobStatus.PENDING:
                why = self.scheduler.why_pending(job_id, self.clock())
            else:
                why = f"{job_id} is {state.status.value}"
            return f"{why}; {backend_says}" if backend_says else why

    def queue(self) -> list[tuple[str, int | None, float | None]]:
        """Pending jobs with their queue position and expected start time."""
        with self.lock:
            now = self.clock()
            expected = self.scheduler.expected_starts(now)
            rows = []
            for job in self.scheduler.pending():
                position = self.scheduler.policy.queue_position(job, now)
                rows.append((job.spec.id, position, expected.get(job.spec.id)))
            rows.sort(key=lambda r: (r[1] if r[1] is not None else 1 << 30, r[0]))
            return rows


def _spec(row: JobRow) -> JobSpec:
    return JobSpec(
        row.id,
        row.submit_time,
        row.gpus,
        0.0,  # the true duration is unknown to a live scheduler
        job_class=JobClass(row.job_class),
        tenant=row.tenant,
        user=row.user,
        priority=row.priority,
        # the user's own estimate wins; else the live duration model's (or its median)
        estimate=row.estimate_s if row.estimate_s is not None else row.model_estimate_s,
        checkpoint_s=row.checkpoint_s,
    )
