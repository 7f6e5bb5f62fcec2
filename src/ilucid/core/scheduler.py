"""The scheduling core as a pure state machine.

Drivers (the simulator, the live service) feed it stimuli (``submit``,
``finish``) stamped with their own clock and ask it to ``schedule``; it answers
with decisions (start with a placement, preempt) that carry their reasons. It
reads no clock, does no I/O and keeps no global state, so a simulated run is a
faithful prediction of what the service would decide.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from mypy_extensions import mypyc_attr

from ilucid.core.cloud import CloudBudget, CloudPools, PowerChange, off_pool
from ilucid.core.decision import Action, Decision, Reason, Words, written
from ilucid.core.expected_start import FreeProfile, expected_remaining, project_starts
from ilucid.core.free_gpus import FULL_GPU, MAIN_POOL, FreeGpus
from ilucid.core.jobs import JobState, JobStatus, RestoreOverhead, lost_since_checkpoint
from ilucid.core.model import (
    Cluster,
    Forecast,
    JobClass,
    JobSpec,
    Placement,
    PoolSpec,
    ProfileReport,
)
from ilucid.core.picklable import picklable
from ilucid.core.placement import (
    ConsolidatingPlacer,
    Placer,
    explain_unplaceable,
    why_unplaced,
)
from ilucid.core.progress_book import ProgressBook
from ilucid.core.reason_codes import ReasonCode
from ilucid.core.start_range import StartRange, StartRanges, range_words, span_words
from ilucid.core.topology import TOPOLOGY_LEVELS, TopologyPlacer
from ilucid.core.type_moves import TypeMoves
from ilucid.core.type_speeds import TypeSpeeds
from ilucid.core.wait_words import plural, pool_open_to

__all__ = ["Policy", "PolicyBase", "Scheduler", "SchedulerConfig", "SchedulingPass"]

#: a paid-pool job returns on-prem only when what it has left is this many times its
#: restore cost (a move must pay for itself)
RETURN_AFTER = 10.0


class Policy(Protocol):
    """A scheduling policy: keeps its own ordering structures, decides during passes.

    Every hook the core calls is declared here; :class:`PolicyBase` gives the
    optional ones their neutral behaviour, so nothing is probed at run time.
    """

    name: str

    def on_submitted(self, job: JobState, now: float) -> None: ...

    def on_started(self, job: JobState, now: float) -> None: ...

    def on_adopted(self, job: JobState, now: float) -> None:
        """A pending job found already running (a service restart) left the queue."""
        ...

    def on_preempted(self, job: JobState, now: float) -> None: ...

    def on_finished(self, job: JobState, now: float) -> None: ...

    def on_withdrawn(self, job: JobState, now: float) -> None:
        """A pending job left without running (cancelled)."""
        ...

    def on_profiled(self, job: JobState, report: ProfileReport, now: float) -> None:
        """A profiling run ended with ``report`` (profiling policies only)."""
        ...

    def on_forecast(self, forecast: Forecast, now: float) -> None:
        """A new load forecast for the policy's tuner, if it has one."""
        ...

    def on_estimate(self, job: JobState, seconds: float, trusted: bool, now: float) -> None:
        """A running job's whole run time, re-estimated from its own progress (``trusted``:
        from its own rate alone, no longer blended with the model's)."""
        ...

    def schedule(self, step: SchedulingPass) -> None: ...

    def next_wakeup(self, now: float) -> float | None:
        """Earliest time the policy wants a pass without any new stimulus, if any."""
        ...

    def queue_position(self, job: JobState, now: float) -> int | None:
        """1-based position of a pending job in the policy's order."""
        ...

    def pending_order(self) -> Iterable[JobState] | None:
        """Pending jobs in the order the policy serves them; None: oldest first."""
        ...

    def wait_code(self, job: JobState) -> ReasonCode | None:
        """The policy's own countable code for why ``job`` waits; None: the core's."""
        ...

    def explain_wait(self, job: JobState, now: float) -> str | None:
        """The policy's own sentence for why ``job`` waits; None: the core's."""
        ...

    @property
    def tuner_log(self) -> Sequence[object]:
        """Actions the policy's tuner took, each with the forecast behind it."""
        ...


@mypyc_attr(
    allow_interpreted_subclasses=True
)  # policies written outside the package (a site's own) subclass it
class PolicyBase:
    """Neutral behaviour of the optional hooks of :class:`Policy`."""

    name: str

    def on_started(self, job: JobState, now: float) -> None:
        raise NotImplementedError

    def on_adopted(self, job: JobState, now: float) -> None:
        self.on_started(job, now)

    def on_profiled(self, job: JobState, report: ProfileReport, now: float) -> None:
        raise ValueError(f"policy {self.name} does not profile jobs")

    def on_forecast(self, forecast: Forecast, now: float) -> None:
        return None

    def on_estimate(self, job: JobState, seconds: float, trusted: bool, now: float) -> None:
        return None  # policies that do not order by an estimate have no use for it

    def next_wakeup(self, now: float) -> float | None:
        return None

    def pending_order(self) -> Iterable[JobState] | None:
        return None

    def _reason(self, job: JobState) -> Reason | None:
        """The policy's own reason a waiting job waits (None: the scheduler's words).
        ``wait_code`` and ``explain_wait`` read the same reason: its code and its
        sentence."""
        return None

    def wait_code(self, job: JobState) -> ReasonCode | None:
        reason = self._reason(job)
        return reason.code if reason is not None else None

    def explain_wait(self, job: JobState, now: float) -> str | None:
        reason = self._reason(job)
        return reason.message if reason is not None else None

    @property
    def tuner_log(self) -> Sequence[object]:
        return ()


