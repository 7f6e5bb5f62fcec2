"""Real-time inference ahead of training, with a training reserve and tenant quotas.

One pass is a numbered recipe, each step a small mechanism that explains
what it did or why a job waits:

1. *Inference admission*: pending inference jobs, oldest first, start on free
   GPUs; when none fit they preempt training or best-effort jobs chosen to
   lose the least work, but inference never holds more than
   ``1 - reserve_training`` of the cluster, so training is never starved.
   Inference services hold their GPUs until they end.
2. *Guarantee reclaim*: a tenant asking for GPUs within its guaranteed quota
   gets them back from tenants that borrowed beyond their own, by preemption.
3. *Fair fill*: idle GPUs go to the tenant with the lowest usage per weight,
   and within a tenant to its job with the smallest estimated GPU-seconds,
   less an aging credit for time waited (a preempted job keeps its key). A
   job that does not fit is skipped, and with it every job of its shape at
   least as large (``tenant_queue.py``), however long the queue. Once the
   oldest job has waited ``starve_after_s``, the nodes expected to empty soonest
   that can hold it are drained for it (``draining.py``): they take no new
   training job until it starts there, except jobs expected to end before they
   empty (EASY backfilling on the duration estimates), while every other node
   keeps working (no job waits forever).

With ``static_inference_nodes`` the policy becomes the static-partitioning
baseline: inference runs only on a fixed pool of nodes, training only on the
rest, and nothing is ever preempted.
"""

from __future__ import annotations

import functools
import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from ilucid.core.decision import Reason
from ilucid.core.free_gpus import MAIN_POOL
from ilucid.core.jobs import JobState, JobStatus
from ilucid.core.model import JobClass
from ilucid.core.picklable import picklable
from ilucid.core.policies.draining import Drainer
from ilucid.core.policies.inference_tier import INFERENCE_POOL, SERVING_POOL, InferenceTier
from ilucid.core.policies.plan import PlanBase
from ilucid.core.policies.router import InferenceRouter
from ilucid.core.policies.tenant_queue import Bucket, Entry, TenantQueue, bucket_of
from ilucid.core.preemption import choose_victims
from ilucid.core.quota import QuotaBook, TenantQuota
from ilucid.core.scheduler import SchedulingPass

__all__ = ["TierConfig", "TieredPlan", "TieredPolicy"]


@dataclass(frozen=True, slots=True)
class TierConfig:
    reserve_training: float = 0.2
    quotas: Mapping[str, TenantQuota] = field(default_factory=dict)
    #: GPU-seconds of priority a waiting job gains per second waited. Off by default:
    #: measured on full Philly (training only) it raised mean JCT from 195k s (0) to
    #: 1.12M s (1.0), turning a backlog into FIFO; starvation is handled by draining.
    aging: float = 0.0
    starve_after_s: float = 86400.0
    #: how many of the longest-waiting jobs have nodes drained for them at once. 1 by
    #: default: on ITP cluster04 + DLRM, 4 raised training mean JCT from 30.2k s to 33.2k s
    #: (jobs wider than 8 GPUs averaged 356k s instead of 251k s; before drains renewed
    #: their promise, 4 raised it from ~36k s to ~62k s).
    drain_depth: int = 1
    #: how often a drain may renew its promise once its jobs outrun their estimates
    #: (``draining.py``); the cap keeps "no job waits forever" when estimates are wrong
    drain_renewals: int = 8
    #: pending jobs a guarantee reclaim or the starvation check looks at per tenant
    scan_depth: int = 200
    inference_preempts: bool = True
    #: a training job already preempted this many times is no longer an inference
    #: job's victim (None: no limit); best-effort jobs stay victims. Guarantee reclaims
    #: ignore it: a quota is a promise.
    preemption_limit: int | None = None
    #: > 0: static partitioning, the last N nodes serve inference only
    static_inference_nodes: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.reserve_training < 1.0:
            raise ValueError(f"reserve_training must be in [0, 1), got {self.reserve_training}")
        if self.aging < 0 or self.starve_after_s <= 0 or self.scan_depth < 1:
            raise ValueError("aging must be >= 0, starve_after_s > 0 and scan_depth >= 1")
        if self.drain_depth < 1:
            raise ValueError(f"drain_depth must be >= 1, got {self.drain_depth}")
        if self.drain_renewals < 0:
            raise ValueError(f"drain_renewals must be >= 0, got {self.drain_renewals}")
        if self.static_inference_nodes < 0:
            raise ValueError("static_inference_nodes must be >= 0")
        if self.preemption_limit is not None and self.preemption_limit < 0:
            raise ValueError(f"preemption_limit must be >= 0, got {self.preemption_limit}")


