"""N schedulers deciding at once on one cluster: how often optimistic commits conflict.

Issue 20 asks whether the decision loop needs sharding, and what sharded
decisions would cost, before any live code. This replays a trace with ``N``
copies of the unchanged core, in the spirit of Omega's shared state:

* every job belongs to one scheduler (a stable hash of its id); each scheduler is
  a whole :class:`~ilucid.core.Scheduler` with its own policy, and sees the whole
  cluster;
* at each pass every scheduler first syncs its view of the free GPUs with the
  committed state (the snapshot), then all decide on that same snapshot, as
  if they ran at the same time;
* their decisions are then committed one scheduler at a time, in a random
  (seeded) order: who reaches the database first. A preemption always commits
  (a scheduler stops only its own jobs). A start commits only if every node of
  its placement still has that many free GPUs; otherwise it *conflicts*, its
  scheduler is told that the start did not happen, and it retries in another
  round at the same instant on a fresh snapshot. The first committer of a round
  never conflicts, so a pass takes at most ``N`` rounds.

``concurrent=False`` is the baseline: each scheduler decides after the commits
before it (a lock from snapshot to commit), so nothing conflicts.

The replay's own truth (the engine) only sees committed decisions. Conflicts
are counted on GPU counts per node, as the core books them (a live commit
would assign a node's free GPU indices when it commits). Two stimuli the core
lacks are stood in for with public calls, and named where they are: "start
refused" (:meth:`ShardedScheduler._roll_back`) and "capacity freed elsewhere"
(:meth:`ShardedScheduler._freed_by`). With ``N = 1`` nothing conflicts and the
replay is the plain one, decision for decision.
"""

from __future__ import annotations

import random
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from ilucid.core import (
    Action,
    Cluster,
    Decision,
    Forecast,
    JobSpec,
    JobState,
    JobStatus,
    Placement,
    Policy,
    ProfileReport,
    Scheduler,
    SchedulerConfig,
)
from ilucid.core.policies.default import DefaultConfig, DefaultPlan
from ilucid.core.policies.inference_tier import InferenceTier
from ilucid.core.policies.router import InferenceRouter
from ilucid.core.reason_codes import ReasonCode
from ilucid.core.scheduler import SchedulingPass
from ilucid.sim.engine import Replay
from ilucid.sim.replay_types import Annotator, SimResult, World

__all__ = [
    "ReachableDefault",
    "ShardStats",
    "ShardedReplay",
    "ShardedScheduler",
    "by_job_hash",
    "simulate_sharded",
]

REFUSED = "claim refused at commit: another scheduler took these GPUs first"


def by_job_hash(shards: int) -> Callable[[JobSpec], int]:
    """The scheduler a job belongs to: a stable hash of its id (crc32), mod ``shards``."""
    return lambda spec: zlib.crc32(spec.id.encode()) % shards


@dataclass
class ShardStats:
    """What the commits cost, over the passes in which some scheduler claimed GPUs."""

    shards: int
    passes: int = 0  # passes with at least one claim
    claims: int = 0  # starts that needed GPUs, retries included
    conflicts: int = 0  # ... refused at commit
    passes_with_conflict: int = 0
    #: preemptions committed by a scheduler in a proposal of which a start was refused:
    #: GPUs it freed for a job that then did not start there
    stranded_preemptions: int = 0
    rounds: Counter[int] = field(default_factory=Counter)  # rounds a pass took -> passes
    #: modelled decision latency of a pass: the slowest scheduler of each round, summed
    #: (schedulers of a round run in parallel), in seconds
    latency_s: list[float] = field(default_factory=list)

    @property
    def conflict_rate(self) -> float:
        return self.conflicts / self.claims if self.claims else 0.0

    @property
    def extra_rounds(self) -> float:
        """Mean rounds beyond the first, per pass with claims."""
        total = sum(r * n for r, n in self.rounds.items())
        return (total - self.passes) / self.passes if self.passes else 0.0


