"""The reconcile pass: observe -> record -> schedule -> apply, level-triggered.

1. observe the backend (what really runs and what ended);
2. record ends in the database and tell the core (``finish``); a job whose
   process vanished without an exit record, or whose launch failed, is retried
   after a backoff (:mod:`~ilucid.service.retries`), not lost;
3. ask the core to schedule (``schedule(now)``);
4. apply its decisions through the backend (start, stop), stored with their
   reasons. Intent is committed before acting: a crash leaves a job "running"
   without a process (requeued on restart) or a process the restart re-adopts,
   never a job started twice. A stop (cancel, preemption, end of a profiling
   run) is a stored intent (``JobRow.stopping``) until its process is gone, and
   a restart finishes every intent it finds.

Every move goes through :meth:`JobStore.transition` with its stimulus: the pass's
decisions and launches share the pass's id, what one observation saw shares the
observation's, a restart's moves share the restart's.

The reconciler owns the core. It is rebuilt from the database and the backend at
start, on a policy change, and when a replica becomes leader.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import NamedTuple

from sqlalchemy import insert, select
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
from ilucid.core.start_range import StartRange, StartRanges
from ilucid.service.backend_queue import BackendQueue
from ilucid.service.cloud_keeper import CloudKeeper
from ilucid.service.db import DecisionRow, JobRow
from ilucid.service.duration_keeper import DurationKeeper
from ilucid.service.faults import crash_point
from ilucid.service.job_store import (
    ENDED,
    PENDING,
    RUNNING,
    JobStore,
    MoveDetail,
    phase,
    rows_by_id,
    spec_of,
)
from ilucid.service.latency import Latency, PassSplit
from ilucid.service.launch_words import launched_words, share_gpus, why_these_gpus
from ilucid.service.launched_jobs import LaunchedJobs
from ilucid.service.lifecycle import (
    NO_GPUS,
    Cause,
    Phase,
    Stimulus,
    new_stimulus_id,
)
from ilucid.service.live_sampling import Sampler
from ilucid.service.pass_queries import (
    stopping_job_ids,
    stopping_jobs,
    waiting_launches,
)
from ilucid.service.profiling_coordinator import ProfilingCoordinator
from ilucid.service.progress_keeper import ProgressKeeper
from ilucid.service.restart_outcome import RestartOutcome, ended_while_down, exit_unknown
from ilucid.service.retries import DEFAULT_MAX_RETRIES, Retries, take_out_of_core
from ilucid.service.start_keeper import keep_outcomes, restored_ranges

__all__ = ["Queued", "Reconciler"]

logger = logging.getLogger(__name__)


class Queued(NamedTuple):
    """A pending job: its place in the policy's order and its expected start (None:
    the projection cannot place it)."""

    job_id: str
    position: int | None
    start: StartRange | None


_PREEMPTED_GONE = "its preempted process is gone"
_CANCELLED_GONE = "cancelled by its owner: its process was gone after a restart"

_ALIVE = (ProcessState.RUNNING, ProcessState.STOPPING)
#: phases of a launched job the service watches with no intent of its own to settle
_WATCHED = (Phase.RUNNING, Phase.DECIDED)


class Reconciler:
    """Runs the pass and keeps the core in step with the database and the backend.

    Callers hold the service's lock around every method."""

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
        #: the last reconcile's time in each of its parts
        self.last_split = PassSplit(0.0)
        #: launched running jobs, kept between reads of the database
        self._launched = LaunchedJobs()
        self._forgets: list[str] = []  # ended jobs whose files go once the end is committed
        self._stop_retry: set[str] = set()  # stops the backend could not take yet
        #: running jobs' own progress reports: stored, and told to the core
        self.progress = ProgressKeeper()
        self.published_at = 0.0
        self.profiles = False
        #: nodes the cluster manager took out of service, with its reason (last pass)
        self.excluded: dict[str, str] = {}
        #: what the last rebuild found of the jobs stored running (``readopted``: those
        #: taken back; after a policy change, also those that ended since the last pass)
        self.outcome = RestartOutcome()
        self.backend_queue = BackendQueue(
            capabilities,
            backend.name,
            store,
            lambda row, now: self.scheduler.submit(spec_of(row), now),
            clock,
        )
        #: paid pools: power changes carried out, the ledger kept across restarts
        self.cloud = CloudKeeper(capabilities.powers, backend.name)
        self._cloud_runs: dict[str, float] = {}  # stored open runs' starts, at a rebuild
        self.scheduler: Scheduler
        #: how its expected starts missed: replayed from the database at a restart, then
        #: handed to each rebuilt core (a new policy, a cluster change)
        self.start_ranges = StartRanges()
        self.cluster: Cluster
        self._new_policy: Callable[[], Policy]

    # -- recovery ----------------------------------------------------------------------
    @property
    def readopted(self) -> list[str]:
        """Running jobs taken back at the last rebuild."""
        return self.outcome.readopted

    def rebuild(
        self, new_policy: Callable[[], Policy], profiles: bool, restart: bool = False
    ) -> None:
        """A fresh core from the database; running jobs re-adopted from the backend
        (``new_policy`` makes the policy, again when the cluster changes; ``profiles``:
        whether it runs profiling runs). Every stored intent is finished or re-issued.
        ``restart``: the service (or this replica's leadership) begins here, so a job
        whose process ended did so while no one watched: its recorded exit ends it now."""
        self._new_policy = new_policy
        self._launched.forget_all()  # read again from the database at the next pass
        policy = new_policy()
        seen = self.backend.observe()
        self.profiles = profiles
        self.cluster = seen.cluster
        self.scheduler = Scheduler(self.cluster, policy, config=self.config)
        if restart:  # what its expected starts learned, again from the stored outcomes
            self.start_ranges = restored_ranges(self.store.engine)
        self.scheduler.start_ranges = self.start_ranges
        self.outcome = RestartOutcome()
        self.retries.waiting = {}
        node_index = {node.name: i for i, node in enumerate(self.cluster.nodes)}
        moves = new_stimulus_id("restart")
        stops: list[str] = []
        with Session(self.store.engine) as session:
            rows = session.scalars(
                select(JobRow)
                .where(JobRow.state.in_([PENDING, RUNNING]))
                .order_by(JobRow.submit_time, JobRow.id)
            ).all()
            now = self.clock()
            self._cloud_runs = self.cloud.restore(session, self.scheduler, now)
            for row in rows:
                observed = seen.jobs.get(row.id)
                if self._recover(session, row, observed, node_index, now, moves, restart):
                    stops.append(row.id)
            self.progress.rebuilt()
            self._cloud_runs = {}
            self.cloud.store(session, self.scheduler)
            session.commit()
            # a crash after an end was committed and before the backend forgot the job
            exited = [j for j, o in seen.jobs.items() if o.state is ProcessState.EXITED]
            self._forgets += session.scalars(
                select(JobRow.id).where(JobRow.id.in_(exited), JobRow.state.in_(ENDED))
            ).all()
        self._forget_recorded_ends()
        for job_id in stops:  # intents found alive: asked again, once committed
            self.stop(job_id)

    def _recover(
        self,
        session: Session,
        row: JobRow,
        observed: ObservedJob | None,
        node_index: dict[str, int],
        now: float,
        restart: str,
        after_down: bool,
    ) -> bool:
        """Put one stored open job back into the new core; True when its process must be
        asked to stop (again). ``after_down``: the service was not watching until now."""
        alive = observed is not None and observed.state in _ALIVE
        ended = observed is not None and observed.state is ProcessState.EXITED
        gone = Cause(Stimulus.STOPPED, restart)
        current = phase(row)
        if current is Phase.STOPPING_CANCEL and row.state == PENDING:
            # preempted, then cancelled: out of the queue for good, its process stopping
            if alive:
                return True
            self._forgets.append(row.id)
            self.store.transition(session, row, Phase.CANCELLED, gone, _CANCELLED_GONE)
            return False
        if row.state == RUNNING and ended and after_down and current in _WATCHED:
            assert observed is not None
            self._ended_while_down(session, row, observed, now, restart)
            return False
        if row.state == RUNNING and (alive or ended):
            # a process that ended since the last pass (or, under a stop intent, while the
            # service was down) is adopted too: the first pass records how it ended
            # (requeueing it would run it twice)
            assert observed is not None
            self._adopt(row, observed, node_index, now)
            if alive:
                self.outcome.readopted.append(row.id)
            else:
                self.outcome.ended.append((row.id, f"exit {observed.exit_code}"))
            if current is Phase.DECIDED:  # launched, but the crash beat the record
                self._found_launched(session, row, observed, restart)
            return alive and row.stopping is not None
        ask_stop = False
        if current is Phase.STOPPING_PREEMPT:
            if alive:
                ask_stop = True
            else:
                self._forgets.append(row.id)
                self.store.transition(session, row, Phase.PENDING, gone, _PREEMPTED_GONE)
        elif row.state == PENDING and alive:  # preempted before intents were stored
            ask_stop = True
        if row.state == RUNNING:  # nothing of it runs: its intent ends, or it requeues
            self._forgets.append(row.id)
            requeue = Cause(Stimulus.RESTART, restart)
            if current is Phase.STOPPING_CANCEL:
                self.outcome.ended.append((row.id, "cancelled"))
                self.store.transition(session, row, Phase.CANCELLED, gone, _CANCELLED_GONE)
                return False
            if current is Phase.STOPPING_RESTART:
                self.store.transition(session, row, Phase.DECIDED, gone, _PREEMPTED_GONE)
            if current is Phase.DECIDED and observed is None:  # the crash beat the launch
                self.outcome.requeued.append((row.id, "never launched"))
                reason = "decided before the restart, never launched: requeued"
            else:
                why = observed.reason if observed is not None else None
                self.outcome.requeued.append((row.id, "exit unknown"))
                reason = exit_unknown(why)
            self.store.transition(session, row, Phase.PENDING, requeue, reason)
        if not self.retries.held_at_restart(session, row, now):  # else: until its retry
            self.retries.submit(self.scheduler, row)
        return ask_stop

    def _found_launched(
        self, session: Session, row: JobRow, observed: ObservedJob, restart: str
    ) -> None:
        """A job launched just before a crash that beat the launch's record."""
        gpus = ",".join(map(str, observed.gpus)) or NO_GPUS
        found = "running" if observed.state in _ALIVE else "launched"
        self.store.transition(
            session,
            row,
            Phase.RUNNING,
            Cause(Stimulus.ADOPTED, restart),
            f"found {found} on GPUs {gpus} after a restart"
            if observed.gpus
            else f"found {found} without GPUs (CPU-only) after a restart",
            MoveDetail(gpus=gpus),
        )

    def _ended_while_down(
        self, session: Session, row: JobRow, observed: ObservedJob, now: float, restart: str
    ) -> None:
        """A job whose process ended while the service was down: its recorded exit ends
        it at once, at the time the backend recorded (never in the core's books)."""
        if phase(row) is Phase.DECIDED:
            self._found_launched(session, row, observed, restart)
        code = observed.exit_code
        final = Phase.SUCCEEDED if code == 0 else Phase.FAILED
        at = now if observed.ended_at is None else min(now, observed.ended_at)
        self.store.transition(
            session,
            row,
            final,
            Cause(Stimulus.EXIT, restart),
            ended_while_down(code, observed.ended_at, now),
            MoveDetail(exit_code=code, ended_at=at),
        )
        self._forgets.append(row.id)
        self.outcome.ended.append((row.id, f"exit {code}"))
        if final is Phase.SUCCEEDED and row.first_start is not None:
            self.durations.finished(spec_of(row), max(0.0, at - row.first_start))
        else:
            self._scored_unfinished(row, at)

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
                self.scheduler.adopt(row.id, placement, now, self._cloud_runs.get(row.id))
                return
            except ValueError:
                continue
        self.scheduler.withdraw(row.id, now)
        logger.warning(
            "ilucid serve: %s runs but no GPUs are left to account it on; it keeps running"
            " and its end is recorded",
            row.id,
            extra={"job_id": row.id},
        )

    def finish_in_core(self, job_id: str, now: float) -> None:
        """Tell the core a job ended (a job adopted outside its books has nothing to free)."""
        state = self.scheduler.jobs.get(job_id)
        if state is not None and state.status is JobStatus.RUNNING:
            self.scheduler.finish(job_id, now)

    def stop(self, job_id: str) -> None:
        """Ask the backend to stop the job (its intent is committed already); a backend
        that cannot take it now is asked again on the next pass."""
        try:
            self.backend.stop(job_id)
        except BackendUnavailable as exc:
            self._stop_retry.add(job_id)
            logger.warning(
                "ilucid serve: stopping %s failed for now: %s",
                job_id,
                exc,
                extra={"job_id": job_id},
            )

    # -- the pass ------------------------------------------------------------------------
    def reconcile(self, began: float | None = None) -> list[Decision]:
        """One pass; ``began``: when the caller started it (before taking the lock, whose
        taking hands the submissions waiting in the inbox to the core)."""
        whole = time.perf_counter() if began is None else began
        seen = self.backend.observe()
        if seen.cluster != self.cluster:  # a node added or gone (Slurm, Kubernetes)
            logger.info(
                "ilucid serve: the cluster changed (%d -> %d nodes): the core is rebuilt,"
                " running jobs kept",
                len(self.cluster.nodes),
                len(seen.cluster.nodes),
            )
            self.rebuild(self._new_policy, self.profiles)
            seen = self.backend.observe()
        now = self.clock()
        self._fence_excluded_nodes()
        pass_id, seen_id = new_stimulus_id("pass"), new_stimulus_id("observe")
        split = PassSplit(whole)
        with Session(self.store.engine) as session:
            for job_id in list(self._stop_retry):
                self._stop_retry.discard(job_id)
                row = session.get(JobRow, job_id)
                if row is not None and row.stopping is not None:
                    self.stop(job_id)
            self._settle_stopped(session, seen, now, seen_id)
            self._settle_ended(session, seen, now, seen_id)
            self.progress.observed(session, seen.jobs, now, self.scheduler, self.cluster)
            self.backend_queue.sync(session, seen, self.cluster.total_gpus)
            self.retries.release_due(session, self.scheduler, now)
            stops = self._end_due_profiles(session, now, pass_id)
            began = split.lap("observe")
            decisions = self.scheduler.schedule(now)
            self.pass_latency.observe(split.lap("decide") - began)
            stops += self._apply(session, decisions, now, pass_id)
            self.cloud.store(session, self.scheduler)
            keep_outcomes(session, self.start_ranges)
            split.lap("apply")
            session.commit()  # intent before acting (see the module's docstring)
            split.lap("commit")
            self._forget_recorded_ends()
            for job_id in stops:
                self.stop(job_id)
            self.cloud.carry_out(self.scheduler)  # nodes up before their jobs launch
            self._retry_starts(session, pass_id)
            if self.sampler is not None:
                stopping = set(session.scalars(stopping_job_ids()))
                self.sampler.sample(session, self.capabilities.processes, now, stopping)
            split.lap("apply")
            session.commit()
            split.lap("commit")
        self._publish_reasons(now)
        self.durations.maybe_refit()  # hands the work to its worker process at once
        split.lap("apply")
        self.reconcile_latency.observe(time.perf_counter() - whole)
        self.last_split = split
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("ilucid serve: %s (%d decisions)", split.sentence(), len(decisions))
        return decisions

    def _end_due_profiles(self, session: Session, now: float, pass_id: str) -> list[str]:
        """Profiling runs whose time is up: their stop is stored, asked after the commit."""
        due = self.profiling.due(session, now, self.profiles)
        cause = Cause(Stimulus.PROFILE_DUE, pass_id)
        for row in due:
            self.store.transition(
                session, row, Phase.STOPPING_PROFILED, cause, "its profiling run is over"
            )
        return [row.id for row in due]

    def _fence_excluded_nodes(self) -> None:
        """Nodes drained, down or cordoned take no new work; their jobs stay accounted."""
        excludes = self.capabilities.excludes
        if excludes is None:
            return
        try:
            self.excluded = excludes.excluded_nodes()
        except BackendUnavailable as exc:  # keep the last answer; asked again next pass
            logger.warning("ilucid serve: reading excluded nodes: %s", exc)
        names = self.excluded
        fenced = [i for i, node in enumerate(self.cluster.nodes) if node.name in names]
        self.scheduler.free.set_unavailable(fenced)

    def _settle_stopped(
        self, session: Session, seen: Observation, now: float, seen_id: str
    ) -> None:
        """Jobs the service is stopping whose process is gone: cancelled ones end
        cancelled, preempted ones may start again, profiled ones report their run."""
        gone = Cause(Stimulus.STOPPED, seen_id)
        # sorted here: asked to order by id, SQLite would walk the whole table
        rows = sorted(
            session.scalars(stopping_jobs()),
            key=lambda row: row.id,
        )
        for row in rows:
            observed = seen.jobs.get(row.id)
            if observed is not None and observed.state in _ALIVE:
                continue
            self._forgets.append(row.id)
            current = phase(row)
            if current is Phase.STOPPING_PROFILED:
                if observed is not None and observed.exit_code == 0:  # done as it ended
                    self._record_exit(session, row, 0, now, seen_id)
                else:
                    profiled = Cause(Stimulus.PROFILED, seen_id)
                    self.profiling.finish(session, row, self.scheduler, now, profiled)
            elif current is Phase.STOPPING_CANCEL:
                if row.state == RUNNING:  # the core still books its GPUs
                    self.finish_in_core(row.id, now)
                code = observed.exit_code if observed is not None else None
                self.store.transition(
                    session,
                    row,
                    Phase.CANCELLED,
                    gone,
                    "cancelled by its owner: its process is gone",
                    MoveDetail(exit_code=code),
                )
                self._scored_unfinished(row, now)
            elif current is Phase.STOPPING_PREEMPT:
                self.store.transition(session, row, Phase.PENDING, gone, _PREEMPTED_GONE)
            else:  # started again while its old process stopped: launched now
                self.store.transition(session, row, Phase.DECIDED, gone, _PREEMPTED_GONE)

    def _settle_ended(self, session: Session, seen: Observation, now: float, seen_id: str) -> None:
        """Launched running jobs whose process exited (recorded) or vanished (requeued)."""
        # ids first, whole rows only for the jobs that ended: at 10,000 nodes most of
        # the tens of thousands of running jobs did not, and loading each costs
        launched = self._launched.ids(session)
        alive = {job_id for job_id, seen_job in seen.jobs.items() if seen_job.state in _ALIVE}
        gone = sorted(launched - alive)
        rows = rows_by_id(session, gone)
        for job_id in gone:
            launched.discard(job_id)  # settled now, or no longer launched and running
            row = rows.get(job_id)
            if row is None or row.state != RUNNING or row.stopping is not None:
                continue  # stopping (settled as such), or moved since the ids were read
            if not row.gpu_indices:
                continue
            observed = seen.jobs.get(row.id)
            state = observed.state if observed is not None else ProcessState.LOST
            if state in (ProcessState.LOST, ProcessState.HELD) or observed is None:
                # the cluster manager's word when it has one (its node went down...)
                said = observed.reason if observed is not None else None
                why = said or "its process vanished without an exit"
                self._failed_attempt(session, row, Stimulus.VANISHED, why, now, seen_id)
                self._forgets.append(row.id)
                continue
            self._record_exit(session, row, observed.exit_code, now, seen_id)
            self._forgets.append(row.id)

    def _record_exit(
        self, session: Session, row: JobRow, code: int | None, now: float, seen_id: str
    ) -> None:
        """The job's process exited: succeeded (0) or failed, freed in the core."""
        final = Phase.SUCCEEDED if code == 0 else Phase.FAILED
        crash_point("end-seen")
        self.finish_in_core(row.id, now)
        cause = Cause(Stimulus.EXIT, seen_id)
        self.store.transition(
            session, row, final, cause, f"exited with code {code}", MoveDetail(exit_code=code)
        )
        crash_point("end-recorded")
        if final is Phase.SUCCEEDED and row.first_start is not None:
            self.durations.finished(spec_of(row), max(0.0, now - row.first_start))
        else:
            self._scored_unfinished(row, now)

    def _scored_unfinished(self, row: JobRow, now: float) -> None:
        """A failed or cancelled job's overrun of its statement counts against its user."""
        if row.first_start is not None and row.estimate_s is not None:
            self.durations.ended_unfinished(spec_of(row), max(0.0, now - row.first_start))

    def _failed_attempt(
        self,
        session: Session,
        row: JobRow,
        stimulus: Stimulus,
        why: str,
        now: float,
        stimulus_id: str,
    ) -> None:
        """Held back for a retry (out of the core's queue until then), or failed for good."""
        if self.retries.failed(session, row, Cause(stimulus, stimulus_id), why, now):
            take_out_of_core(self.scheduler, row.id, now)
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
                logger.warning(
                    "ilucid serve: publishing why %s waits: %s",
                    job_id,
                    exc,
                    extra={"job_id": job_id},
                )
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

    def _apply(
        self, session: Session, decisions: list[Decision], now: float, pass_id: str
    ) -> list[str]:
        """Store the pass's decisions and their moves; the jobs whose process must be
        asked to stop once they are committed."""
        stops = []
        stored: list[dict[str, object]] = []  # decision rows, inserted at once below
        rows = rows_by_id(session, [decision.job_id for decision in decisions])
        for decision in decisions:
            row = rows.get(decision.job_id)
            if row is None:
                continue
            reason = decision.reasons[0] if decision.reasons else None
            message = reason.message if reason else ""
            stored.append(
                {
                    "time": now,
                    "job_id": decision.job_id,
                    "action": decision.action.value,
                    "code": reason.code if reason else "",
                    "message": decision.explain()
                    + why_these_gpus(self.scheduler, self.cluster, decision),
                    "placement": (
                        json.dumps(decision.placement.parts) if decision.placement else ""
                    ),
                    "stimulus_id": pass_id,
                }
            )
            current = phase(row)
            if current is Phase.STOPPING_CANCEL:
                # the core moved a job its owner cancelled (it still booked its GPUs):
                # it leaves the core's queue; its cancel stands
                take_out_of_core(self.scheduler, row.id, now)
            elif decision.action is Action.START:
                started = Phase.STOPPING_RESTART if current is Phase.STOPPING_PREEMPT else None
                self.store.transition(
                    session,
                    row,
                    started or Phase.DECIDED,
                    Cause(Stimulus.START, pass_id),
                    message,
                    MoveDetail(limit_s=decision.limit_s),
                )
            elif decision.action is Action.PREEMPT:
                # the core has requeued it already; the process ends on the backend's signal
                cause = Cause(Stimulus.PREEMPT, pass_id)
                self.store.transition(session, row, Phase.STOPPING_PREEMPT, cause, message)
                stops.append(row.id)
        if stored:
            session.execute(insert(DecisionRow), stored)
        return stops

    def _launch(self, session: Session, row: JobRow, pass_id: str) -> None:
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
            logger.warning(
                "ilucid serve: launching %s failed for now: %s",
                row.id,
                exc,
                extra={"job_id": row.id, "stimulus_id": pass_id},
            )
            return
        except (OSError, ValueError) as exc:  # e.g. a missing working directory: retried
            why = f"could not be launched: {exc}"
            now = self.clock()
            self._failed_attempt(session, row, Stimulus.LAUNCH_FAILED, why, now, pass_id)
            return
        if gpus is not None:
            on = ",".join(map(str, gpus)) or NO_GPUS
            said = f"launched on GPUs {on}" if gpus else "launched without GPUs (CPU-only)"
            if state is not None and state.placement is not None and gpus:
                said = launched_words(state.placement, self.cluster, on) or said
            self.store.transition(
                session,
                row,
                Phase.RUNNING,
                Cause(Stimulus.LAUNCH, pass_id),
                said,
                MoveDetail(gpus=on),
            )
            self._launched.launched(row.id)

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

    def _retry_starts(self, session: Session, pass_id: str) -> None:
        """Decided starts: this pass's, and those that waited for a stopping job's GPUs
        (a job whose own old process still stops is not decided yet)."""
        waiting = session.scalars(waiting_launches()).all()
        for row in waiting:
            self._launch(session, row, pass_id)

    # -- questions -------------------------------------------------------------------------
    def queue(self, now: float) -> list[Queued]:
        """Pending jobs with their queue position and expected start as a calibrated
        range (one held back for a retry: at the end, not before its retry)."""
        expected = self.scheduler.start_ranges_of_queue(now)
        rows = []
        for job in self.scheduler.pending():
            position = self.scheduler.policy.queue_position(job, now)
            rows.append(Queued(job.spec.id, position, expected.get(job.spec.id)))
        for job_id, wait in self.retries.waiting.items():
            due = wait.retry_at
            rows.append(Queued(job_id, None, StartRange(due, due, due, due, "its retry's time")))
        rows.sort(key=lambda r: (r.position if r.position is not None else 1 << 30, r.job_id))
        return rows