class TieredPlan(PlanBase):
    """Inference first, training reserve, tenant guarantees, weighted fair share."""

    def __init__(self, config: TierConfig | None = None, name: str | None = None) -> None:
        self.config = config or TierConfig()
        self.static = self.config.static_inference_nodes > 0
        self.name = name or ("static-partition" if self.static else "tiered")
        self.quotas = QuotaBook(self.config.quotas)
        self._pending: dict[str, TenantQueue] = {}
        self._key: dict[int, Entry] = {}
        self._jobs: dict[int, JobState] = {}
        self._running: dict[int, JobState] = {}  # training and best-effort
        self._why: dict[int, Reason] = {}
        self._pools_set = False
        config = self.config
        self.drainer = Drainer(
            config.starve_after_s, config.drain_depth, config.scan_depth, config.drain_renewals
        )

    # -- bookkeeping -----------------------------------------------------------
    def _entry(self, job: JobState) -> Entry:
        rank = 1 if job.spec.job_class is JobClass.BEST_EFFORT else 0
        gpu_s = job.spec.expected_duration * max(1, job.spec.num_gpus)
        return (rank, gpu_s + self.config.aging * job.spec.submit_time, job.seq)

    def _queue(self, job: JobState) -> None:
        entry = self._key.get(job.seq) or self._entry(job)
        self._key[job.seq] = entry
        queue = self._pending.get(job.spec.tenant)
        if queue is None:
            queue = self._pending[job.spec.tenant] = TenantQueue()
        queue.add(bucket_of(job.spec), entry)
        self.drainer.waiting(job)

    def _unqueue(self, job: JobState) -> None:
        self._pending[job.spec.tenant].remove(bucket_of(job.spec), self._key[job.seq])
        self.drainer.stopped_waiting(job.seq)

    def on_submitted(self, job: JobState, now: float) -> None:
        self._jobs[job.seq] = job
        self._queue(job)

    def on_started(self, job: JobState, now: float) -> None:
        self._why.pop(job.seq, None)
        self._unqueue(job)
        self._running[job.seq] = job
        self.quotas.add(job.spec.tenant, job.spec.num_gpus)

    def on_preempted(self, job: JobState, now: float) -> None:
        del self._running[job.seq]
        self.quotas.remove(job.spec.tenant, job.spec.num_gpus)
        self._queue(job)

    def on_withdrawn(self, job: JobState, now: float) -> None:
        self._unqueue(job)
        del self._jobs[job.seq]
        self._key.pop(job.seq, None)
        self._why.pop(job.seq, None)

    def on_finished(self, job: JobState, now: float) -> None:
        del self._jobs[job.seq]
        self._key.pop(job.seq, None)
        del self._running[job.seq]
        self.quotas.remove(job.spec.tenant, job.spec.num_gpus)

    def next_wakeup(self, now: float) -> float | None:
        return None

    # -- questions ---------------------------------------------------------------
    def pending_order(self) -> Iterator[JobState]:
        """Pending jobs in the order a pass considers them (fair share left aside)."""
        for entry in heapq.merge(*(queue.in_order() for queue in self._pending.values())):
            yield self._jobs[entry[2]]

    def queue_position(self, job: JobState, now: float) -> int | None:
        if job.status is not JobStatus.PENDING:
            return None
        key = self._key[job.seq]
        ahead = sum(queue.ahead_of(key) for queue in self._pending.values())
        return 1 + ahead

    def _reason(self, job: JobState) -> Reason | None:
        return self._why.get(job.seq)

    # -- decisions -----------------------------------------------------------------
    def prepare(self, step: SchedulingPass) -> None:
        """A static partition's pools are set before inference first looks for room."""
        if self.static and not self._pools_set:
            self._set_pools(step)

    def victims(self) -> Iterable[JobState]:
        return self._running.values()

    def schedule(self, step: SchedulingPass) -> None:
        if self.config.quotas:
            self._reclaim_guarantees(step)
        if self._pending:
            self._fill(step)

    def _set_pools(self, step: SchedulingPass) -> None:
        free = step.free
        nodes = len(free.cluster.nodes)
        if self.config.static_inference_nodes >= nodes:
            raise ValueError(
                f"static partition of {self.config.static_inference_nodes} inference nodes"
                f" leaves no training nodes in a {nodes}-node cluster"
            )
        for index in range(nodes - self.config.static_inference_nodes, nodes):
            free.set_pool(index, INFERENCE_POOL)
        self._pools_set = True

    def _start_training(
        self, step: SchedulingPass, job: JobState, why: str | Callable[[], str]
    ) -> bool:
        """Training goes to the main pool first, onto serving nodes only as a fallback.

        ``why`` may be a function, called only when the job starts."""
        if step.try_start(job, why, MAIN_POOL):
            return True
        return not self.static and step.try_start(
            job,
            lambda: (
                f"{why if isinstance(why, str) else why()} (on a node that also serves inference)"
            ),
            SERVING_POOL,
        )

    def _reclaim_guarantees(self, step: SchedulingPass) -> None:
        book = self.quotas
        for tenant, queue in list(self._pending.items()):
            if book.quota(tenant).guaranteed <= 0:
                continue
            hopeless = 1 << 30  # no borrower could make room for this many GPUs
            for entry in list(itertools.islice(queue.in_order(), self.config.scan_depth)):
                job = self._jobs[entry[2]]
                if job.spec.num_gpus >= hopeless:
                    continue
                if not book.within_guarantee(tenant, job.spec.num_gpus):
                    continue
                if self._start_training(step, job, f"within tenant {tenant}'s guaranteed quota"):
                    continue
                lenders = [
                    j
                    for j in self._running.values()
                    if j.spec.tenant != tenant and book.borrowing(j.spec.tenant) > 0
                ]
                victims = choose_victims(
                    job.spec, lenders, step.free, step.placer, step.now, step.config
                )
                if victims is None:
                    hopeless = min(hopeless, job.spec.num_gpus)
                    continue
                used = book.used.get(tenant, 0)
                for victim in victims:
                    step.preempt(
                        victim.job,
                        f"reclaimed: tenant {tenant} uses {used}/"
                        f"{book.quota(tenant).guaranteed} guaranteed GPUs and asked for"
                        f" {job.spec.num_gpus} more; tenant {victim.job.spec.tenant} was"
                        f" borrowing",
                    )
                started = self._start_training(
                    step, job, f"within tenant {tenant}'s guaranteed quota"
                )
                assert started, "victims were chosen so that the job fits"

    def _refused(self, job: JobState) -> bool:
        return self.quotas.refuse(job.spec.tenant, job.spec.num_gpus) is not None

    def _explain(self, job: JobState, reason: Reason) -> None:
        self._why[job.seq] = reason

    def _fill(self, step: SchedulingPass) -> None:
        """Hand idle GPUs out by fair share, each tenant's best-keyed job that could fit.

        A bucket (one GPU count of one shape) whose head found no room makes its
        larger-or-equal siblings of that shape skip the pass, so a pass costs
        about (jobs started + buckets) tries however long the queue is.
        """
        drainer = self.drainer
        drainer.serve(
            step,
            self._jobs,
            self._running.values(),
            self._refused,
            self._start_training,
            self._explain,
        )
        book = self.quotas
        turn = [(book.share(t), t) for t, queue in self._pending.items() if queue.size]
        heapq.heapify(turn)
        tenants = len(turn)  # fair share decides nothing when one tenant waits alone
        pools = step.free.pool_free
        latest = drainer.latest_promise()  # backfilled jobs must end by then
        scan = _FillScan(latest)

        def room() -> bool:
            left = pools.get(MAIN_POOL, 0) + pools.get(SERVING_POOL, 0)
            return left > 0 or (latest is not None and drainer.free_gpus(step) > 0)

        while turn and room():
            _, tenant = heapq.heappop(turn)
            pick = self._candidate(tenant, scan, step.now)
            if pick is None:
                continue  # this tenant has nothing more that could fit
            job, bucket, main = pick
            shape, gpus = bucket[:2], bucket[2]
            refusal = book.refuse(tenant, gpus)
            if refusal is not None:
                self._why[job.seq] = refusal
                scan.refused.add((tenant, bucket))
                heapq.heappush(turn, (book.share(tenant), tenant))
                continue
            started = False
            if main:
                why = functools.partial(self._why_fill, job, tenant, tenants)
                started = self._start_training(step, job, why)
                if not started:
                    scan.failed[shape] = min(scan.failed.get(shape, _NEVER), gpus)
            if (
                not started
                and scan.may_backfill(bucket)
                and drainer.can_backfill(job, step.now, latest)
            ):
                started = drainer.backfill(step, job, self._jobs)
                if not started:
                    scan.failed_backfill[shape] = min(scan.failed_backfill.get(shape, _NEVER), gpus)
            if not started:  # its bucket is marked above: the pass moves on
                self._why.pop(job.seq, None)
            heapq.heappush(turn, (book.share(tenant), tenant))

    def _why_fill(self, job: JobState, tenant: str, tenants: int) -> str:
        """Why the fill starts ``job``: its place in its tenant's order and, when tenants
        compete, the fair share that chose its tenant (read before it starts)."""
        gpu_s = job.spec.expected_duration * max(1, job.spec.num_gpus)
        credit = " less credit for time waited" if self.config.aging else ""
        order = f"least estimated GPU-seconds{credit} ({gpu_s:,.0f}) of the waiting jobs that fit"
        if tenants < 2:
            return f"{self.name}: {order}"
        quota = self.quotas.quota(tenant)
        used = self.quotas.used.get(tenant, 0)
        return (
            f"fair share: of the {tenants} tenants with waiting jobs, {tenant} holds the"
            f" fewest GPUs per unit of weight ({used} GPUs, weight {quota.weight:g}); {order}"
        )

    def _candidate(
        self, tenant: str, scan: _FillScan, now: float
    ) -> tuple[JobState, Bucket, bool] | None:
        """The tenant's best-keyed job that may still fit: ``(job, bucket, in main)``.

        In main (or serving) pools a bucket's head stands for the bucket. Among
        drained nodes a job must also end in time; in a bucket, key order is
        estimated-duration order, so the first few entries are the ones to try.
        """
        best: tuple[Entry, Bucket, bool] | None = None
        for bucket, entries in self._pending[tenant].buckets.items():
            if (tenant, bucket) in scan.refused:
                continue
            if scan.fits_main(bucket):
                entry, main = entries[0], True
            elif scan.may_backfill(bucket) and (tenant, bucket) not in scan.no_backfill:
                found = next(
                    (
                        e
                        for e in entries[:_BACKFILL_LOOK]
                        if self.drainer.can_backfill(self._jobs[e[2]], now, scan.latest)
                    ),
                    None,
                )
                if found is None:
                    scan.no_backfill.add((tenant, bucket))
                    continue
                entry, main = found, False
            else:
                continue
            if best is None or entry < best[0]:
                best = (entry, bucket, main)
        if best is None:
            return None
        return self._jobs[best[0][2]], best[1], best[2]


