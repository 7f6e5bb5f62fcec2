"""The fragmentation study of issue 5: pack a trace's pods until the cluster is full.

As in the Alibaba ATC'23 paper, pods arrive one after another and never
leave ("inflation"): the trace's GPU pods in creation order, then again in a
seeded shuffle, until the GPU capacity they request reaches ``until`` times
the cluster's. A pod that fits nowhere is dropped and the next one comes.
Pods that no node of the inventory could hold even when empty (a GPU model
it lacks) are left out first. Reported per policy: the share of requested
GPU capacity that was allocated, the GPUs left unallocated at the end, and
the GPUs unallocated (and the share requested so far) when the first pod
failed.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ilucid.core.fractional import FULL_GPU, PodRequest, ShareCluster, ShareNode, TaskMix, choose

__all__ = ["PackingOutcome", "inflate", "never_fits"]


def never_fits(pod: PodRequest, nodes: Sequence[ShareNode]) -> bool:
    """No node of the inventory could hold the pod even empty (e.g. an absent GPU model)."""
    return not any(
        n.gpus >= pod.num_gpu
        and n.cpu_milli >= pod.cpu_milli
        and n.memory_mib >= pod.memory_mib
        and (pod.gpu_types is None or n.model in pod.gpu_types)
        for n in nodes
    )


@dataclass(frozen=True, slots=True)
class PackingOutcome:
    policy: str
    pods_placed: int
    pods_failed: int
    requested_gpus: float
    allocated_gpus: float
    capacity_gpus: float
    first_failure_unallocated: float  # GPUs free when the first pod failed
    first_failure_requested: float  # requested / capacity at that moment
    wall_s: float

    @property
    def unallocated_end(self) -> float:
        """GPUs still unallocated when the requests reached the target."""
        return self.capacity_gpus - self.allocated_gpus

    @property
    def allocated_share(self) -> float:
        """Share of the requested GPU capacity that could be allocated."""
        return self.allocated_gpus / self.requested_gpus if self.requested_gpus else 0.0


def inflate(
    pods: Sequence[PodRequest],
    nodes: Sequence[ShareNode],
    policy: str,
    until: float = 1.0,
    seed: int = 0,
    mix: TaskMix | None = None,
) -> PackingOutcome:
    """Pack ``pods`` (cycled) under ``policy`` until requests reach ``until`` x capacity."""
    started = time.perf_counter()
    gpu_pods = [p for p in pods if p.num_gpu > 0 and not never_fits(p, nodes)]
    if not gpu_pods:
        raise ValueError("no pod asks for a GPU that this inventory can hold")
    mix = mix or TaskMix.from_pods(gpu_pods)
    cluster = ShareCluster(nodes)
    capacity = cluster.gpu_capacity
    rng = random.Random(seed)
    order = list(gpu_pods)
    requested = placed = failed = 0
    first: tuple[float, float] | None = None
    index = 0
    while requested < until * capacity:
        if index == len(order):
            order = list(gpu_pods)
            rng.shuffle(order)
            index = 0
        pod = order[index]
        index += 1
        requested += pod.gpu_demand
        placement = choose(pod, cluster, policy, mix)
        if placement is None:
            failed += 1
            if first is None:
                first = (cluster.unallocated_gpus(), requested / capacity)
            continue
        cluster.take(pod, placement)
        placed += 1
    if first is None:
        first = (cluster.unallocated_gpus(), requested / capacity)
    return PackingOutcome(
        policy,
        placed,
        failed,
        requested / FULL_GPU,
        cluster.gpu_allocated / FULL_GPU,
        capacity / FULL_GPU,
        first[0],
        first[1],
        time.perf_counter() - started,
    )