def default_placer(cluster: Cluster, type_speeds: TypeSpeeds | None = None) -> Placer:
    """Topology-aware when nodes carry NVLink or rack labels, else consolidating; on a
    cluster of several GPU types, ``type_speeds`` ranks each job's types."""
    labelled = any(level in n.labels for n in cluster.nodes for level in TOPOLOGY_LEVELS)
    if len({n.gpu_type for n in cluster.nodes}) < 2:
        type_speeds = None
    placer = TopologyPlacer() if labelled else ConsolidatingPlacer()
    placer.type_speeds = type_speeds
    return placer


def _start_requests(pending: Iterable[JobState], now: float) -> Iterator[tuple[str, int, float]]:
    """What project_starts asks of each pending job, lazily (it may stop at its limit)."""
    for job in pending:
        remaining = expected_remaining(job.spec.expected_duration, _ran(job, now))
        yield job.spec.id, job.spec.num_gpus, remaining


#: how a policy's start sentence says a run is a profiling run (cut from a burst's)
PROFILING_WORDS = "; profiling for up to"


def _hours(hours: float) -> str:
    if hours == float("inf"):
        return "no end in sight"
    return f"{hours * 60:.0f} min" if hours < 1 else f"{hours:.1f} h"


def _money(amount: float) -> str:
    """Whole units where they matter, cents on small sums (a 0.28 run is not "0")."""
    return f"{amount:,.0f}" if abs(amount) >= 100 else f"{amount:,.2f}"


def _minutes(seconds: float) -> str:
    return "none (node up)" if seconds <= 0 else f"{seconds / 60.0:.0f} min"


def _ran(job: JobState, now: float) -> float:
    """Seconds of service a job has had, as the core can know it (no true duration)."""
    gpus = job.spec.num_gpus
    if gpus == 0:
        return 0.0
    return job.attained_at(now) / gpus


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """Costs the core charges a job it stops.

    ``checkpoint_s`` is the default checkpoint interval of jobs whose spec sets
    none; ``None`` keeps all work on preemption (the Lucid artifact's model,
    under which the training-only baselines were cross-checked).
    """

    overhead: RestoreOverhead = field(default_factory=RestoreOverhead)
    checkpoint_s: float | None = None
    #: pools other than on-prem ``main`` (nodes labelled ``pool=<name>``) and their prices
    pools: Mapping[str, PoolSpec] = field(default_factory=dict)
    #: what an hour of waiting is worth per GPU (same currency as pool prices); a job
    #: that cannot start on-prem bursts to a paid pool when its expected on-prem wait
    #: is worth more than the extra cost. None: never burst.
    value_of_wait: float | None = None
    #: tenants' monthly budgets in paid pools, their own value of waiting, or cloud off
    budgets: Mapping[str, CloudBudget] = field(default_factory=dict)
    #: how a job's GPU type is chosen on a cluster of several (``TYPE_RULES``):
    #: "speed-ratio" by its measured speedup relative to the median job's
    gpu_type_rule: str = "speed-ratio"
    #: a job waits for its fastest type up to this share of the extra run time a
    #: slower free type would cost it (:mod:`ilucid.core.type_speeds`); 0: never waits.
    #: A job that can move later (:meth:`TypeSpeeds.movable`, expected to outlast
    #: :data:`~ilucid.core.type_moves.SETTLE_S`) starts on a slower free type instead and
    #: moves when it pays, unless the queue is crowded (Philly, hetero: 0.692x type-blind
    #: mean JCT, 2,618 s p99 queueing; 0.718x and 22,319 s when every job waited)
    gpu_type_patience: float = 0.03
    #: a running job moves to a faster GPU type left free when the run time it saves
    #: is this many times the move's cost (:mod:`ilucid.core.type_moves`); 0: never
    gpu_type_move_after: float = 10.0

    def checkpoint_of(self, job: JobSpec) -> float | None:
        return job.checkpoint_s if job.checkpoint_s is not None else self.checkpoint_s

    def lost_if_stopped(self, job: JobState, now: float) -> float:
        """Seconds of work ``job`` would lose if it were preempted ``now``."""
        return lost_since_checkpoint(now - job.since, self.checkpoint_of(job.spec))


