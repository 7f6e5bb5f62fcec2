"""The cloud bill where people look: each tenant's spending in paid pools this month
against its budget, a forecast for the month, and each pool's nodes up and node-time
bill, for GET /views/quotas (the dashboard's tenants panel, ``ilucid tenants``) and
/metrics.

Read from the live core (:class:`~ilucid.core.cloud.CloudPools`), so the caller holds
the service's lock. What is spent is the core's own ledger (closed runs plus running
jobs so far). The forecast is an estimate, not a bill: what is spent plus, for each
job running in a paid pool now, price x GPUs x its expected remaining run time (the
estimate the scheduler plans with), counted up to the month's end and capped at the
tenant's budget, where the core stops its cloud jobs. Jobs that may burst later are
not in it.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass

from ilucid.core import Scheduler
from ilucid.core.cloud import OFF_SUFFIX, CloudPools, month_of
from ilucid.core.expected_start import expected_remaining
from ilucid.core.jobs import JobStatus

__all__ = ["CloudView", "PoolBill", "TenantBill", "cloud_view", "month_end"]


@dataclass(frozen=True, slots=True)
class TenantBill:
    """A tenant's paid-pool spending: this month's (currency, GPU-hours), its budget and
    what is left (None: no limit of that kind), the month's forecast, and its spending
    in all months since the service started (closed runs and running jobs so far)."""

    tenant: str
    month: str
    spent: float
    spent_gpu_hours: float
    budget: float | None
    budget_gpu_hours: float | None
    left: float | None
    left_gpu_hours: float | None
    forecast: float
    forecast_gpu_hours: float
    #: the forecast reaches a budget: the core stops the tenant's cloud jobs there
    reaches_budget: bool
    running_jobs: int
    total: float
    #: False: the tenant keeps its jobs on-prem (``cloud = false`` in the tiers file)
    cloud: bool


@dataclass(frozen=True, slots=True)
class PoolBill:
    """A paid pool: its price, its nodes (and how many are up now), and the site's bill
    for its node time so far (up nodes counted to now, idle ones to their release)."""

    pool: str
    price_per_gpu_hour: float
    on_demand: bool
    nodes: int
    nodes_up: int
    max_nodes: int | None
    node_cost: float
    node_gpu_hours: float
    running_jobs: int


@dataclass(frozen=True, slots=True)
class CloudView:
    month: str
    tenants: dict[str, TenantBill]
    pools: list[PoolBill]


def month_end(now: float) -> float:
    """The first second (UTC) of the month after ``now``'s, as the core's months count."""
    day = datetime.datetime.fromtimestamp(max(0.0, now), datetime.UTC)
    year, month = (day.year + 1, 1) if day.month == 12 else (day.year, day.month + 1)
    return datetime.datetime(year, month, 1, tzinfo=datetime.UTC).timestamp()


def cloud_view(scheduler: Scheduler, now: float, tenants: Iterable[str] = ()) -> CloudView | None:
    """The bill at ``now`` for every tenant with a budget, a spending or a running cloud
    job, and for ``tenants`` too; None without a paid pool. The caller holds the lock."""
    cloud = scheduler.cloud
    if cloud is None:
        return None
    names = set(tenants) | set(cloud.budgets) | set(cloud.spend) | set(cloud.tenant_cost)
    names |= {run.tenant for run in cloud.runs.values()}
    ahead = _ahead(scheduler, cloud, now)
    bills = {t: _tenant(cloud, t, now, ahead.get(t, (0.0, 0.0))) for t in sorted(names)}
    return CloudView(month_of(now), bills, _pools(scheduler, cloud, now))


def _ahead(scheduler: Scheduler, cloud: CloudPools, now: float) -> dict[str, tuple[float, float]]:
    """Per tenant, (currency, GPU-hours) its running paid-pool jobs are expected to cost
    from now to their expected end or the month's end, whichever comes first."""
    left_in_month = max(0.0, month_end(now) - now)
    ahead: dict[str, tuple[float, float]] = {}
    for job_id, run in cloud.runs.items():
        job = scheduler.jobs.get(job_id)
        if job is None or job.status is not JobStatus.RUNNING:
            continue
        gpus = job.spec.num_gpus
        ran = job.attained_at(now) / gpus if gpus else 0.0
        seconds = min(expected_remaining(job.spec.expected_duration, ran), left_in_month)
        gpu_h = run.gpus * seconds / 3600.0
        cost, hours = ahead.get(run.tenant, (0.0, 0.0))
        ahead[run.tenant] = (cost + gpu_h * run.price, hours + gpu_h)
    return ahead


