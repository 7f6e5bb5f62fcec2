"""Hybrid on-prem + cloud scenarios: the cost of waiting against the cost of bursting.

On-prem nodes are the ``main`` pool; cloud nodes carry the label
``pool=cloud`` and a price per GPU-hour and a start-up delay
(:class:`~ilucid.core.PoolSpec`). The scheduler bursts a job that cannot
start on-prem when its expected on-prem wait, valued at ``value_of_wait`` per
GPU-hour, is worth more than running it in the cloud
(``SchedulerConfig.value_of_wait``). Each run reports JCT, GPU-hours per
pool and the cloud bill.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ilucid.core import Cluster, JobSpec, Node, PoolSpec, SchedulerConfig
from ilucid.core.cloud import CloudBudget
from ilucid.core.policies import make_policy, needs_estimates
from ilucid.sim.engine import simulate
from ilucid.sim.estimates import WalkForwardEstimates
from ilucid.sim.forked import forked_map
from ilucid.sim.metrics import summarize
from ilucid.sim.replay_types import SimResult

__all__ = ["CLOUD_POOL", "HybridRun", "hybrid_cluster", "hybrid_scenarios", "run_hybrid"]

CLOUD_POOL = "cloud"


def hybrid_cluster(onprem: Cluster, cloud_nodes: int, gpus_per_node: int = 8) -> Cluster:
    """``onprem`` plus ``cloud_nodes`` nodes labelled ``pool=cloud``."""
    width = len(str(max(cloud_nodes - 1, 0)))
    cloud = tuple(
        Node(f"cloud{i:0{width}d}", gpus_per_node, labels={"pool": CLOUD_POOL})
        for i in range(cloud_nodes)
    )
    return Cluster(onprem.nodes + cloud)


@dataclass(frozen=True, slots=True)
class HybridRun:
    label: str
    value_of_wait: float | None
    result: SimResult
    summary: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _Scenario:
    label: str
    value_of_wait: float | None
    cluster: Cluster
    config: SchedulerConfig
    #: always-on cloud GPUs billed for the whole replay (a baseline without bursting)
    always_on_gpus: int = 0
    always_on_price: float = 0.0


_payload: tuple[list[JobSpec], str] | None = None


def _run(scenario: _Scenario) -> HybridRun:
    assert _payload is not None
    jobs, policy_name = _payload
    annotator = WalkForwardEstimates(jobs) if needs_estimates(policy_name) else None
    try:
        result = simulate(
            jobs, scenario.cluster, make_policy(policy_name), scenario.config, annotator=annotator
        )
    finally:  # its fit process ends with the replay, however the replay ends
        if annotator is not None:
            annotator.close()
    summary = summarize(result)
    pools = scenario.config.pools
    summary["main_gpu_hours"] = result.pool_gpu_seconds.get("main", 0.0) / 3600.0
    for name in pools:
        cost, node_gpu_h = result.cloud_bill.get(name, (0.0, 0.0))
        summary[f"{name}_gpu_hours"] = result.pool_gpu_seconds.get(name, 0.0) / 3600.0
        summary[f"{name}_node_gpu_hours"] = node_gpu_h
        summary[f"{name}_cost"] = cost
    if scenario.always_on_gpus:
        span_h = _span_s(result) / 3600.0
        summary[f"{CLOUD_POOL}_node_gpu_hours"] = scenario.always_on_gpus * span_h
        summary[f"{CLOUD_POOL}_cost"] = scenario.always_on_gpus * span_h * scenario.always_on_price
    summary["cloud_cost"] = summary.get(f"{CLOUD_POOL}_cost", 0.0)
    summary["burst_jobs"] = sum(1 for r in result.records if r.startup_s > 0)
    summary["power_ups"] = result.power_ups
    summary["tenant_cloud_cost"] = dict(result.tenant_cloud_cost)
    return HybridRun(scenario.label, scenario.value_of_wait, result, summary)


def _span_s(result: SimResult) -> float:
    """From the first arrival to the last end: how long always-on nodes are rented."""
    records = result.records
    if not records:
        return 0.0
    first = min(r.submit for r in records)
    last = max(r.end for r in records)
    return max(0.0, last - first)


def hybrid_scenarios(
    onprem: Cluster,
    cloud_nodes: int,
    pool: PoolSpec,
    values: Sequence[float],
    budgets: Mapping[str, CloudBudget] | None = None,
    gpus_per_node: int = 8,
) -> list[_Scenario]:
    """On-prem only; the same cloud nodes always on (billed for the whole replay, used as
    on-prem nodes are); and bursting to them on demand at each value of waiting."""
    always = Cluster(
        onprem.nodes + tuple(Node(f"cloud{i}", gpus_per_node) for i in range(cloud_nodes))
    )
    hybrid = hybrid_cluster(onprem, cloud_nodes, gpus_per_node)
    scenarios = [
        _Scenario("on-prem only", None, onprem, SchedulerConfig()),
        _Scenario(
            "always-on cloud",
            None,
            always,
            SchedulerConfig(),
            always_on_gpus=cloud_nodes * gpus_per_node,
            always_on_price=pool.cost_per_gpu_hour,
        ),
    ]
    for value in values:
        config = SchedulerConfig(
            pools={pool.name: pool}, value_of_wait=value, budgets=dict(budgets or {})
        )
        scenarios.append(_Scenario(f"burst, value of wait {value:g}/GPU-h", value, hybrid, config))
    return scenarios


def run_hybrid(
    jobs: Sequence[JobSpec],
    scenarios: Sequence[_Scenario],
    policy: str = "ilucid",
    processes: int | None = None,
) -> list[HybridRun]:
    """One replay per scenario (:func:`hybrid_scenarios`), in parallel processes."""
    global _payload
    _payload = (list(jobs), policy)
    try:
        workers = processes if processes is not None else min(len(scenarios), os.cpu_count() or 1)
        if workers <= 1:
            return [_run(s) for s in scenarios]
        return list(forked_map(_run, list(scenarios), workers))
    finally:
        _payload = None