class SchedulingPass:
    """What a policy may do during one pass: try to start jobs, preempt running ones.

    Every change is applied to the core's state at once (so the next placement
    sees it) and recorded as a decision.
    """

    __slots__ = ("_ends", "_scheduler", "decisions", "now", "waiting_gpus", "waiting_work")

    def __init__(self, scheduler: Scheduler, now: float) -> None:
        self._scheduler = scheduler
        self.now = now
        self.decisions: list[Decision] = []
        self.waiting_gpus = 0  # GPUs of jobs that failed to start on-prem earlier in this pass
        self.waiting_work = 0.0  # and their expected GPU-seconds of work
        self._ends: dict[str | None, list[tuple[float, int]]] | None = None

    @property
    def free(self) -> FreeGpus:
        return self._scheduler.free

    @property
    def placer(self) -> Placer:
        return self._scheduler.placer

    @property
    def type_speeds(self) -> TypeSpeeds:
        return self._scheduler.type_speeds

    @property
    def config(self) -> SchedulerConfig:
        return self._scheduler.config

    @property
    def bursts(self) -> bool:
        """Whether jobs that find no room on-prem may go to a paid pool (each is then
        decided by its own expected wait, not by a request that found no room)."""
        return self._scheduler.cloud is not None

    def try_start(
        self,
        job: JobState,
        why: str | Callable[[], Words],
        pool: str = MAIN_POOL,
        limit_s: float | None = None,
    ) -> bool:
        """Place and start ``job`` if the placer finds room; ``why`` says why it goes now.

        ``why`` may be a function, called only when the job starts (a sentence
        with numbers costs more than a placement that fails); it may give the
        sentence itself or :data:`Words` that write it when read. ``limit_s`` makes it
        a bounded run (profiling): the driver reports back with
        :meth:`Scheduler.profiled` when the limit is reached.
        """
        placement = self._scheduler.placer.place(job.spec, self._scheduler.free, pool)
        if placement is not None:
            self.start(job, placement, why if isinstance(why, str) else why(), limit_s)
            return True
        # a job whose profiling run finds no room may burst too: it then runs whole
        # there, unprofiled (profiling is a short measuring run on-prem)
        if pool == MAIN_POOL and self._scheduler.cloud is not None:
            said = written(why if isinstance(why, str) else why())
            if limit_s is not None:  # a paid pool runs it whole: no profiling run there
                said = said.split(PROFILING_WORDS)[0] + "; runs whole there, unprofiled"
            if self._burst(job, said):
                return True
            self.waiting_gpus += job.spec.num_gpus
            remaining = expected_remaining(job.spec.expected_duration, _ran(job, self.now))
            self.waiting_work += job.spec.num_gpus * remaining
        return False

    def _burst(self, job: JobState, why: str) -> bool:
        """Start ``job`` in a paid pool when its expected on-prem wait, valued at its
        tenant's value of waiting, is worth the run's price there (start-up included)
        and fits what its tenant has left this month; a node still up from an earlier
        burst is tried first (no start-up, or what is left of it). A refusal is kept,
        with its numbers, for the job's explanation."""
        scheduler = self._scheduler
        config = scheduler.config
        cloud = scheduler.cloud
        assert cloud is not None
        spec = job.spec
        tenant = spec.tenant
        budget = cloud.budget_of(tenant)
        if not spec.cloud:
            scheduler.cloud_words[spec.id] = "submitted with --no-cloud: on-prem only"
            return False
        if budget is not None and not budget.cloud:
            scheduler.cloud_words[spec.id] = f"tenant {tenant} keeps its jobs on-prem (cloud off)"
            return False
        value = config.value_of_wait
        if budget is not None and budget.value_of_wait is not None:
            value = budget.value_of_wait
        if value is None or spec.num_gpus == 0:
            return False
        gpus = spec.num_gpus
        wait_h = self.expected_onprem_wait(self.waiting_gpus + gpus, spec.gpu_type) / 3600.0
        run_h = expected_remaining(spec.expected_duration, _ran(job, self.now)) / 3600.0
        worth = value * wait_h * gpus
        refusal = ""
        for pool in sorted(config.pools.values(), key=lambda p: p.cost_per_gpu_hour):
            placement, startup = self._cloud_room(job, pool)
            if placement is None:
                refusal = refusal or f"pool {pool.name} has no room for {plural(gpus, 'GPU')}"
                continue
            run_cost = pool.cost_per_gpu_hour * run_h * gpus
            start_cost = pool.cost_per_gpu_hour * startup / 3600.0 * gpus
            cost = run_cost + start_cost
            rule = (
                f"expected wait on-prem {_hours(wait_h)} x {plural(gpus, 'GPU')} valued at"
                f" {value:g}/GPU-h = {_money(worth)}"
                f" {'>' if worth >= cost else '<'} cloud cost {_money(run_cost)}"
                f" + start-up {_minutes(startup)}"
            )
            if worth < cost:
                refusal = f"stays on-prem: {rule}"
                continue
            money, hours = cloud.left(tenant, self.now)
            limit = (budget.limit if budget else None) or 0.0
            hours_limit = (budget.gpu_hours if budget else None) or 0.0
            if money is not None and cost > money:
                refusal = (
                    f"would burst to {pool.name} ({rule}), but tenant {tenant} has"
                    f" {_money(max(money, 0.0))} of {_money(limit)}"
                    f" left this month, less than the run's {_money(cost)}"
                )
                continue
            gpu_h = (run_h + startup / 3600.0) * gpus
            if hours is not None and gpu_h > hours:
                refusal = (
                    f"would burst to {pool.name} ({rule}), but tenant {tenant} has"
                    f" {_money(max(hours, 0.0))} of {_money(hours_limit)}"
                    f" GPU-hours left this month, less than the run's {_money(gpu_h)}"
                )
                continue
            gpu_type = scheduler.cluster.nodes[placement.parts[0][0]].gpu_type
            price = pool.cost_per_gpu_hour
            sentence = f"burst to {pool.name} ({gpu_type}, {price:.2f}/GPU-h): {rule}"
            if money is not None and budget is not None and budget.limit is not None:
                sentence += (
                    f"; tenant {tenant} has {_money(money)} of {_money(budget.limit)} left this"
                    " month"
                )
            reason = Reason(
                ReasonCode.BURST,
                f"{sentence}; {why}",
                {"startup_s": startup, "wait_h": wait_h, "cost": cost, "worth": worth},
            )
            scheduler.cloud_words.pop(spec.id, None)
            cloud.started(job, placement, pool.name, self.now)
            self.start(job, placement, why, startup_s=startup, reason=reason)
            return True
        if refusal:
            scheduler.cloud_words[spec.id] = refusal
        return False

    def _cloud_room(self, job: JobState, pool: PoolSpec) -> tuple[Placement | None, float]:
        """Where ``job`` would run in ``pool``, and the start-up it would wait: nodes already
        up first, else nodes brought up (within the pool's cap)."""
        scheduler = self._scheduler
        cloud = scheduler.cloud
        assert cloud is not None
        placement = scheduler.placer.place(job.spec, scheduler.free, pool.name)
        if placement is not None:
            return placement, max(cloud.warm_startup(i, self.now) for i, _ in placement.parts)
        if not pool.on_demand:
            return None, 0.0
        placement = scheduler.placer.place(job.spec, scheduler.free, off_pool(pool.name))
        if placement is None:
            return None, 0.0
        if not cloud.may_power_up(pool.name, len(placement.parts)):
            return None, 0.0
        return placement, pool.startup_s

    def expected_onprem_wait(self, gpus: int, gpu_type: str | None = None) -> float:
        """Seconds until ``gpus`` on-prem GPUs (of ``gpu_type``, when the job needs one) are
        expected free: running jobs' estimates, then the work waiting ahead in waves."""
        scheduler = self._scheduler
        free_gpus = scheduler.free
        if gpu_type is None:
            free = free_gpus.pool_free.get(MAIN_POOL, 0)
        else:
            nodes = scheduler.cluster.nodes
            free = sum(
                free_gpus.free[i]
                for i in free_gpus.pool_nodes(MAIN_POOL)
                if nodes[i].gpu_type == gpu_type
            )
        if free >= gpus:
            return 0.0
        if self._ends is None:
            self._ends = {}
        ends = self._ends.get(gpu_type)
        if ends is None:
            pool_of = free_gpus.pool_of
            nodes = scheduler.cluster.nodes
            ends = self._ends[gpu_type] = sorted(
                (
                    self.now + expected_remaining(j.spec.expected_duration, _ran(j, self.now)),
                    j.placement.num_gpus,
                )
                for j in scheduler.jobs.values()
                if j.status is JobStatus.RUNNING
                and j.placement is not None
                and j.placement.parts
                and pool_of[j.placement.parts[0][0]] == MAIN_POOL
                and (gpu_type is None or nodes[j.placement.parts[0][0]].gpu_type == gpu_type)
            )
        last = self.now
        for end, count in ends:
            free += count
            last = end
            if free >= gpus:
                return end - self.now
        # more GPUs wait ahead than the running jobs free: they start in waves after
        # those end, the work ahead spread over the pool's GPUs
        capacity = max(free, 1)
        return last - self.now + self.waiting_work / capacity

    def start(
        self,
        job: JobState,
        placement: Placement,
        why: Words,
        limit_s: float | None = None,
        startup_s: float = 0.0,
        reason: Reason | None = None,
        moved: bool = False,
    ) -> None:
        """``moved``: the core moves a running job itself after the policy's pass (home
        from a paid pool); the policy hears of it as of a job adopted at a restart."""
        scheduler = self._scheduler
        scheduler.free.take(placement)
        if scheduler.cloud_words:
            scheduler.cloud_words.pop(job.spec.id, None)
        job.start(placement, self.now, startup_s)
        if limit_s is None:  # (a profiling run is not moved: it ends at its limit)
            scheduler.type_moves.started(job, placement)
        if moved:
            scheduler.policy.on_adopted(job, self.now)
        else:
            scheduler.policy.on_started(job, self.now)
        self.decisions.append(
            Decision(
                Action.START,
                job.spec.id,
                placement,
                (reason or Reason(ReasonCode.SCHEDULED, why),),
                limit_s=limit_s,
                startup_s=startup_s,
            )
        )

    def add_reason(self, job_id: str, reason: Reason) -> None:
        """Add ``reason`` to the latest decision on ``job_id`` in this pass."""
        for index in range(len(self.decisions) - 1, -1, -1):
            decision = self.decisions[index]
            if decision.job_id == job_id:
                self.decisions[index] = decision.with_reason(reason)
                return
        raise ValueError(f"no decision on {job_id} in this pass")

    def start_packed(self, job: JobState, partner: JobState, why: str) -> None:
        """Start ``job`` on the GPUs of running ``partner``: both then share them."""
        scheduler = self._scheduler
        if partner.placement is None or partner.spec.id in scheduler.partners:
            raise ValueError(f"{partner.spec.id} cannot take a packing partner")
        if job.spec.num_gpus != partner.spec.num_gpus:
            raise ValueError("packed jobs must ask for the same number of GPUs")
        placement = partner.placement
        job.start(placement, self.now)
        scheduler.partners[job.spec.id] = partner.spec.id
        scheduler.partners[partner.spec.id] = job.spec.id
        scheduler.policy.on_started(job, self.now)
        self.decisions.append(
            Decision(
                Action.START,
                job.spec.id,
                placement,
                (Reason(ReasonCode.PACKED, why),),
                shares_with=partner.spec.id,
            )
        )

    def preempt(self, job: JobState, why: str) -> None:
        """Stop ``job``; a job sharing GPUs leaves them to its partner, which runs alone."""
        scheduler = self._scheduler
        assert job.placement is not None
        partner = scheduler.partners.pop(job.spec.id, None)
        if partner is not None:
            del scheduler.partners[partner]
        overhead = scheduler.config.overhead.for_job(job.spec)
        lost = scheduler.config.lost_if_stopped(job, self.now)
        if partner is None:
            scheduler.free.give_back(job.placement)
            scheduler.type_moves.freed()
        placement = job.placement
        if scheduler.cloud is not None:
            scheduler.cloud.left_pool(job.spec.id, self.now)
        job.stop(self.now, overhead, lost)
        scheduler.policy.on_preempted(job, self.now)
        cost = f"lost {lost:.0f} s of work since its last checkpoint; " if lost else ""
        self.decisions.append(
            Decision(
                Action.PREEMPT,
                job.spec.id,
                placement,
                (
                    Reason(
                        ReasonCode.PREEMPTED,
                        f"{why}; {cost}restore costs {overhead:g} s",
                        {"overhead_s": overhead, "lost_s": lost},
                    ),
                ),
                shares_with=partner,
                lost_s=lost,
                overhead_s=overhead,
            )
        )


