"""Filters and the consolidating placer.

Filters judge whether a kind of node can ever host a job (GPU type, GPU memory);
the placer then picks concrete nodes among the free GPUs. Both explain a refusal
with countable reasons, aggregated the way ``kubectl describe pod`` does:
"0/172 nodes fit: 150 with fewer than 4 free GPUs, 22 with GPU type V100 (needs A100)".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Protocol

from ilucid.core.decision import Reason, ScorePart
from ilucid.core.free_gpus import MAIN_POOL, FreeGpus
from ilucid.core.model import Cluster, JobSpec, Node, Placement

__all__ = [
    "ConsolidatingPlacer",
    "Filter",
    "GpuMemoryFilter",
    "GpuTypeFilter",
    "Placer",
    "allowed_types",
    "explain_unplaceable",
    "never_placeable",
]


class Filter(Protocol):
    """Judges whether a node could host a job at all, whatever is running on it."""

    name: str

    def reject(self, job: JobSpec, node: Node) -> Reason | None: ...


class GpuTypeFilter:
    """``gpu_type`` may list alternatives separated by ``|`` (as Alibaba's ``gpu_spec`` does)."""

    name = "gpu-type"

    def reject(self, job: JobSpec, node: Node) -> Reason | None:
        if job.gpu_type is None:
            return None
        wanted = job.gpu_type.split("|")
        if node.gpu_type in wanted:
            return None
        return Reason(
            "GpuTypeMismatch",
            f"with GPU type {node.gpu_type} (needs {' or '.join(wanted)})",
        )


class GpuMemoryFilter:
    name = "gpu-memory"

    def reject(self, job: JobSpec, node: Node) -> Reason | None:
        need = job.gpu_memory_gb
        if need is None or node.gpu_memory_gb <= 0 or node.gpu_memory_gb >= need:
            return None
        return Reason(
            "InsufficientGpuMemory",
            f"with {node.gpu_memory_gb:g} GB GPUs (needs {need:g} GB)",
            {"have_gb": node.gpu_memory_gb, "need_gb": need},
        )


DEFAULT_FILTERS: tuple[Filter, ...] = (GpuTypeFilter(), GpuMemoryFilter())


def allowed_types(
    job: JobSpec, cluster: Cluster, filters: Sequence[Filter] = DEFAULT_FILTERS
) -> tuple[str, ...] | None:
    """GPU types whose nodes pass every filter; ``None`` means all (the fast, common case)."""
    if job.gpu_type is None and job.gpu_memory_gb is None:
        return None
    types = {n.gpu_type for n in cluster.nodes if all(f.reject(job, n) is None for f in filters)}
    return tuple(sorted(types))


class Placer(Protocol):
    def place(self, job: JobSpec, free: FreeGpus, pool: str = MAIN_POOL) -> Placement | None: ...

    def explain(self, job: JobSpec, placement: Placement, free: FreeGpus) -> tuple[ScorePart, ...]:
        """Score parts of a placement already chosen, computed only when asked for."""
        ...


class ConsolidatingPlacer:
    """Pack jobs onto as few nodes as possible.

    Semantics of the Lucid artifact's ``consolidate`` placer: a job that fits in
    one node goes to the node with the fewest free GPUs that still holds it; a
    larger job takes whole free nodes, most-free first, and puts any remainder
    on the next node in that order. A job is never split across partly busy
    nodes, which keeps gang jobs inside as few machines as possible.
    """

    def __init__(self, filters: Sequence[Filter] = DEFAULT_FILTERS) -> None:
        self.filters = tuple(filters)
        self._types_cache: dict[tuple[str | None, float | None], tuple[str, ...] | None] = {}

    def _types(self, job: JobSpec, free: FreeGpus) -> tuple[str, ...] | None:
        key = (job.gpu_type, job.gpu_memory_gb)
        if key not in self._types_cache:
            self._types_cache[key] = allowed_types(job, free.cluster, self.filters)
        return self._types_cache[key]

    def place(self, job: JobSpec, free: FreeGpus, pool: str = MAIN_POOL) -> Placement | None:
        need = job.num_gpus
        if need == 0:
            return Placement(())
        if need > free.pool_free.get(pool, 0):
            return None
        types = self._types(job, free)
        for preferred in job.preferred_gpu_types:  # soft: first the types it runs fastest on
            if preferred in free.types and (types is None or preferred in types):
                placement = self._place_on(need, (preferred,), free, pool)
                if placement is not None:
                    return placement
        return self._place_on(need, types, free, pool)

    def _place_on(
        self, need: int, types: tuple[str, ...] | None, free: FreeGpus, pool: str
    ) -> Placement | None:
        node = free.best_fit(need, types, pool)
        if node is not None:
            return Placement(((node, need),))
        if free.uniform:
            return self._place_across_uniform(need, free, types, pool)
        ordered = free.descending(types, pool)
        parts: list[tuple[int, int]] = []
        for index in ordered:
            cap = free.capacity[index]
            if need >= cap and free.free[index] == cap:
                parts.append((index, cap))
                need -= cap
            elif free.free[index] >= need:
                parts.append((index, need))
                need = 0
            else:
                return None
            if need == 0:
                return Placement(tuple(parts))
        return None

    @staticmethod
    def _place_across_uniform(
        need: int, free: FreeGpus, types: tuple[str, ...] | None, pool: str
    ) -> Placement | None:
        """The multi-node rule on identical nodes, without sorting every node."""
        cap = free.capacity[0]
        if need <= cap:
            return None  # best fit already found no single node that holds it
        whole, rest = divmod(need, cap)
        full = free.wholly_free(types, pool)
        if len(full) < whole:
            return None
        parts = [(index, cap) for index in full[:whole]]
        if rest:
            if len(full) > whole:
                parts.append((full[whole], rest))
            else:
                ordered = free.descending(types, pool)
                partial = ordered[whole] if len(ordered) > whole else None
                if partial is None or free.free[partial] < rest:
                    return None
                parts.append((partial, rest))
        return Placement(tuple(parts))

    def explain(self, job: JobSpec, placement: Placement, free: FreeGpus) -> tuple[ScorePart, ...]:
        nodes = free.cluster.nodes
        left = sum(free.free[i] for i in placement.node_indices)
        preference: tuple[ScorePart, ...] = ()
        if job.preferred_gpu_types:
            got = nodes[placement.parts[0][0]].gpu_type if placement.parts else "none"
            rank = job.preferred_gpu_types.index(got) + 1 if got in job.preferred_gpu_types else 0
            preference = (
                ScorePart(
                    "gpu-type",
                    float(-rank if rank else -len(job.preferred_gpu_types) - 1),
                    f"on {got}, preference #{rank} of {', '.join(job.preferred_gpu_types)}"
                    if rank
                    else f"on {got}: none of {', '.join(job.preferred_gpu_types)} had room",
                ),
            )
        return (
            *preference,
            ScorePart(
                "consolidation",
                -float(len(placement.parts)),
                f"spans {len(placement.parts)} node(s)"
                f" ({', '.join(nodes[i].name for i in placement.node_indices)})",
            ),
            ScorePart(
                "best-fit",
                -float(left),
                f"leaves {left} GPU(s) free on the chosen node(s)",
            ),
        )


def explain_unplaceable(
    job: JobSpec, free: FreeGpus, filters: Sequence[Filter] = DEFAULT_FILTERS
) -> Reason:
    """Aggregate per-node refusals into one countable sentence (computed only on demand)."""
    cluster = free.cluster
    counts: Counter[str] = Counter()
    fitting = 0
    whole_free = 0
    for index, node in enumerate(cluster.nodes):
        pool = free.pool_of[index]
        if pool != MAIN_POOL:
            counts[f"in the {pool} pool"] += 1
            continue
        rejection = next((r for f in filters if (r := f.reject(job, node)) is not None), None)
        if rejection is not None:
            counts[rejection.message] += 1
            continue
        if free.free[index] == free.capacity[index]:
            whole_free += 1
        if free.free[index] >= job.num_gpus:
            fitting += 1
        else:
            counts[
                "with no free GPU"
                if job.num_gpus == 1
                else f"with fewer than {job.num_gpus} free GPUs"
            ] += 1
    total = len(cluster.nodes)
    parts = [f"{n} {text}" for text, n in counts.most_common()]
    if job.num_gpus > cluster.max_gpus_per_node:
        per_node = cluster.max_gpus_per_node
        needed = -(-job.num_gpus // per_node)
        head = (
            f"needs {job.num_gpus} GPUs across about {needed} nodes;"
            f" {whole_free}/{total} nodes are wholly free, {free.free_total} GPUs free in all"
        )
    else:
        head = f"{fitting}/{total} nodes fit"
    sentence = head + (": " + ", ".join(parts) if parts else "")
    return Reason(
        "Unschedulable",
        sentence,
        {"nodes": float(total), "fitting": float(fitting), "free_gpus": float(free.free_total)},
    )


def never_placeable(
    jobs: Sequence[JobSpec], cluster: Cluster, placer: Placer | None = None
) -> dict[str, Reason]:
    """Jobs that could not be placed even on the empty cluster, with the reason.

    A replay must leave these out (they would wait forever); they are checked
    once per distinct request shape, not once per job.
    """
    placer = placer or ConsolidatingPlacer()
    empty = FreeGpus(cluster)
    verdicts: dict[tuple[int, str | None, float | None], Reason | None] = {}
    refused: dict[str, Reason] = {}
    for job in jobs:
        shape = (job.num_gpus, job.gpu_type, job.gpu_memory_gb)
        if shape not in verdicts:
            fits = placer.place(job, empty) is not None
            verdicts[shape] = None if fits else explain_unplaceable(job, empty)
        reason = verdicts[shape]
        if reason is not None:
            refused[job.id] = reason
    return refused