class _ReachablePlan(DefaultPlan):
    """The default plan for one of several schedulers: it re-plans within the GPUs it
    can reach (the free ones and its own jobs'), not the whole cluster.

    Unchanged, each scheduler's re-plan hands out every GPU of the cluster to its own
    jobs: jobs it cannot place (other schedulers hold the GPUs) then fill its quota
    and keep its later jobs waiting beside free GPUs. With one scheduler both are
    the same (every GPU is free or its own).
    """

    def _capacity(self, step: SchedulingPass) -> float:
        return min(super()._capacity(step), float(step.free.free_total) + self._running.total)


class ReachableDefault(InferenceRouter):
    """The default profile, its training lane re-planned within reach (above)."""

    def __init__(self) -> None:
        plan = _ReachablePlan(DefaultConfig())
        tier = InferenceTier(
            plan.config.reserve_training, preemption_limit=plan.config.preemption_limit
        )
        super().__init__(plan.name, tier, plan)


class ShardedScheduler(Scheduler):
    """Looks like one :class:`Scheduler` to the replay; decides with ``len(policies)``.

    Its own ``free`` is the committed state; ``jobs`` holds every scheduler's
    job states (the same objects).
    """

    def __init__(
        self,
        cluster: Cluster,
        policies: Sequence[Policy],
        config: SchedulerConfig | None = None,
        seed: int = 0,
        partition: Callable[[JobSpec], int] | None = None,
        concurrent: bool = True,
    ) -> None:
        if not policies:
            raise ValueError("a sharded scheduler needs at least one policy")
        super().__init__(cluster, policies[0], config=config)
        self.shards = [Scheduler(cluster, p, self.placer, self.config) for p in policies]
        self.partition = partition or by_job_hash(len(policies))
        self.stats = ShardStats(len(policies))
        self._owner: dict[str, Scheduler] = {}
        self._stale: list[set[int]] = [set() for _ in policies]  # nodes to re-sync
        self._rng = random.Random(seed)
        self._nudges = 0
        self._started: set[str] = set()  # jobs with a committed start
        self._queued_since: dict[str, float] = {}  # since when each job waits, as committed
        #: False: each scheduler decides after the commits before it (a lock held from
        #: snapshot to commit: never a conflict), the baseline for the cost of conflicts
        self.concurrent = concurrent

    # -- the committed state -------------------------------------------------------------
    def _changed(self, placement: Placement) -> None:
        for stale in self._stale:
            stale.update(placement.node_indices)

    def _release(self, placement: Placement) -> None:
        self.free.give_back(placement)
        self._changed(placement)

    def _fits(self, placement: Placement) -> bool:
        free = self.free.free
        return all(free[index] >= count for index, count in placement.parts)

    def _sync(self, shard: int) -> None:
        """Bring one scheduler's view of the free GPUs up to the committed state."""
        view, committed = self.shards[shard].free, self.free.free
        for index in self._stale[shard]:
            delta = committed[index] - view.free[index]
            if delta > 0:
                view.give_back(Placement(((index, delta),)))
            elif delta < 0:
                view.take(Placement(((index, -delta),)))
        self._stale[shard].clear()

    def _freed_by(self, owner: Scheduler, now: float) -> None:
        """GPUs ``owner``'s job held are free: tell every other scheduler with work waiting.

        The core has no stimulus for "capacity freed elsewhere" (one scheduler hears of
        every end itself), so it stands in with a GPU-less job submitted and withdrawn,
        which makes a policy re-plan at its next pass. A live sharded core would need
        that stimulus of its own.
        """
        for shard in self.shards:
            if shard is not owner and shard.pending_count:
                self._nudges += 1
                spec = JobSpec(f"~freed-{self._nudges}", now, 0, 0.0)
                shard.submit(spec, now)
                shard.withdraw(spec.id, now)

    def _tally(self) -> None:
        self.pending_count = sum(s.pending_count for s in self.shards)
        self.partners = {k: v for s in self.shards for k, v in s.partners.items()}

    # -- stimuli -------------------------------------------------------------------------
    def submit(self, spec: JobSpec, now: float) -> JobState:
        shard = self.shards[self.partition(spec)]
        job = shard.submit(spec, now)
        self.jobs[spec.id] = job
        self._owner[spec.id] = shard
        self._queued_since[spec.id] = job.since
        self.pending_count += 1
        return job

    def finish(self, job_id: str, now: float) -> JobState:
        shard = self._owner.pop(job_id)
        self._started.discard(job_id)
        del self._queued_since[job_id]
        placement = shard.jobs[job_id].placement
        alone = job_id not in shard.partners
        job = shard.finish(job_id, now)
        if alone and placement is not None:
            self._release(placement)
            self._freed_by(shard, now)
        del self.jobs[job_id]
        self._tally()
        return job

    def profiled(self, job_id: str, now: float, report: ProfileReport) -> JobState:
        shard = self._owner[job_id]
        placement = shard.jobs[job_id].placement
        job = shard.profiled(job_id, now, report)
        self._queued_since[job_id] = job.since
        if placement is not None:
            self._release(placement)
            self._freed_by(shard, now)
        self._tally()
        return job

    def forecast(self, forecast: Forecast, now: float) -> None:
        for shard in self.shards:
            shard.forecast(forecast, now)

    def adopt(
        self, job_id: str, placement: Placement, now: float, since: float | None = None
    ) -> None:
        raise NotImplementedError("a sharded replay adopts nothing (no restarts)")

    def requeue(self, job_id: str, now: float) -> None:
        raise NotImplementedError("a sharded replay requeues nothing (no lost processes)")

    def withdraw(self, job_id: str, now: float) -> None:
        raise NotImplementedError("a sharded replay withdraws nothing (no cancellations)")

    # -- a pass --------------------------------------------------------------------------
    def schedule(self, now: float) -> list[Decision]:
        """One pass: rounds of decisions and commits until no start is refused."""
        decided: list[Decision] = []
        deciding = list(range(len(self.shards)))
        rounds = claims = conflicts = 0
        latency = 0.0
        while deciding:
            rounds += 1
            self._rng.shuffle(deciding)  # the order in which they reach the database
            outcome = self._round(deciding, now, decided)
            deciding, latency = sorted(outcome[0]), latency + outcome[3]
            claims, conflicts = claims + outcome[1], conflicts + outcome[2]
        if claims:
            stats = self.stats
            stats.passes += 1
            stats.claims += claims
            stats.conflicts += conflicts
            stats.passes_with_conflict += int(conflicts > 0)
            stats.rounds[rounds] += 1
            stats.latency_s.append(latency)
        self._tally()
        return decided

    def _round(
        self, order: list[int], now: float, decided: list[Decision]
    ) -> tuple[list[int], int, int, float]:
        """Schedulers decide and commit in ``order``: concurrently, all on the snapshot
        taken before any commit; else each after syncing with the commits before it.
        Returns the refused schedulers, claims, conflicts and the round's latency."""
        if self.concurrent:
            for shard in order:
                self._sync(shard)
        proposals: list[tuple[int, list[Decision]]] = []
        times: list[float] = []
        outcome: tuple[list[int], int, int] = ([], 0, 0)
        for shard in order:
            if not self.concurrent:
                self._sync(shard)
            began = time.perf_counter()
            proposals.append((shard, self.shards[shard].schedule(now)))
            times.append(time.perf_counter() - began)
            if not self.concurrent:  # it commits before the next one decides
                outcome = self._settle(proposals.pop(), now, decided, outcome)
        for proposal in proposals:
            outcome = self._settle(proposal, now, decided, outcome)
        latency = max(times, default=0.0) if self.concurrent else sum(times)
        return (*outcome, latency)

    def _settle(
        self,
        proposal: tuple[int, list[Decision]],
        now: float,
        decided: list[Decision],
        outcome: tuple[list[int], int, int],
    ) -> tuple[list[int], int, int]:
        """Commit one scheduler's proposal; tell it of refused starts. Adds to
        ``outcome`` (refused schedulers, claims, conflicts)."""
        shard, proposed = proposal
        refused_by, claims, conflicts = outcome
        refused, claimed = self._commit(proposed, now, decided)
        if refused:
            conflicts += sum(1 for d in refused if d.shares_with is None)
            gone = {d.job_id for d in refused}
            self.stats.stranded_preemptions += sum(
                1 for d in proposed if d.action is Action.PREEMPT and d.job_id not in gone
            )
            self._roll_back(self.shards[shard], refused, now)
            refused_by = [*refused_by, shard]
        return refused_by, claims + claimed, conflicts

    def _commit(
        self, proposed: Iterable[Decision], now: float, decided: list[Decision]
    ) -> tuple[list[Decision], int]:
        """Commit one scheduler's decisions in order; the starts refused, and the
        claims made (starts that needed GPUs)."""
        refused: list[Decision] = []
        gone: set[str] = set()  # jobs whose start was refused in this batch
        claimed = 0
        for decision in proposed:
            if decision.job_id in gone:
                continue  # a later decision on a job that never started here
            placement = decision.placement
            if placement is None:
                pass  # holds change nothing
            elif decision.action is Action.PREEMPT:
                if decision.shares_with is None:
                    self._release(placement)
                self._queued_since[decision.job_id] = now
            elif decision.action is Action.START:
                if decision.shares_with is not None:  # on a partner's GPUs: no new claim
                    if decision.shares_with in gone:
                        refused.append(decision)
                        gone.add(decision.job_id)
                        continue
                else:
                    claimed += 1
                    if not self._fits(placement):
                        refused.append(decision)
                        gone.add(decision.job_id)
                        continue
                    self.free.take(placement)
                    self._changed(placement)
                self._started.add(decision.job_id)
            decided.append(decision)
        return refused, claimed

    def _roll_back(self, shard: Scheduler, refused: Sequence[Decision], now: float) -> None:
        """Tell a scheduler its refused starts did not happen (packed partners first).

        The core has no "start refused" stimulus, so a preemption stands in for it and
        what it would leave behind is undone: the job keeps its first start only if an
        earlier start was committed (else it counts as never served: profiled, guarded
        after ``starve_after_s``), no preemption or restore is counted, and it waits
        since when it waited before. A live sharded core would need that stimulus.
        """
        step = SchedulingPass(shard, now)
        for decision in reversed(refused):
            job = shard.jobs[decision.job_id]
            if job.status is not JobStatus.RUNNING:
                continue
            if decision.job_id not in self._started:
                job.first_start = None  # before the preemption: the policy reads it there
            step.preempt(job, REFUSED)
            job.preemptions -= 1
            job.remaining -= step.decisions[-1].overhead_s
            job.since = self._queued_since[decision.job_id]
        shard.pending_count += sum(1 for d in step.decisions if d.action is Action.PREEMPT)

    # -- questions -----------------------------------------------------------------------
    def next_wakeup(self, now: float) -> float | None:
        wakes = [w for s in self.shards if (w := s.next_wakeup(now)) is not None]
        return min(wakes, default=None)

    def wait_code(self, job_id: str) -> ReasonCode:
        return self._owner[job_id].wait_code(job_id)

    def why_pending(self, job_id: str, now: float) -> str:
        return self._owner[job_id].why_pending(job_id, now)

    def expected_starts(
        self, now: float, until: str | None = None, limit: int = 5000
    ) -> dict[str, float]:
        shard = self._owner.get(until) if until is not None else None
        return {} if shard is None else shard.expected_starts(now, until, limit)


