"""The reconcile pass: observe -> record -> schedule -> apply, level-triggered.

1. observe the backend (what really runs and what ended);
2. record ends in the database and tell the core (``finish``); a job whose
   process vanished without an exit record, or whose launch failed, is retried
   after a backoff (:mod:`~ilucid.service.retries`), not lost;
3. ask the core to schedule (``schedule(now)``);
4. apply its decisions through the backend (start, stop), stored with their
   reasons. Intent is committed before acting: a crash leaves a job "running"
   without a process (requeued on restart) or a process the restart re-adopts,
   never a job started twice.

The reconciler owns the core. It is rebuilt from the database and the backend at
start, on a policy change, and when a replica becomes leader.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from sqlalchemy import select
from sqlalchemy.orm import Session

from ilucid.backends.base import (
    Backend,
    BackendUnavailable,
    Capabilities,
    Observation,
    ObservedJob,
    ProcessState,
)
from ilucid.core import (
    Action,
    Cluster,
    Decision,
    JobStatus,
    Placement,
    Policy,
    Scheduler,
    SchedulerConfig,
)
from ilucid.service.backend_queue import BackendQueue
from ilucid.service.db import DecisionRow, JobRow
from ilucid.service.duration_keeper import DurationKeeper
from ilucid.service.faults import crash_point
from ilucid.service.job_store import (
    CANCELLED,
    ENDED,
    FAILED,
    PENDING,
    RUNNING,
    SUCCEEDED,
    JobStore,
    spec_of,
)
from ilucid.service.latency import Latency
from ilucid.service.launch_words import share_gpus, why_these_gpus
from ilucid.service.lifecycle import NO_GPUS, Stimulus
from ilucid.service.live_sampling import Sampler
from ilucid.service.profiling_coordinator import ProfilingCoordinator
from ilucid.service.retries import DEFAULT_MAX_RETRIES, Retries, take_out_of_core

__all__ = ["Reconciler"]

_ALIVE = (ProcessState.RUNNING, ProcessState.STOPPING)


class Reconciler:
    """Runs the pass and keeps the core in step with the database and the backend.

    ``stopping`` maps a job the service asked to stop to why ("cancelled",
    "preempted" or "profiled") until its process is gone. Callers hold the
    service's lock around every method."""

    def __init__(
        self,
        *,
        store: JobStore,
        backend: Backend,
        capabilities: Capabilities,
        config: SchedulerConfig,
        clock: Callable[[], float],
        durations: DurationKeeper,
        profiling: ProfilingCoordinator,
        sampler: Sampler | None,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> None:
        self.store = store
        self.retries = Retries(store, max_retries)  # held back after a failed attempt
        self.backend = backend
        self.capabilities = capabilities
        self.config = config
        self.clock = clock
        self.durations = durations
        self.profiling = profiling
        self.sampler = sampler
        #: the core's scheduling pass, and the whole reconcile (observe, database, apply)
        self.pass_latency = Latency()
        self.reconcile_latency = Latency()
        self.stopping: dict[str, str] = {}
        self._forgets: list[str] = []  # ended jobs whose files go once the end is committed
        self._stop_retry: set[str] = set()  # stops the backend could not take yet
        self.published_at = 0.0
        self.profiles = False
        #: nodes the cluster manager took out of service, with its reason (last pass)
        self.excluded: dict[str, str] = {}
        #: running jobs found alive (or ended unseen) and taken back at the last rebuild
        self.readopted: list[str] = []
        self.backend_queue = BackendQueue(
            capabilities,
            backend.name,
            store.new_job_id,
            lambda row, now: self.scheduler.submit(spec_of(row), now),
            clock,
        )
        self.scheduler: Scheduler
        self.cluster: Cluster
        self._new_policy: Callable[[], Policy]

    # -- recovery ----------------------------------------------------------------------
    def rebuild(self, new_policy: Callable[[], Policy], profiles: bool) -> None:
        """A fresh core from the database; running jobs re-adopted from the backend
        (``new_policy`` makes the policy, again when the cluster changes; ``profiles``:
        whether it runs profiling runs)."""
        self._new_policy = new_policy
        policy = new_policy()
        seen = self.backend.observe()
        self.profiles = profiles
        self.cluster = seen.cluster
        self.scheduler = Scheduler(self.cluster, policy, config=self.config)
        self.readopted = []
        self.retries.waiting = {}
        node_index = {node.name: i for i, node in enumerate(self.cluster.nodes)}
        with Session(self.store.engine) as session:
            rows = session.scalars(
                select(JobRow)
                .where(JobRow.state.in_([PENDING, RUNNING]))
                .order_by(JobRow.submit_time, JobRow.id)
            ).all()
            now = self.clock()
            for row in rows:
                self._recover(session, row, seen.jobs.get(row.id), node_index, now)
            session.commit()
            # a crash after an end was committed and before the backend forgot the job
            exited = [j for j, o in seen.jobs.items() if o.state is ProcessState.EXITED]
            self._forgets += session.scalars(
                select(JobRow.id).where(JobRow.id.in_(exited), JobRow.state.in_(ENDED))
            ).all()
        self._forget_recorded_ends()

    def _recover(
        self,
        session: Session,
        row: JobRow,
        observed: ObservedJob | None,
        node_index: dict[str, int],
        now: float,
    ) -> None:
        """Put one stored open job back into the new core."""
        alive = observed is not None and observed.state in _ALIVE
        # a process that ended while the service was down is adopted too: the first
        # pass records how it ended (requeueing it would run it twice)
        ended = observed is not None and observed.state is ProcessState.EXITED
        if row.state == RUNNING and (alive or ended):
            assert observed is not None
            self._adopt(row, observed, node_index, now)
            self.readopted.append(row.id)
            if not row.gpu_indices:  # launched, but the crash beat the record
                row.gpu_indices = ",".join(map(str, observed.gpus)) or NO_GPUS
            return
        if row.state == PENDING and alive:  # preempted before the restart
            self.stop(row.id, "preempted")
        if row.state == RUNNING:  # cannot be re-adopted: requeue it cleanly
            self.store.move(session, row, PENDING, Stimulus.RESTART, "not running after a restart")
            row.gpu_indices = ""
        if not self.retries.held_at_restart(session, row, now):  # else: until its retry
            self.retries.submit(self.scheduler, row)

    def _adopt(
        self,
        row: JobRow,
        observed: ObservedJob,
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
        self.scheduler.submit(spec_of(row), row.submit_time)
        candidates: list[Placement] = []
        parts = observed.parts
        if parts and all(name in node_index for name, _ in parts):
            where = tuple((node_index[name], n) for name, n in parts)
            milli = row.gpu_milli or 1000
            cpus, memory = row.cpus or 0.0, row.memory_gb or 0.0
            if milli < 1000 and len(where) == 1 and len(observed.gpus) == 1:
                # a share of one GPU: the GPU's own index labels its share
                candidates.append(Placement(where, observed.gpus[0], milli, cpus, memory))
            candidates.append(Placement(where, cpus=cpus, memory_gb=memory))
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

    def finish_in_core(self, job_id: str, now: float) -> None:
        """Tell the core a job ended (a job adopted outside its books has nothing to free)."""
        state = self.scheduler.jobs.get(job_id)
        if state is not None and state.status is JobStatus.RUNNING:
            self.scheduler.finish(job_id, now)

    def stop(self, job_id: str, why: str | None = None) -> None:
        """Ask the backend to stop the job (``why``: remembered until its process is gone);
        a backend that cannot take it now is asked again on the next pass."""
        if why is not None:
            self.stopping[job_id] = why
        try:
            self.backend.stop(job_id)
        except BackendUnavailable as exc:
            self._stop_retry.add(job_id)
            print(f"ilucid serve: stopping {job_id} failed for now: {exc}", flush=True)

    # -- the pass ------------------------------------------------------------------------
    def reconcile(self) -> list[Decision]:
        whole = time.perf_counter()
        seen = self.backend.observe()
        if seen.cluster != self.cluster:  # a node added or gone (Slurm, Kubernetes)
            print(
                f"ilucid serve: the cluster changed ({len(self.cluster.nodes)} ->"
                f" {len(seen.cluster.nodes)} nodes): the core is rebuilt, running jobs kept",
                flush=True,
            )
            self.rebuild(self._new_policy, self.profiles)
            seen = self.backend.observe()
        now = self.clock()
        self._fence_excluded_nodes()
        for job_id in list(self._stop_retry):
            self._stop_retry.discard(job_id)
            if job_id in self.stopping:
                self.stop(job_id)
        with Session(self.store.engine) as session:
            self._settle_stopped(session, seen, now)
            self._settle_ended(session, seen, now)
            self.backend_queue.sync(session, seen, self.cluster.total_gpus)
            self.retries.release_due(session, self.scheduler, now)
            for job_id in self.profiling.due(session, now, self.stopping, self.profiles):
                self.stop(job_id, "profiled")
            began = time.perf_counter()
            decisions = self.scheduler.schedule(now)
            self.pass_latency.observe(time.perf_counter() - began)
            self._apply(session, decisions, now)
            session.commit()  # intent before acting (see the module's docstring)
            self._forget_recorded_ends()
            for decision in decisions:
                if decision.action is Action.PREEMPT:
                    self.stop(decision.job_id)
            self._retry_starts(session)
            if self.sampler is not None:
                self.sampler.sample(session, self.capabilities.processes, now, self.stopping)
            session.commit()
        self._publish_reasons(now)
        self.durations.maybe_refit()  # hands the work to its worker process at once
        self.reconcile_latency.observe(time.perf_counter() - whole)
        return decisions

    def _fence_excluded_nodes(self) -> None:
        """Nodes drained, down or cordoned take no new work; their jobs stay accounted."""
        excludes = self.capabilities.excludes
        if excludes is None:
            return
        try:
            self.excluded = excludes.excluded_nodes()
        except BackendUnavailable as exc:  # keep the last answer; asked again next pass
            print(f"ilucid serve: reading excluded nodes: {exc}", flush=True)
        names = self.excluded
        fenced = [i for i, node in enumerate(self.cluster.nodes) if node.name in names]
        self.scheduler.free.set_unavailable(fenced)

    def _settle_stopped(self, session: Session, seen: Observation, now: float) -> None:
        """Jobs the service stopped whose process is gone: cancelled ones end, profiled
        ones report their run (preempted ones were requeued when decided)."""
        for job_id, why in list(self.stopping.items()):
            observed = seen.jobs.get(job_id)
            if observed is not None and observed.state in _ALIVE:
                continue
            del self.stopping[job_id]
            self._forgets.append(job_id)
            row = session.get(JobRow, job_id)
            if row is None or row.state != RUNNING:
                continue
            if why == "profiled":
                if observed is None or observed.exit_code != 0:
                    self.profiling.finish(session, row, self.scheduler, now)
                # else it finished as its profile ended: recorded as done by _settle_ended
            elif why == "cancelled":
                row.exit_code = observed.exit_code if observed is not None else None
                row.end_time = now
                self.finish_in_core(job_id, now)
                self.store.move(session, row, CANCELLED, Stimulus.CANCEL, "cancelled by its owner")

    def _settle_ended(self, session: Session, seen: Observation, now: float) -> None:
        """Launched running jobs whose process exited (recorded) or vanished (requeued)."""
        running = session.scalars(select(JobRow).where(JobRow.state == RUNNING)).all()
        for row in running:
            if row.id in self.stopping or not row.gpu_indices:
                continue  # being stopped, or its start still waits for GPUs
            observed = seen.jobs.get(row.id)
            state = observed.state if observed is not None else ProcessState.LOST
            if state in _ALIVE:
                continue
            if state in (ProcessState.LOST, ProcessState.HELD) or observed is None:
                # the cluster manager's word when it has one (its node went down...)
                said = observed.reason if observed is not None else None
                why = said or "its process vanished without an exit"
                self._failed_attempt(session, row, Stimulus.VANISHED, why, now)
                self._forgets.append(row.id)
                continue
            row.exit_code = code = observed.exit_code
            row.end_time = now
            final = SUCCEEDED if code == 0 else FAILED
            crash_point("end-seen")
            self.finish_in_core(row.id, now)
            self.store.move(session, row, final, Stimulus.EXIT, f"exited with code {code}")
            crash_point("end-recorded")
            self._forgets.append(row.id)
            if final == SUCCEEDED and row.first_start is not None:
                self.durations.finished(spec_of(row), max(0.0, now - row.first_start))

    def _failed_attempt(
        self, session: Session, row: JobRow, stimulus: Stimulus, cause: str, now: float
    ) -> None:
        """Held back for a retry (out of the core's queue until then), or failed for good."""
        if self.retries.failed(session, row, stimulus, cause, now):
            take_out_of_core(self.scheduler, row.id, now)
            row.gpu_indices = ""
        else:
            self.finish_in_core(row.id, now)

    def _publish_reasons(self, now: float, every_s: float = 5.0, first: int = 200) -> None:
        """Backends that show why a job waits in the cluster manager itself (Kubernetes
        conditions and events) get the sentence of the first jobs in the queue."""
        publisher = self.capabilities.publishes
        if publisher is None or now - self.published_at < every_s:
            return
        self.published_at = now
        for job_id, _position, _start in self.queue(now)[:first]:
            try:
                publisher.publish_reason(job_id, self.scheduler.why_pending(job_id, now))
            except BackendUnavailable as exc:
                print(f"ilucid serve: publishing why {job_id} waits: {exc}", flush=True)
                return

    def _forget_recorded_ends(self) -> None:
        """Let the backend drop the files of jobs whose end is now committed.

        Only after the commit: a crash between forgetting a job's exit file and
        recording its end would leave it "running" with no trace of its exit, and
        the restart would run it again. A crash after the commit and before this
        leaves stale files, which the next rebuild clears.
        """
        if self._forgets:
            crash_point("end-committed")
        forgets = self.capabilities.forgets
        while self._forgets:
            job_id = self._forgets.pop()
            if forgets is not None:
                forgets.forget(job_id)
            crash_point("end-forgotten")

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
                    message=decision.explain()
                    + why_these_gpus(self.scheduler, self.cluster, decision),
                    placement=json.dumps(decision.placement.parts) if decision.placement else "",
                )
            )
            if decision.action is Action.START:
                if row.first_start is None:
                    row.first_start = now
                row.profile_until = None if decision.limit_s is None else now + decision.limit_s
                self.store.move(session, row, RUNNING, Stimulus.START, message)
                row.gpu_indices = ""  # launched by _retry_starts once this is committed
            elif decision.action is Action.PREEMPT:
                # the core has requeued it already; the process ends on the backend's signal
                self.store.move(session, row, PENDING, Stimulus.PREEMPT, message)
                row.preemptions += 1
                row.gpu_indices = ""
                self.stopping[row.id] = "preempted"

    def _launch(self, session: Session, row: JobRow) -> None:
        state = self.scheduler.jobs.get(row.id)
        nodes = self.cluster.nodes
        placement = (
            [(nodes[index].name, count) for index, count in state.placement.parts]
            if state is not None and state.placement is not None and row.gpus > 0
            else None
        )
        try:
            if (
                state is not None
                and state.placement is not None
                and state.placement.share is not None
            ):
                gpus = self._launch_shared(session, row, state.placement)
            else:
                gpus = self.backend.start(
                    row.id,
                    json.loads(row.command),
                    row.gpus,
                    cwd=row.cwd,
                    placement=placement,
                    run_as=row.run_as,
                    cpus=row.cpus,  # what the core booked on each node of the placement
                    memory_gb=row.memory_gb,
                )
        except BackendUnavailable as exc:  # tried again on the next pass
            print(f"ilucid serve: launching {row.id} failed for now: {exc}", flush=True)
            return
        except (OSError, ValueError) as exc:  # e.g. a missing working directory: retried
            cause = f"could not be launched: {exc}"
            self._failed_attempt(session, row, Stimulus.LAUNCH_FAILED, cause, self.clock())
            return
        if gpus is not None:
            self.store.launched(session, row, ",".join(map(str, gpus)) or NO_GPUS)

    def _launch_shared(
        self, session: Session, row: JobRow, placement: Placement
    ) -> tuple[int, ...] | None:
        """A share of one GPU goes where the other jobs of its share run. Of jobs that
        open a share in the same pass, the first by id launches first; the others
        follow it on the next pass, onto the GPU it got."""
        sharer = self.capabilities.shares
        if sharer is None:
            raise ValueError(f"the {self.backend.name} backend cannot share a GPU between jobs")
        on_gpus = share_gpus(self.scheduler, session, row.id, placement)
        if isinstance(on_gpus, str):
            return None  # the share's first job opens it
        ((index, _),) = placement.parts
        return sharer.start_shared(
            row.id,
            json.loads(row.command),
            self.cluster.nodes[index].name,
            placement.milli,
            on_gpus,
            cwd=row.cwd,
            run_as=row.run_as,
        )

    def _retry_starts(self, session: Session) -> None:
        """Starts that waited for a stopping job's GPUs (or its own old process) to go."""
        waiting = session.scalars(
            select(JobRow).where(JobRow.state == RUNNING, JobRow.gpu_indices == "")
        ).all()
        for row in waiting:
            if row.id not in self.stopping:
                self._launch(session, row)

    # -- questions -------------------------------------------------------------------------
    def queue(self, now: float) -> list[tuple[str, int | None, float | None]]:
        """Pending jobs with their queue position and expected start time (one held back
        for a retry: at the end, not before its retry)."""
        expected = self.scheduler.expected_starts(now)
        rows = []
        for job in self.scheduler.pending():
            position = self.scheduler.policy.queue_position(job, now)
            rows.append((job.spec.id, position, expected.get(job.spec.id)))
        rows += [(job_id, None, wait.retry_at) for job_id, wait in self.retries.waiting.items()]
        rows.sort(key=lambda r: (r[1] if r[1] is not None else 1 << 30, r[0]))
        return rows
