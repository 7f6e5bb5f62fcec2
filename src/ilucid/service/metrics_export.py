"""The service's Prometheus metrics, through ``prometheus-client``: jobs by state,
pending jobs by class and tenant, GPUs, preemptions, decisions by reason, the
scheduling-pass and reconcile latency histograms, the duration model and the cloud
bill (:mod:`~ilucid.service.cloud_view`: tenants' spending, budgets and forecasts,
pools' nodes up and node time; families without samples when no pool is paid), plus
the library's process and garbage-collector collectors.

The library writes the exposition text, so label values (a tenant's name) are
escaped by it and histograms follow its rules. Each service gets a registry of its
own, never the library's global one: a process (a test) may hold many services.
Names follow Prometheus's conventions: an ``ilucid_`` prefix, base units (seconds),
``_total`` on counters. The families are listed in :data:`METRIC_NAMES`.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, GCCollector, ProcessCollector, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ilucid.service.cloud_view import CloudView, cloud_view
from ilucid.service.db import DecisionRow, JobRow
from ilucid.service.latency import BUCKETS, Latency
from ilucid.service.lifecycle import STORED_STATES, Phase
from ilucid.service.scheduler_service import SchedulerService

__all__ = ["METRIC_NAMES", "render_metrics"]

#: every ilucid family served at /metrics, as a scrape names its samples (a counter's
#: samples end in ``_total``; a histogram's in ``_bucket``, ``_sum`` and ``_count``)
METRIC_NAMES: dict[str, str] = {
    "ilucid_jobs": "gauge",
    "ilucid_pending_jobs": "gauge",
    "ilucid_gpus": "gauge",
    "ilucid_gpus_busy": "gauge",
    "ilucid_gpu_utilisation_ratio": "gauge",
    "ilucid_preemptions_total": "counter",
    "ilucid_decisions_total": "counter",
    "ilucid_pass_duration_seconds": "histogram",
    "ilucid_reconcile_duration_seconds": "histogram",
    "ilucid_duration_model_version": "gauge",
    "ilucid_duration_model_refitting": "gauge",
    "ilucid_cloud_cost_total": "counter",
    "ilucid_cloud_spent_month": "gauge",
    "ilucid_cloud_budget_left": "gauge",
    "ilucid_cloud_forecast_month": "gauge",
    "ilucid_cloud_nodes_up": "gauge",
    "ilucid_cloud_node_cost_total": "counter",
    "ilucid_cloud_power_changes_total": "counter",
}


def _histogram(name: str, help_text: str, latency: Latency) -> HistogramMetricFamily:
    """A :class:`Latency` (per-bucket counts over :data:`BUCKETS`) as cumulative buckets."""
    cumulative, buckets = 0, []
    for bound, count in zip(BUCKETS, latency.histogram, strict=True):
        cumulative += count
        buckets.append((f"{bound:g}", float(cumulative)))
    buckets.append(("+Inf", float(latency.count)))
    return HistogramMetricFamily(name, help_text, buckets=buckets, sum_value=latency.seconds)


class ServiceCollector(Collector):
    """Reads the service's figures at each scrape (the database and the live core), so
    nothing has to be updated as jobs move. Holds the service weakly: the registry is
    cached per service and must not keep it alive."""

    def __init__(self, service: SchedulerService) -> None:
        self._service = weakref.ref(service)

    def collect(self) -> Iterator[Metric]:
        service = self._service()
        if service is None:
            return
        yield from _job_counts(service)
        with service.lock:
            free = service.scheduler.free.free_total
            total = service.cluster.total_gpus
            passes = Latency(
                service.pass_latency.count,
                service.pass_latency.seconds,
                list(service.pass_latency.histogram),
            )
            reconciles = Latency(
                service.reconcile_latency.count,
                service.reconcile_latency.seconds,
                list(service.reconcile_latency.histogram),
            )
            cloud = cloud_view(service.scheduler, service.clock())
            keeper = service.reconciler.cloud
            powered = (keeper.power_ups, keeper.releases)
        yield GaugeMetricFamily("ilucid_gpus", "GPUs the cluster holds", value=total)
        yield GaugeMetricFamily("ilucid_gpus_busy", "GPUs held by jobs", value=total - free)
        yield GaugeMetricFamily(
            "ilucid_gpu_utilisation_ratio",
            "busy GPUs / all GPUs (0 to 1)",
            value=(total - free) / total if total else 0.0,
        )
        yield _histogram(
            "ilucid_pass_duration_seconds", "duration of a scheduling pass (the core)", passes
        )
        yield _histogram(
            "ilucid_reconcile_duration_seconds",
            "duration of a whole reconcile (observe, record, schedule, apply)",
            reconciles,
        )
        model = service.durations.status()
        yield GaugeMetricFamily(
            "ilucid_duration_model_version",
            "version of the live duration model (0: medians, no model yet)",
            value=float(model["version"]),
        )
        yield GaugeMetricFamily(
            "ilucid_duration_model_refitting",
            "1 while the duration model is being refitted",
            value=float(bool(model["refitting"])),
        )
        yield from _cloud(cloud, powered)


def _job_counts(service: SchedulerService) -> Iterator[Metric]:
    """The families counted in the database: jobs, pending jobs, preemptions, decisions."""
    with Session(service.engine) as session:
        states = session.execute(select(JobRow.state, func.count()).group_by(JobRow.state)).all()
        pending = session.execute(
            select(JobRow.job_class, JobRow.tenant, func.count())
            .where(JobRow.state == Phase.PENDING.value)
            .group_by(JobRow.job_class, JobRow.tenant)
        ).all()
        preemptions = session.scalar(select(func.coalesce(func.sum(JobRow.preemptions), 0)))
        decisions = session.execute(
            select(DecisionRow.action, DecisionRow.code, func.count()).group_by(
                DecisionRow.action, DecisionRow.code
            )
        ).all()
    counts = dict.fromkeys(STORED_STATES, 0) | {state: n for state, n in states}
    yield _labelled(
        GaugeMetricFamily, "ilucid_jobs", "jobs by state", ["state"], list(counts.items())
    )
    yield _labelled(
        GaugeMetricFamily,
        "ilucid_pending_jobs",
        "pending jobs by class and tenant",
        ["class", "tenant"],
        pending,
    )
    yield CounterMetricFamily(
        "ilucid_preemptions", "preemptions of all jobs", value=float(preemptions or 0)
    )
    yield _labelled(
        CounterMetricFamily,
        "ilucid_decisions",
        "scheduling decisions by action and reason code",
        ["action", "reason"],
        decisions,
    )


def _cloud(cloud: CloudView | None, powered: tuple[int, int]) -> Iterator[Metric]:
    """The cloud bill: every family is served, without samples when no pool is paid."""
    tenants = list(cloud.tenants.values()) if cloud is not None else []
    pools = cloud.pools if cloud is not None else []
    yield _labelled(
        CounterMetricFamily,
        "ilucid_cloud_cost",
        "tenants' paid-pool spending since the service started (closed runs, running"
        " jobs so far), in the pools' currency",
        ["tenant"],
        [(t.tenant, t.total) for t in tenants],
    )
    yield _labelled(
        GaugeMetricFamily,
        "ilucid_cloud_spent_month",
        "tenants' paid-pool spending this calendar month (UTC), running jobs so far",
        ["tenant"],
        [(t.tenant, t.spent) for t in tenants],
    )
    yield _labelled(
        GaugeMetricFamily,
        "ilucid_cloud_budget_left",
        "what tenants with a monthly budget (currency) may still spend this month",
        ["tenant"],
        [(t.tenant, t.left) for t in tenants if t.left is not None],
    )
    yield _labelled(
        GaugeMetricFamily,
        "ilucid_cloud_forecast_month",
        "estimate of tenants' spending this month: spent plus running cloud jobs'"
        " expected remaining cost, capped at the budget",
        ["tenant"],
        [(t.tenant, t.forecast) for t in tenants],
    )
    yield _labelled(
        GaugeMetricFamily,
        "ilucid_cloud_nodes_up",
        "paid pools' nodes up (billed) now",
        ["pool"],
        [(p.pool, p.nodes_up) for p in pools],
    )
    yield _labelled(
        CounterMetricFamily,
        "ilucid_cloud_node_cost",
        "paid pools' node time so far (the site's bill, idle nodes included)",
        ["pool"],
        [(p.pool, p.node_cost) for p in pools],
    )
    changes = [("up", powered[0]), ("down", powered[1])] if cloud is not None else []
    yield _labelled(
        CounterMetricFamily,
        "ilucid_cloud_power_changes",
        "nodes the cluster manager was asked to bring up or release",
        ["direction"],
        changes,
    )


def _labelled(
    kind: type[GaugeMetricFamily] | type[CounterMetricFamily],
    name: str,
    help_text: str,
    labels: list[str],
    rows: Sequence[Sequence[Any]],
) -> Metric:
    """A family with one sample per row: the row's label values, then its count."""
    family = kind(name, help_text, labels=labels)
    for *values, count in sorted(rows, key=lambda row: tuple(map(str, row))):
        family.add_metric([str(v) for v in values], float(count))
    return family


_registries: weakref.WeakKeyDictionary[SchedulerService, CollectorRegistry] = (
    weakref.WeakKeyDictionary()
)


def _registry(service: SchedulerService) -> CollectorRegistry:
    """The service's own registry: its collector and the process and GC collectors."""
    registry = _registries.get(service)
    if registry is None:
        registry = CollectorRegistry()
        registry.register(ServiceCollector(service))
        ProcessCollector(registry=registry)
        GCCollector(registry=registry)
        _registries[service] = registry
    return registry


def render_metrics(service: SchedulerService) -> str:
    """The metrics in Prometheus's text exposition format."""
    return generate_latest(_registry(service)).decode("utf-8")