class ShardedReplay(Replay):
    """The simulator's replay, driving a :class:`ShardedScheduler` instead of one core."""

    def __init__(
        self,
        jobs: Sequence[JobSpec],
        sharded: ShardedScheduler,
        annotator: Annotator | None = None,
        world: World | None = None,
    ) -> None:
        super().__init__(
            jobs,
            sharded.cluster,
            sharded.policy,
            sharded.config,
            annotator=annotator,
            world=world,
        )
        self.sharded = sharded
        self.scheduler = sharded


def simulate_sharded(
    jobs: Sequence[JobSpec],
    cluster: Cluster,
    make_policy: Callable[[], Policy],
    shards: int,
    config: SchedulerConfig | None = None,
    seed: int = 0,
    annotator: Annotator | None = None,
    world: World | None = None,
    concurrent: bool = True,
) -> tuple[SimResult, ShardStats]:
    """Replay ``jobs`` with ``shards`` schedulers, each running ``make_policy()``."""
    if shards < 1:
        raise ValueError(f"shards must be >= 1, got {shards}")
    policies = [make_policy() for _ in range(shards)]
    sharded = ShardedScheduler(cluster, policies, config, seed, concurrent=concurrent)
    result = ShardedReplay(jobs, sharded, annotator, world).run()
    return result, sharded.stats
