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

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ilucid.core import Cluster, JobSpec, Node, SchedulerConfig
from ilucid.core.policies import make_policy, needs_estimates
from ilucid.sim.engine import simulate
from ilucid.sim.estimates import WalkForwardEstimates
from ilucid.sim.forked import forked_map
from ilucid.sim.metrics import summarize
from ilucid.sim.replay_types import SimResult

__all__ = ["CLOUD_POOL", "HybridRun", "hybrid_cluster", "run_hybrid"]

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


_payload: tuple[list[JobSpec], Cluster, SchedulerConfig, str] | None = None


def _run(value: float | None) -> HybridRun:
    assert _payload is not None
    jobs, cluster, config, policy_name = _payload
    config = dataclasses.replace(config, value_of_wait=value)
    annotator = WalkForwardEstimates(jobs) if needs_estimates(policy_name) else None
    try:
        result = simulate(jobs, cluster, make_policy(policy_name), config, annotator=annotator)
    finally:  # its fit process ends with the replay, however the replay ends
        if annotator is not None:
            annotator.close()
    summary = summarize(result)
    for name in (*config.pools, "main"):
        gpu_h = result.pool_gpu_seconds.get(name, 0.0) / 3600.0
        price = config.pools[name].cost_per_gpu_hour if name in config.pools else 0.0
        summary[f"{name}_gpu_hours"] = gpu_h
        summary[f"{name}_cost"] = gpu_h * price
    summary["burst_jobs"] = sum(1 for r in result.records if r.startup_s > 0)
    label = "on-prem only" if value is None else f"value of wait {value:g}/GPU-h"
    return HybridRun(label, value, result, summary)


def run_hybrid(
    jobs: Sequence[JobSpec],
    cluster: Cluster,
    config: SchedulerConfig,
    values: Sequence[float | None],
    policy: str = "tiered",
    processes: int | None = None,
) -> list[HybridRun]:
    """One replay per value of waiting time (None: never burst), in parallel processes."""
    global _payload
    if not config.pools:
        raise ValueError("a hybrid scenario needs at least one paid pool")
    _payload = (list(jobs), cluster, config, policy)
    try:
        workers = processes if processes is not None else min(len(values), os.cpu_count() or 1)
        if workers <= 1:
            return [_run(v) for v in values]
        return list(forked_map(_run, list(values), workers))
    finally:
        _payload = None