class Scheduler:
    """Owns the cluster's free GPUs and every job's state; a policy decides the order."""

    def __init__(
        self,
        cluster: Cluster,
        policy: Policy,
        placer: Placer | None = None,
        config: SchedulerConfig | None = None,
    ) -> None:
        self.cluster = cluster
        self.policy = policy
        self.config = config or SchedulerConfig()
        self.free = FreeGpus(cluster)
        self.progress_book = ProgressBook()
        self.jobs: dict[str, JobState] = {}
        self.type_speeds = TypeSpeeds(
            self.config.gpu_type_rule, self.config.gpu_type_patience, self.jobs
        )
        self.placer: Placer = placer or default_placer(cluster, self.type_speeds)
        #: running jobs on a slower GPU type than their fastest, moved when it pays
        blind = self.config.gpu_type_rule == "blind"
        self.type_moves = TypeMoves(
            self.type_speeds, self.free, 0.0 if blind else self.config.gpu_type_move_after
        )
        #: speeds by type matter only on a cluster of several types
        self._typed = len({n.gpu_type for n in cluster.nodes}) > 1
        self.partners: dict[str, str] = {}  # packed job -> the job sharing its GPUs
        #: paid pools' power and spending (None: no paid pool configured)
        self.cloud: CloudPools | None = (
            CloudPools.of(self.free, self.config.pools, self.config.budgets)
            if self.config.pools
            else None
        )
        #: why a pending job did not burst at its last try, for its explanation
        self.cloud_words: dict[str, str] = {}
        self._returned = False  # paid-pool jobs came home after the policy's last pass
        self._moved = False  # running jobs moved to a faster type after it
        self._seq = 0
        self.pending_count = 0
        #: expected starts' ranges, calibrated on how the earlier projections missed
        self.start_ranges = StartRanges()

    # -- stimuli -----------------------------------------------------------------
    def submit(self, spec: JobSpec, now: float) -> JobState:
        if spec.id in self.jobs:
            raise ValueError(f"job {spec.id} was already submitted")
        if spec.num_gpus > self.cluster.total_gpus:
            raise ValueError(
                f"job {spec.id} needs {spec.num_gpus} GPUs;"
                f" the cluster has {self.cluster.total_gpus}"
            )
        job = JobState(spec, self._seq)
        self._seq += 1
        self.jobs[spec.id] = job
        if spec.type_speeds and self._typed:
            self.type_speeds.measured(spec.id, spec.type_speeds)
        self.pending_count += 1
        self.policy.on_submitted(job, now)
        return job

    def finish(self, job_id: str, now: float) -> JobState:
        job = self.jobs[job_id]
        if job.status is not JobStatus.RUNNING or job.placement is None:
            raise ValueError(f"job {job_id} is {job.status.value}, not running")
        partner = self.partners.pop(job_id, None)
        if partner is None:
            self.free.give_back(job.placement)
            self.type_moves.freed()
        else:  # the partner keeps the shared GPUs and now runs alone
            del self.partners[partner]
        if self.cloud is not None:
            self.cloud.left_pool(job_id, now)
        job.finish(now)
        self.policy.on_finished(job, now)
        del self.jobs[job_id]
        self.progress_book.forget(job_id)
        self.type_speeds.forget(job_id)
        return job

    def adopt(
        self, job_id: str, placement: Placement, now: float, since: float | None = None
    ) -> None:
        """A submitted job found already running (a service restart): take its GPUs (in a
        paid pool, its charge runs from ``since``, the ledger's record, else now)."""
        job = self.jobs[job_id]
        if job.status is not JobStatus.PENDING:
            raise ValueError(f"job {job_id} is {job.status.value}, cannot be adopted")
        self.free.take(placement)
        job.start(placement, now)
        self.type_moves.started(job, placement)
        self.start_ranges.forget(job_id)  # it started while no one watched: no outcome
        if self.cloud is not None:
            self.cloud.adopt_run(job, placement, since if since is not None else now, now)
        # policies that dequeue jobs inside their pass need to be told it left the queue
        self.policy.on_adopted(job, now)
        self.pending_count -= 1

    def requeue(self, job_id: str, now: float) -> None:
        """A running job stopped outside the core's decisions (its process vanished):
        free its GPUs and queue it again, keeping what it had done."""
        job = self.jobs[job_id]
        if job.status is not JobStatus.RUNNING or job.placement is None:
            return
        if job_id in self.partners:
            raise ValueError(f"{job_id} shares GPUs; packed jobs are not requeued alone")
        self.free.give_back(job.placement)
        self.type_moves.freed()
        if self.cloud is not None:
            self.cloud.left_pool(job_id, now)
        job.stop(now, self.config.overhead.for_job(job.spec))
        self.policy.on_preempted(job, now)
        self.pending_count += 1

    def withdraw(self, job_id: str, now: float) -> None:
        """A pending job cancelled by its owner leaves the queue for good."""
        job = self.jobs[job_id]
        if job.status is not JobStatus.PENDING:
            raise ValueError(f"job {job_id} is {job.status.value}, not pending")
        job.status = JobStatus.DONE
        self.policy.on_withdrawn(job, now)
        del self.jobs[job_id]
        self.cloud_words.pop(job_id, None)
        self.progress_book.forget(job_id)
        self.start_ranges.forget(job_id)
        self.pending_count -= 1

    def schedule(self, now: float) -> list[Decision]:
        book = self.type_speeds
        book.now = now
        book.crowded = self.pending_count > 2 * len(self.cluster.nodes)
        step = SchedulingPass(self, now)
        if self.cloud is not None:
            self._cloud_sweep(step)
        self.policy.schedule(step)
        if self.cloud is not None and self.cloud.runs:
            self._returned = self._cloud_return(step)
        self._moved = self.type_moves.move_after > 0.0 and self._move_to_faster(step)
        ranges = self.start_ranges
        for decision in step.decisions:
            if decision.action is Action.START:
                self.pending_count -= 1
                ranges.started(decision.job_id, now)
            else:
                self.pending_count += 1
        return step.decisions

    def next_wakeup(self, now: float) -> float | None:
        wake = self.policy.next_wakeup(now)
        if self._moved:
            # jobs moved to a faster type after the policy's pass left slower GPUs free:
            # the policy's next pass comes at once (the soonest time after now)
            wake = math.nextafter(now, math.inf)
        if self.cloud is None:
            return wake
        if wake is not None and wake <= now and self._returned:
            # the policy asks for a pass at once after jobs came home after its own pass
            wake = math.nextafter(now, math.inf)
        cloud = self.cloud.next_wakeup(now)
        return cloud if wake is None or (cloud is not None and cloud < wake) else wake

    def _cloud_sweep(self, step: SchedulingPass) -> None:
        """Before the policy's pass: stop paid-pool jobs whose tenant reached its budget,
        then release nodes idle long enough (a stopped job's node is idle from now)."""
        cloud = self.cloud
        assert cloud is not None
        for job_id in cloud.over_budget(step.now):
            job = self.jobs[job_id]
            tenant = job.spec.tenant
            budget = cloud.budget_of(tenant)
            limit = "" if budget is None or budget.limit is None else f" of {budget.limit:,.0f}"
            step.preempt(job, f"tenant {tenant} reached its cloud budget{limit} this month")
            self.cloud_words[job_id] = (
                f"tenant {tenant} spent its cloud budget{limit} this month: on-prem only"
            )
        cloud.sweep(step.now)

    def _cloud_return(self, step: SchedulingPass) -> bool:
        """After the policy's pass, on-prem GPUs it left free take paid-pool jobs home
        (the costliest remaining run first) when the price of what is left of the run
        there outweighs the restore: a burst pays for a peak, not for the job's life."""
        cloud = self.cloud
        assert cloud is not None
        overhead = self.config.overhead
        candidates = []
        for job_id, run in cloud.runs.items():
            job = self.jobs[job_id]
            if job_id in self.partners or job.placement is None:
                continue
            left = expected_remaining(job.spec.expected_duration, _ran(job, step.now))
            restore = overhead.for_job(job.spec) + self.config.lost_if_stopped(job, step.now)
            if left > RETURN_AFTER * max(restore, 60.0):
                candidates.append((run.price * run.gpus * left / 3600.0, job))
        candidates.sort(key=lambda c: -c[0])
        returned = False
        for cost, job in candidates:
            if self.free.pool_free.get(MAIN_POOL, 0) < job.spec.num_gpus:
                break
            placement = self.placer.place(job.spec, self.free, MAIN_POOL)
            if placement is None:
                continue
            step.preempt(job, f"on-prem GPUs are free: returns home, saving {cost:,.0f}")
            step.start(job, placement, "returns on-prem from a paid pool", moved=True)
            returned = True
        return returned

    def _move_to_faster(self, step: SchedulingPass) -> bool:
        """After the policy's pass, GPUs of a faster type it left free take running jobs
        from slower types when the run time saved outweighs the move
        (:mod:`ilucid.core.type_moves`)."""
        config = self.config

        def cost(job: JobState) -> float:
            return config.overhead.for_job(job.spec) + config.lost_if_stopped(job, step.now)

        moved = False
        for move in self.type_moves.due(step.now, cost, self.partners):
            job = move.job
            node = self.free.best_fit(job.spec.num_gpus, (move.gpu_type,), MAIN_POOL)
            if node is None:  # an earlier move took the room: it stays, still a candidate
                assert job.placement is not None
                self.type_moves.started(job, job.placement)
                continue
            step.preempt(job, move.stop_words)
            step.start(job, Placement(((node, job.spec.num_gpus),)), move.start_words, moved=True)
            moved = True
        return moved

    def take_power_changes(self) -> list[PowerChange]:
        """Nodes of paid pools to bring up or release, in the order decided (drivers act
        on them: the service through the cluster manager, a replay by billing them)."""
        return [] if self.cloud is None else self.cloud.take_changes()

    def profiled(self, job_id: str, now: float, report: ProfileReport) -> JobState:
        """A profiling run reached its limit: free its GPUs, hand the metrics to the policy.

        The work done so far is kept; moving to the main cluster costs the
        restore overhead, as a preemption does.
        """
        job = self.jobs[job_id]
        if job.status is not JobStatus.RUNNING or job.placement is None:
            raise ValueError(f"job {job_id} is {job.status.value}, not profiling")
        if job_id in self.partners:
            raise ValueError(f"job {job_id} shares GPUs; profiling runs are never packed")
        self.free.give_back(job.placement)
        if self.cloud is not None:
            self.cloud.left_pool(job_id, now)
        job.stop(now, self.config.overhead.for_job(job.spec))
        job.preemptions -= 1  # leaving the profiler is not a preemption
        self.pending_count += 1
        self.policy.on_profiled(job, report, now)
        return job

    def progress(self, job_id: str, now: float, step: float, total: float) -> None:
        """A running job said it is at ``step`` of ``total``: its estimate becomes what its
        own rate says is left (blended with the model's while the rate is young). Ignored
        for a job not running here (a late report)."""
        job = self.jobs.get(job_id)
        if job is None or job.status is not JobStatus.RUNNING or job.placement is None:
            return
        if not job.placement.parts:
            return
        gpu_type = self.cluster.nodes[job.placement.parts[0][0]].gpu_type
        seen = self.progress_book.report(job_id, step, total, _ran(job, now), gpu_type)
        if seen.rates and self._typed:  # the job's own pace per type ranks its types too
            self.type_speeds.measured(job_id, list(seen.rates.items()))
        estimate = self.progress_book.estimate(job_id, job.spec.expected_duration)
        if estimate is not None:
            self.policy.on_estimate(job, estimate.total_s, estimate.weight >= 1.0, now)

    def progress_words(self, job_id: str) -> str | None:
        """Why the job's estimate is what it is, from its own progress (None: it has
        not reported enough for a rate)."""
        job = self.jobs.get(job_id)
        if job is None:
            return None
        estimate = self.progress_book.estimate(job_id, job.spec.expected_duration)
        return None if estimate is None else estimate.words()

    def forecast(self, forecast: Forecast, now: float) -> None:
        """A new load forecast; policies without a tuner ignore it."""
        self.policy.on_forecast(forecast, now)

    # -- questions ---------------------------------------------------------------
    def pending(self) -> Iterable[JobState]:
        return [j for j in self.jobs.values() if j.status is JobStatus.PENDING]

    def wait_code(self, job_id: str) -> ReasonCode:
        """A countable code for why a pending job is not running.

        Every pool open to the job counts (training may start on serving nodes),
        as :func:`why_unplaced` judges it; cheap: the per-pool free counts decide
        unless they could hold the job, and only then does the placer look.
        """
        job = self.jobs[job_id]
        special = self.policy.wait_code(job)
        if special is not None:
            return special
        spec = job.spec
        fraction = spec.gpu_milli < FULL_GPU  # may join a shared GPU with no whole GPU free
        pools = [(p, n) for p, n in self.free.pool_free.items() if pool_open_to(spec, p)]
        if not fraction and sum(n for _, n in pools) < spec.num_gpus:
            return ReasonCode.INSUFFICIENT_GPUS
        for pool, left in pools:
            if (fraction or left >= spec.num_gpus) and self.placer.place(
                spec, self.free, pool
            ) is not None:
                return ReasonCode.BEHIND_IN_ORDER
        placer = self.placer
        if isinstance(placer, ConsolidatingPlacer):  # room on a slower type it waits out
            waiting = placer.waiting_for_faster(spec, self.free)
            if waiting is not None:
                return waiting.code
        if spec.cpus is not None or spec.memory_gb is not None:  # CPUs or memory may bind
            return explain_unplaceable(spec, self.free).code
        return ReasonCode.FRAGMENTED if any(n for _, n in pools) else ReasonCode.INSUFFICIENT_GPUS

    def expected_starts(
        self, now: float, until: str | None = None, limit: int = 5000
    ) -> dict[str, float]:
        """Expected start times of pending jobs (see :mod:`ilucid.core.expected_start`).

        Uses only estimates, never a job's true duration; pending jobs are taken
        in the policy's order when it exposes one, else oldest first. When
        ``until`` is placed beyond ``limit`` in that order the projection would
        stop before reaching it, so nothing is projected (an empty dict).
        """
        order = self.policy.pending_order()
        target = self.jobs.get(until) if until is not None else None
        if order is not None and target is not None and target.status is JobStatus.PENDING:
            position = self.policy.queue_position(target, now)
            if position is not None and position > limit:
                return {}
        ends: list[tuple[float, int]] = []
        for job in self.jobs.values():
            if job.status is not JobStatus.RUNNING or job.placement is None:
                continue
            partner = self.partners.get(job.spec.id)
            if partner is not None and partner < job.spec.id:
                continue  # a packed pair frees its GPUs once, counted with the other
            left = expected_remaining(job.spec.expected_duration, _ran(job, now))
            if partner is not None:
                other = self.jobs[partner]
                left = max(left, expected_remaining(other.spec.expected_duration, _ran(other, now)))
            ends.append((now + left, job.placement.num_gpus))
        profile = FreeProfile.from_running(now, self.cluster.total_gpus, ends)
        pending = (
            order
            if order is not None
            else sorted(self.pending(), key=lambda j: (j.spec.submit_time, j.seq))
        )
        return project_starts(profile, _start_requests(pending, now), until, limit)

    def start_range(self, job_id: str, now: float) -> StartRange | None:
        """Pending ``job_id``'s expected start as a calibrated range (None: it cannot be
        projected); the first range asked of a job is what its start later grades."""
        projected = self.expected_starts(now, until=job_id).get(job_id)
        if projected is None:
            return None
        return self.start_ranges.range_for(job_id, projected, now)

    def start_ranges_of_queue(self, now: float, limit: int = 5000) -> dict[str, StartRange]:
        """:meth:`start_range` for every pending job the projection reaches."""
        ranges = self.start_ranges
        return {
            job_id: ranges.range_for(job_id, projected, now)
            for job_id, projected in self.expected_starts(now, limit=limit).items()
        }

    def start_assumptions(self, job_id: str, outlook: StartRange, now: float) -> str:
        """``in 9 min (likely 4-25 min), if the 2 running jobs it waits for end when
        estimated (j41 in 6 min, j17 in 9 min) ...``: what ``outlook`` takes for granted,
        so a person knows what would make it wrong."""
        job = self.jobs[job_id]
        ends = sorted(
            (
                now + expected_remaining(other.spec.expected_duration, _ran(other, now)),
                other.spec.id,
            )
            for other in self.jobs.values()
            if other.status is JobStatus.RUNNING and other.placement is not None
        )
        awaited = [(end, other) for end, other in ends if end <= outlook.projected]
        said = range_words(outlook.median, outlook.low, outlook.high, now)
        if awaited:
            named = [f"{other} in {span_words(end - now)}" for end, other in awaited[:3]]
            if len(awaited) > 3:
                named.append(f"{len(awaited) - 3:,} more")
            running = (
                "running job it waits for ends"
                if len(awaited) == 1
                else f"{len(awaited):,} running jobs it waits for end"
            )
            said += f", if the {running} when estimated ({', '.join(named)})"
        elif outlook.projected - now < 1:
            said += ", as enough GPUs are free for it now"
        position = self.policy.queue_position(job, now)
        if position is not None and position > 1:
            ahead = (
                "job ahead of it runs"
                if position == 2
                else f"{position - 1:,} jobs ahead of it run"
            )
            said += f"{' and' if awaited else ', if'} the {ahead} as estimated"
        later = (
            "more inference" if job.spec.job_class is JobClass.INFERENCE else "an inference burst"
        )
        said += f"; {later} or a job that outranks it arriving would delay it"
        return f"{said} (range from {outlook.basis})"

    def why_pending(self, job_id: str, now: float) -> str:
        """A sentence such as ``pending (position 3 in fifo order): all 8 GPUs are busy ...``."""
        job = self.jobs[job_id]
        if job.status is not JobStatus.PENDING:
            return f"{job_id} is {job.status.value}"
        position = self.policy.queue_position(job, now)
        where = f" (position {position} in {self.policy.name} order)" if position else ""
        cloud = self.cloud_words.get(job_id)
        also = "" if cloud is None else f"; cloud: {cloud}"
        special = self.policy.explain_wait(job, now)
        if special is not None:
            return f"pending{where}: {special}{also}"
        blocked = why_unplaced(job.spec, self.free, self.placer, self.jobs.values(), self.partners)
        if blocked is not None:
            return f"pending{where}: {blocked.message}{also}"
        return f"pending{where}: {self._fits_now(job, position)}{also}"

    def _fits_now(self, job: JobState, position: int | None) -> str:
        """Why a job that would fit now waits: the jobs ahead of it in the policy's order
        (the first three of the queue named, the rest counted, and why the first waits),
        else nothing but the next pass. Only the queue's head is walked: cheap at any
        position (a replay's explainer asks at every event)."""
        head: list[JobState] = []
        order = self.policy.pending_order()
        if order is not None:
            for other in order:
                if other is job or len(head) == 3:
                    break
                head.append(other)
        count = position - 1 if position else len(head)
        name = self.policy.name
        if not head:
            return f"fits now and nothing is ahead of it: {name} starts it at its next pass"
        named = ", ".join(j.spec.id for j in head)
        if count > len(head):
            named += f" and {count - len(head):,} more"
        first = head[0]
        held = why_unplaced(first.spec, self.free, self.placer, self.jobs.values(), self.partners)
        their = f"; {first.spec.id} waits: {held.message}" if held is not None else ""
        return (
            f"fits now, but {name} serves {plural(count, 'job')} ahead of it in its order"
            f" first: {named}{their}"
        )


picklable(SchedulerConfig)