_NEVER = 1 << 30
#: entries of a bucket looked at for one that ends before the drained nodes' promise
_BACKFILL_LOOK = 8


class _FillScan:
    """What one fill pass has learnt: which shapes no longer fit, which buckets to skip."""

    __slots__ = ("failed", "failed_backfill", "latest", "no_backfill", "refused")

    def __init__(self, latest: float | None) -> None:
        self.latest = latest
        # fewest GPUs of a shape that found no room (in main and serving pools; among
        # drained nodes): larger jobs of that shape skip the rest of the pass
        self.failed: dict[tuple[str | None, float | None], int] = {}
        self.failed_backfill: dict[tuple[str | None, float | None], int] = {}
        self.refused: set[tuple[str, Bucket]] = set()  # over the tenant's quota
        self.no_backfill: set[tuple[str, Bucket]] = set()  # nothing there ends in time

    def fits_main(self, bucket: Bucket) -> bool:
        return bucket[2] < self.failed.get(bucket[:2], _NEVER)

    def may_backfill(self, bucket: Bucket) -> bool:
        return self.latest is not None and bucket[2] < self.failed_backfill.get(bucket[:2], _NEVER)


picklable(TierConfig)


class TieredPolicy(InferenceRouter):
    """``tiered`` (or a static partition) built directly: the inference tier and
    :class:`TieredPlan`."""

    def __init__(self, config: TierConfig | None = None, name: str | None = None) -> None:
        plan = TieredPlan(config, name)
        tier = InferenceTier(
            plan.config.reserve_training,
            static=plan.static,
            preempts=plan.config.inference_preempts,
            preemption_limit=plan.config.preemption_limit,
        )
        super().__init__(plan.name, tier, plan)
        self.config = plan.config
        self.quotas = plan.quotas

    def inference_limit(self, total_gpus: int) -> int:
        """Most GPUs inference may hold: the rest is the training reserve."""
        return self.inference.limit(total_gpus)
