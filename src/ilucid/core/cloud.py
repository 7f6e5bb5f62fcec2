"""On-demand cloud pools: which nodes are up, what they cost, what each tenant may spend.

A pool (:class:`~ilucid.core.PoolSpec`) whose nodes the cluster manager brings up on
demand starts powered down: its nodes sit in a closed pool (``<name>:off``) where
nothing is placed. A burst takes a node from there, which powers it up: the job waits
out the pool's start-up, and the node is billed from then on, job or no job, until it
has been idle ``idle_release_s`` and is released (never under a job). A later burst
onto a node that is still up pays no start-up. Drivers read the power changes
(:meth:`CloudPools.take_changes`) and carry them out: the live service through the
cluster manager, a replay by billing them.

Each tenant's cloud runs are charged to it (GPUs x time x the pool's price, start-up
included) against its monthly budget (:class:`CloudBudget`): a burst that would not
fit what is left is refused, with the numbers, and a running cloud job whose tenant
reaches its budget is stopped then (the core wakes at that moment), so a budget is
never exceeded. Idle node time is the site's bill, not a tenant's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ilucid.core.free_gpus import FreeGpus
from ilucid.core.jobs import JobState, JobStatus
from ilucid.core.model import Placement, PoolSpec
from ilucid.core.picklable import picklable

__all__ = [
    "OFF_SUFFIX",
    "CloudBudget",
    "CloudPools",
    "PowerChange",
    "TenantSpend",
    "month_of",
    "off_pool",
]

#: the closed pool a powered-down node of pool ``p`` sits in is ``p + OFF_SUFFIX``
OFF_SUFFIX = ":off"


def off_pool(pool: str) -> str:
    return pool + OFF_SUFFIX


def month_of(now: float) -> str:
    """The calendar month (UTC) a budget's spending counts in, e.g. ``2026-12``; a replay's
    clock starts at 0, so its months are 1970's: calendar months all the same."""
    year, month = _year_month(int(max(0.0, now) // 86400))
    return f"{year}-{month:02d}"


def _year_month(days: int) -> tuple[int, int]:
    """The (year, month) of a day counted from 1970-01-01 (the civil calendar's
    arithmetic: the core reads no clock and imports no time module)."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (1 if month <= 2 else 0), month


def _days_from_civil(year: int, month: int) -> int:
    """Days from 1970-01-01 to the first of ``month`` of ``year``."""
    year -= 1 if month <= 2 else 0
    era = year // 400
    yoe = year - era * 400
    mp = month - 3 if month > 2 else month + 9
    doy = (153 * mp + 2) // 5
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


@dataclass(frozen=True, slots=True)
class CloudBudget:
    """What a tenant may spend in paid pools each calendar month, and what its waiting
    is worth. ``limit`` is in the pools' currency, ``gpu_hours`` in GPU-hours (either or
    both; None: no limit of that kind). ``value_of_wait`` (per GPU-hour of waiting)
    overrides the site's; ``cloud = False`` keeps the tenant's jobs on-prem."""

    limit: float | None = None
    gpu_hours: float | None = None
    value_of_wait: float | None = None
    cloud: bool = True

    def __post_init__(self) -> None:
        for name in ("limit", "gpu_hours", "value_of_wait"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise ValueError(f"{name} must be a number >= 0, got {value!r}")


@dataclass(frozen=True, slots=True)
class PowerChange:
    """A node to bring up (``up``) or release, decided at ``at`` (seconds)."""

    node: str
    pool: str
    up: bool
    at: float
    why: str


@dataclass(slots=True)
class TenantSpend:
    """A tenant's spending in one month: closed runs, in currency and GPU-hours."""

    month: str
    cost: float = 0.0
    gpu_hours: float = 0.0


@dataclass(slots=True)
class _Run:
    """A job running in a paid pool: what it costs per second while it runs."""

    tenant: str
    pool: str
    since: float
    gpus: float
    price: float  # per GPU-hour


@dataclass(slots=True)
class _NodeBill:
    pool: str
    gpus: int
    price: float
    up_at: float
    ready_at: float
    idle_since: float | None = None


@dataclass(slots=True)
class CloudPools:
    """The power state of every on-demand node and the spending it causes."""

    free: FreeGpus
    pools: Mapping[str, PoolSpec]
    budgets: Mapping[str, CloudBudget]
    #: node index -> its bill while it is up
    up: dict[int, _NodeBill] = field(default_factory=dict)
    #: job id -> its run in a paid pool
    runs: dict[str, _Run] = field(default_factory=dict)
    spend: dict[str, TenantSpend] = field(default_factory=dict)
    #: the site's bill per pool: node time while up (closed intervals), and GPU-hours
    pool_cost: dict[str, float] = field(default_factory=dict)
    pool_gpu_hours: dict[str, float] = field(default_factory=dict)
    changes: list[PowerChange] = field(default_factory=list)
    #: every tenant's paid-pool runs, all months
    tenant_cost: dict[str, float] = field(default_factory=dict)
    #: bumped at every change a restart must not forget (the service stores the ledger)
    version: int = 0
    _node_since: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(
        cls, free: FreeGpus, pools: Mapping[str, PoolSpec], budgets: Mapping[str, CloudBudget]
    ) -> CloudPools:
        """Every node of an on-demand pool starts powered down."""
        cloud = cls(free, pools, budgets)
        for index, pool in enumerate(list(free.pool_of)):
            spec = pools.get(pool)
            if spec is not None and spec.on_demand:
                free.set_pool(index, off_pool(pool))
        return cloud

    # -- the rule's questions --------------------------------------------------------
    def budget_of(self, tenant: str) -> CloudBudget | None:
        return self.budgets.get(tenant)

    def spent(self, tenant: str, now: float) -> tuple[float, float]:
        """(currency, GPU-hours) the tenant has spent this month, its running jobs' so far."""
        book = self.spend.get(tenant)
        month = month_of(now)
        cost, hours = (book.cost, book.gpu_hours) if book and book.month == month else (0.0, 0.0)
        for run in self.runs.values():
            if run.tenant == tenant:
                gpu_h = run.gpus * max(0.0, now - max(run.since, _month_start(now))) / 3600.0
                cost += gpu_h * run.price
                hours += gpu_h
        return cost, hours

    def left(self, tenant: str, now: float) -> tuple[float | None, float | None]:
        """What the tenant may still spend this month (None: no limit of that kind)."""
        budget = self.budgets.get(tenant)
        if budget is None:
            return None, None
        cost, hours = self.spent(tenant, now)
        return (
            None if budget.limit is None else budget.limit - cost,
            None if budget.gpu_hours is None else budget.gpu_hours - hours,
        )

    def warm_startup(self, index: int, now: float) -> float:
        """Start-up still ahead on an up node (0 once it is ready)."""
        bill = self.up.get(index)
        return 0.0 if bill is None else max(0.0, bill.ready_at - now)

    def may_power_up(self, pool: str, nodes: int) -> bool:
        """Whether ``nodes`` more of ``pool`` may come up within its cap."""
        spec = self.pools[pool]
        if spec.max_nodes is None:
            return True
        return sum(1 for b in self.up.values() if b.pool == pool) + nodes <= spec.max_nodes

    # -- what happens ---------------------------------------------------------------
    def started(self, job: JobState, placement: Placement, pool: str, now: float) -> None:
        """A job placed in paid ``pool``: nodes it powers up, and its charge from now."""
        spec = self.pools[pool]
        nodes = self.free.cluster.nodes
        for index, _ in placement.parts:
            bill = self.up.get(index)
            if bill is None:
                if self.free.pool_of[index] == off_pool(pool):
                    self.free.set_pool(index, pool)
                bill = _NodeBill(
                    pool, nodes[index].num_gpus, spec.cost_per_gpu_hour, now, now + spec.startup_s
                )
                self.up[index] = bill
                why = f"{job.spec.id} bursts there"
                self.changes.append(PowerChange(nodes[index].name, pool, True, now, why))
            bill.idle_since = None
        gpus = placement.num_gpus * (placement.milli / 1000.0 if placement.share else 1.0)
        self.runs[job.spec.id] = _Run(job.spec.tenant, pool, now, gpus, spec.cost_per_gpu_hour)
        self.version += 1

    def left_pool(self, job_id: str, now: float) -> None:
        """A job stopped or ended: its charge closes at ``now``."""
        run = self.runs.pop(job_id, None)
        if run is None:
            return
        month = month_of(now)
        book = self.spend.get(run.tenant)
        if book is None or book.month != month:
            book = self.spend[run.tenant] = TenantSpend(month)
        gpu_h = run.gpus * max(0.0, now - max(run.since, _month_start(now))) / 3600.0
        book.cost += gpu_h * run.price
        book.gpu_hours += gpu_h
        whole = run.gpus * max(0.0, now - run.since) / 3600.0 * run.price
        self.tenant_cost[run.tenant] = self.tenant_cost.get(run.tenant, 0.0) + whole
        self.version += 1

    def adopted(self, index: int, pool: str, ready: bool, now: float) -> None:
        """A node found up at a restart: billed from now, ready or still starting."""
        if index in self.up:
            return
        spec = self.pools[pool]
        if self.free.pool_of[index] == off_pool(pool):
            self.free.set_pool(index, pool)
        ready_at = now if ready else now + spec.startup_s
        nodes = self.free.cluster.nodes
        up_at = self._node_since.get(nodes[index].name, now)
        self.up[index] = _NodeBill(
            pool, nodes[index].num_gpus, spec.cost_per_gpu_hour, up_at, ready_at
        )
        self.version += 1

    def pool_of_placement(self, placement: Placement) -> str | None:
        """The paid pool a placement is in (its first node's), or None for on-prem."""
        if not placement.parts:
            return None
        pool = self.free.pool_of[placement.parts[0][0]].removesuffix(OFF_SUFFIX)
        if pool not in self.pools:
            label = self.free.cluster.nodes[placement.parts[0][0]].labels.get("pool")
            pool = label if label is not None else pool
        return pool if pool in self.pools else None

    def adopt_run(self, job: JobState, placement: Placement, since: float, now: float) -> None:
        """A job found running in a paid pool at a restart: its node is up (billed from
        its recorded power-up, else now) and its charge runs from ``since``."""
        pool = self.pool_of_placement(placement)
        if pool is None:
            return
        for index, _ in placement.parts:
            self.adopted(index, pool, True, now)
        spec = self.pools[pool]
        gpus = placement.num_gpus * (placement.milli / 1000.0 if placement.share else 1.0)
        self.runs[job.spec.id] = _Run(job.spec.tenant, pool, since, gpus, spec.cost_per_gpu_hour)
        self.version += 1

    def restore(
        self,
        spend: Mapping[str, TenantSpend],
        pool_bills: Mapping[str, tuple[float, float]],
        node_since: Mapping[str, float],
        tenant_totals: Mapping[str, float] | None = None,
    ) -> None:
        """What the ledger kept across a restart: this month's closed spending, the pools'
        closed node time, and when each node still up came up."""
        self.spend.update(
            {tenant: TenantSpend(b.month, b.cost, b.gpu_hours) for tenant, b in spend.items()}
        )
        for pool, (cost, hours) in pool_bills.items():
            self.pool_cost[pool] = cost
            self.pool_gpu_hours[pool] = hours
        self._node_since = dict(node_since)
        self.tenant_cost.update(tenant_totals or {})

    def ledger(
        self,
    ) -> tuple[
        dict[str, TenantSpend], dict[str, tuple[float, float]], dict[str, float], dict[str, float]
    ]:
        """What a restart needs: tenants' closed spending, pools' closed node time, when
        each up node came up, and when each running paid-pool job's charge began."""
        nodes = self.free.cluster.nodes
        return (
            {t: TenantSpend(b.month, b.cost, b.gpu_hours) for t, b in self.spend.items()},
            {
                p: (self.pool_cost.get(p, 0.0), self.pool_gpu_hours.get(p, 0.0))
                for p in set(self.pool_cost) | set(self.pool_gpu_hours)
            },
            {nodes[i].name: bill.up_at for i, bill in self.up.items()},
            {job_id: run.since for job_id, run in self.runs.items()},
        )

    def sweep(self, now: float) -> list[int]:
        """Note which up nodes are idle and release those idle long enough; returns the
        released nodes. A release counts at its due time, not the pass's."""
        free = self.free
        released: list[int] = []
        for index, bill in list(self.up.items()):
            if free.free[index] < free.capacity[index] or free.pool_of[index] != bill.pool:
                bill.idle_since = None
                continue
            if bill.idle_since is None:
                bill.idle_since = now
            due = bill.idle_since + self.pools[bill.pool].idle_release_s
            if due <= now:
                self._release(index, bill, due)
                released.append(index)
        return released

    def _release(self, index: int, bill: _NodeBill, at: float) -> None:
        del self.up[index]
        self._close(bill, at)
        self.free.set_pool(index, off_pool(bill.pool))
        idle = self.pools[bill.pool].idle_release_s
        name = self.free.cluster.nodes[index].name
        why = f"idle {idle:g} s with no job (released; never under a running job)"
        self.changes.append(PowerChange(name, bill.pool, False, at, why))

    def _close(self, bill: _NodeBill, at: float) -> None:
        self.version += 1
        hours = bill.gpus * max(0.0, at - bill.up_at) / 3600.0
        self.pool_gpu_hours[bill.pool] = self.pool_gpu_hours.get(bill.pool, 0.0) + hours
        self.pool_cost[bill.pool] = self.pool_cost.get(bill.pool, 0.0) + hours * bill.price

    def over_budget(self, now: float) -> list[str]:
        """Running paid-pool jobs whose tenant has reached a limit (stopped now)."""
        tenants = {run.tenant for run in self.runs.values() if run.tenant in self.budgets}
        spent_out = set()
        for tenant in tenants:
            cost, hours = self.left(tenant, now)
            if (cost is not None and cost <= 1e-9) or (hours is not None and hours <= 1e-9):
                spent_out.add(tenant)
        return [job for job, run in self.runs.items() if run.tenant in spent_out]

    def next_wakeup(self, now: float) -> float | None:
        """The next release due, or the next moment a tenant's running jobs reach its
        budget (so a replay stops them then, not at some later event)."""
        moments: list[float] = []
        for bill in self.up.values():
            if bill.idle_since is not None:
                moments.append(bill.idle_since + self.pools[bill.pool].idle_release_s)
        rates: dict[str, tuple[float, float]] = {}
        for run in self.runs.values():
            if run.tenant in self.budgets:
                per_s, gpus = rates.get(run.tenant, (0.0, 0.0))
                rates[run.tenant] = (per_s + run.gpus * run.price / 3600.0, gpus + run.gpus)
        for tenant, (per_s, gpus) in rates.items():
            cost, hours = self.left(tenant, now)
            if cost is not None and per_s > 0:
                moments.append(now + max(cost, 0.0) / per_s)
            if hours is not None and gpus > 0:
                moments.append(now + max(hours, 0.0) * 3600.0 / gpus)
        later = [m for m in moments if m > now]
        return min(later) if later else None

    def take_changes(self) -> list[PowerChange]:
        changes, self.changes = self.changes, []
        return changes

    def bill(self, now: float) -> dict[str, tuple[float, float]]:
        """Per pool, (cost, GPU-hours) of node time so far, up nodes counted to ``now``."""
        cost = dict(self.pool_cost)
        hours = dict(self.pool_gpu_hours)
        for bill in self.up.values():
            gpu_h = bill.gpus * max(0.0, now - bill.up_at) / 3600.0
            hours[bill.pool] = hours.get(bill.pool, 0.0) + gpu_h
            cost[bill.pool] = cost.get(bill.pool, 0.0) + gpu_h * bill.price
        return {pool: (cost.get(pool, 0.0), hours.get(pool, 0.0)) for pool in hours}

    def close_all(self, ended: Iterable[JobState], now: float) -> None:
        """End of a replay: every node up is released when its idle time would have."""
        for job in ended:
            if job.status is JobStatus.RUNNING:
                self.left_pool(job.spec.id, now)
        for index, bill in list(self.up.items()):
            idle = self.pools[bill.pool].idle_release_s
            self._release(index, bill, max(now, bill.idle_since or now) + idle)


def _month_start(now: float) -> float:
    """The first second of ``now``'s month: a run that spans months counts in each."""
    year, month = _year_month(int(max(0.0, now) // 86400))
    return _days_from_civil(year, month) * 86400.0


picklable(CloudBudget, PowerChange)
