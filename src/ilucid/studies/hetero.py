"""Heterogeneous-cluster replays with Gavel's per-type speeds: type-blind vs type-aware.

The cluster's nodes are split evenly among GPU types (V100, P100, K80 by
default, the mix of Gavel's Philly virtual-cluster specs). Jobs progress at
their Gavel speed on the type they get (:class:`GavelWorld`). The type-aware
run gives each job its types ranked fastest first as a soft preference
(``JobSpec.preferred_gpu_types``), as a profiler that measured the job on
each type would; the type-blind run places by consolidation alone.
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
from ilucid.studies.gavel_world import GavelWorld

__all__ = ["HeteroRun", "mixed_type_cluster", "run_hetero"]


def mixed_type_cluster(nodes: int, types: Sequence[str], gpus_per_node: int = 8) -> Cluster:
    """``nodes`` nodes of ``gpus_per_node`` GPUs, types assigned round-robin."""
    width = len(str(max(nodes - 1, 0)))
    return Cluster(
        tuple(
            Node(f"node{i:0{width}d}", gpus_per_node, types[i % len(types)]) for i in range(nodes)
        )
    )


@dataclass(frozen=True, slots=True)
class HeteroRun:
    label: str
    result: SimResult
    summary: dict[str, Any]


_payload: tuple[list[JobSpec], Cluster, GavelWorld, str] | None = None


def _run(aware: bool) -> HeteroRun:
    assert _payload is not None
    jobs, cluster, world, policy = _payload
    if aware:
        types = sorted({n.gpu_type for n in cluster.nodes})
        jobs = [dataclasses.replace(j, preferred_gpu_types=world.ranking(j, types)) for j in jobs]
    annotator = WalkForwardEstimates(jobs) if needs_estimates(policy) else None
    try:
        result = simulate(
            jobs, cluster, make_policy(policy), SchedulerConfig(), annotator=annotator, world=world
        )
    finally:  # its fit process ends with the replay, however the replay ends
        if annotator is not None:
            annotator.close()
    summary = summarize(result)
    held_s = sum(r.busy_gpu_seconds / max(1, r.num_gpus) for r in result.records)
    # progress per second held: 1.0 would be every job on its reference type (V100)
    summary["mean_speed"] = sum(r.work_done for r in result.records) / max(held_s, 1e-9)
    summary["gpu_hours"] = sum(r.busy_gpu_seconds for r in result.records) / 3600.0
    label = "type-aware (fastest type first)" if aware else "type-blind"
    return HeteroRun(label, result, summary)


def run_hetero(
    jobs: Sequence[JobSpec],
    cluster: Cluster,
    world: GavelWorld,
    policy: str = "tiered",
    processes: int | None = None,
) -> list[HeteroRun]:
    global _payload
    _payload = (list(jobs), cluster, world, policy)
    try:
        workers = processes if processes is not None else min(2, os.cpu_count() or 1)
        if workers <= 1:
            return [_run(False), _run(True)]
        return list(forked_map(_run, [False, True], workers))
    finally:
        _payload = None