def _tenant(cloud: CloudPools, tenant: str, now: float, ahead: tuple[float, float]) -> TenantBill:
    spent, hours = cloud.spent(tenant, now)
    left, left_hours = cloud.left(tenant, now)
    budget = cloud.budget_of(tenant)
    limit = budget.limit if budget is not None else None
    limit_hours = budget.gpu_hours if budget is not None else None
    forecast, forecast_hours = spent + ahead[0], hours + ahead[1]
    reaches = (limit is not None and forecast >= limit) or (
        limit_hours is not None and forecast_hours >= limit_hours
    )
    if limit is not None:
        forecast = min(forecast, max(limit, spent))
    if limit_hours is not None:
        forecast_hours = min(forecast_hours, max(limit_hours, hours))
    running = [run for run in cloud.runs.values() if run.tenant == tenant]
    # all months: closed runs whole, running ones from their start to now
    total = cloud.tenant_cost.get(tenant, 0.0) + sum(
        r.gpus * max(0.0, now - r.since) / 3600.0 * r.price for r in running
    )
    return TenantBill(
        tenant=tenant,
        month=month_of(now),
        spent=spent,
        spent_gpu_hours=hours,
        budget=limit,
        budget_gpu_hours=limit_hours,
        left=left,
        left_gpu_hours=left_hours,
        forecast=forecast,
        forecast_gpu_hours=forecast_hours,
        reaches_budget=reaches,
        running_jobs=len(running),
        total=total,
        cloud=budget.cloud if budget is not None else True,
    )


def _pools(scheduler: Scheduler, cloud: CloudPools, now: float) -> list[PoolBill]:
    """Each paid pool's nodes and node-time bill. An idle node is counted to the moment
    its release is due, not past it (the core bills it to then): the figure never
    drops when the release comes, so /metrics can serve it as a counter."""
    closed_cost, closed_hours = dict(cloud.pool_cost), dict(cloud.pool_gpu_hours)
    nodes: dict[str, int] = {}
    for index, node in enumerate(scheduler.cluster.nodes):
        pool = cloud.free.pool_of[index].removesuffix(OFF_SUFFIX)
        pool = pool if pool in cloud.pools else node.labels.get("pool", pool)
        nodes[pool] = nodes.get(pool, 0) + 1
    up: dict[str, int] = {}
    cost: dict[str, float] = {}
    hours: dict[str, float] = {}
    for bill in cloud.up.values():
        until = now
        if bill.idle_since is not None:
            until = min(now, bill.idle_since + cloud.pools[bill.pool].idle_release_s)
        gpu_h = bill.gpus * max(0.0, until - bill.up_at) / 3600.0
        up[bill.pool] = up.get(bill.pool, 0) + 1
        hours[bill.pool] = hours.get(bill.pool, 0.0) + gpu_h
        cost[bill.pool] = cost.get(bill.pool, 0.0) + gpu_h * bill.price
    running: dict[str, int] = {}
    for run in cloud.runs.values():
        running[run.pool] = running.get(run.pool, 0) + 1
    return [
        PoolBill(
            pool=name,
            price_per_gpu_hour=spec.cost_per_gpu_hour,
            on_demand=spec.on_demand,
            nodes=nodes.get(name, 0),
            nodes_up=up.get(name, 0) if spec.on_demand else nodes.get(name, 0),
            max_nodes=spec.max_nodes,
            node_cost=closed_cost.get(name, 0.0) + cost.get(name, 0.0),
            node_gpu_hours=closed_hours.get(name, 0.0) + hours.get(name, 0.0),
            running_jobs=running.get(name, 0),
        )
        for name, spec in sorted(cloud.pools.items())
    ]
