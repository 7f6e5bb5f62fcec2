"""Heterogeneous-cluster replays with Gavel's per-type speeds: three ways to pick a type.

The cluster's nodes are split evenly among GPU types (V100, P100, K80 by
default, the mix of Gavel's Philly virtual-cluster specs). Jobs progress at
their Gavel speed on the type they get (:class:`GavelWorld`), and each job
carries its measured speed on every type (``JobSpec.type_speeds``), as a
profiler that measured it on each type would. The same policy is replayed
under each of the core's GPU type rules (:mod:`ilucid.core.type_speeds`):
``blind`` (placement by consolidation alone), ``fastest`` (fastest type first
for every job) and ``speed-ratio`` (by the job's speedup relative to the
median job's).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ilucid.core import Cluster, JobSpec, Node, SchedulerConfig
from ilucid.core.policies import DEFAULT_PROFILE, make_policy, needs_estimates
from ilucid.core.type_speeds import TYPE_RULES
from ilucid.sim.engine import simulate
from ilucid.sim.estimates import WalkForwardEstimates
from ilucid.sim.forked import forked_map
from ilucid.sim.metrics import summarize
from ilucid.sim.replay_types import SimResult
from ilucid.studies.gavel_world import GavelWorld

__all__ = ["LABELS", "HeteroRun", "mixed_type_cluster", "run_hetero"]


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


#: each rule's label in the study's table
LABELS = {
    "blind": "type-blind",
    "fastest": "fastest type first",
    "speed-ratio": "speed ratio (default)",
}


def _run(rule: str) -> HeteroRun:
    assert _payload is not None
    jobs, cluster, world, policy = _payload
    types = sorted({n.gpu_type for n in cluster.nodes})
    jobs = [
        dataclasses.replace(j, type_speeds=tuple((t, world.speed(j, t)) for t in types))
        for j in jobs
    ]
    annotator = WalkForwardEstimates(jobs) if needs_estimates(policy) else None
    try:
        result = simulate(
            jobs,
            cluster,
            make_policy(policy),
            SchedulerConfig(gpu_type_rule=rule),
            annotator=annotator,
            world=world,
        )
    finally:  # its fit process ends with the replay, however the replay ends
        if annotator is not None:
            annotator.close()
    summary = summarize(result)
    held_s = sum(r.busy_gpu_seconds / max(1, r.num_gpus) for r in result.records)
    # progress per second held: 1.0 would be every job on its reference type (V100)
    summary["mean_speed"] = sum(r.work_done for r in result.records) / max(held_s, 1e-9)
    summary["gpu_hours"] = sum(r.busy_gpu_seconds for r in result.records) / 3600.0
    return HeteroRun(LABELS[rule], result, summary)


def run_hetero(
    jobs: Sequence[JobSpec],
    cluster: Cluster,
    world: GavelWorld,
    policy: str = DEFAULT_PROFILE,
    processes: int | None = None,
    rules: Sequence[str] = TYPE_RULES,
) -> list[HeteroRun]:
    """One replay per GPU type rule, in ``rules``' order."""
    global _payload
    _payload = (list(jobs), cluster, world, policy)
    try:
        workers = processes if processes is not None else min(len(rules), os.cpu_count() or 1)
        if workers <= 1:
            return [_run(rule) for rule in rules]
        return list(forked_map(_run, list(rules), workers))
    finally:
        _payload = None
