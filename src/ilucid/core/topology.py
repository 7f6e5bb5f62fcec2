"""Topology-aware placement: keep a multi-node job inside one NVLink domain, else one rack.

Nodes carry topology labels: ``nvlink`` (a domain of nodes joined by NVLink,
e.g. an NVL72 rack) and ``rack``. A job that fits on one node is placed as the
consolidating placer would (best fit). A wider job is placed on whole free
nodes of a single domain when one has room (the domain with the least room
to spare, so big domains stay whole), else of a single rack, else spread as
the consolidating placer does; its score parts say how many domains and
racks it spans and, when more than one, why.
"""

from __future__ import annotations

from collections.abc import Sequence

from ilucid.core.decision import ScorePart
from ilucid.core.filters import DEFAULT_FILTERS, Filter
from ilucid.core.free_gpus import FULL_GPU, MAIN_POOL, FreeGpus
from ilucid.core.model import JobSpec, Placement
from ilucid.core.placement import ConsolidatingPlacer

__all__ = ["TOPOLOGY_LEVELS", "TopologyPlacer"]

#: Node labels from the tightest interconnect to the loosest.
TOPOLOGY_LEVELS = ("nvlink", "rack")


class TopologyPlacer(ConsolidatingPlacer):
    def __init__(
        self,
        filters: Sequence[Filter] = DEFAULT_FILTERS,
        levels: Sequence[str] = TOPOLOGY_LEVELS,
    ) -> None:
        super().__init__(filters)
        self.levels = tuple(levels)

    def place(self, job: JobSpec, free: FreeGpus, pool: str = MAIN_POOL) -> Placement | None:
        need = job.num_gpus
        if (
            need == 0
            or need > free.pool_free.get(pool, 0)
            or job.gpu_milli < FULL_GPU  # a fraction of one GPU stays on one node
            or job.cpus is not None  # CPUs and memory: nodes that have them, in the
            or job.memory_gb is not None  # consolidating order (no domain search)
        ):
            return super().place(job, free, pool)
        if (
            need <= free.cluster.max_gpus_per_node
            and free.best_fit(need, self._types(job, free), pool) is not None
        ):
            return super().place(job, free, pool)
        for level in self.levels:
            placement = self._within_one(level, job, free, pool)
            if placement is not None:
                return placement
        return super().place(job, free, pool)

    def _within_one(self, level: str, job: JobSpec, free: FreeGpus, pool: str) -> Placement | None:
        """Whole free nodes (plus one partial) of the single ``level`` group with least spare."""
        types = self._types(job, free)
        nodes = free.cluster.nodes
        groups: dict[str, list[int]] = {}
        for index, node in enumerate(nodes):
            group = node.labels.get(level)
            if group is None or free.pool_of[index] != pool or free.free[index] == 0:
                continue
            if types is not None and node.gpu_type not in types:
                continue
            groups.setdefault(group, []).append(index)
        best: tuple[int, str, Placement] | None = None
        for group, members in groups.items():
            placement = _fill_group(job.num_gpus, members, free)
            if placement is None:
                continue
            spare = sum(free.free[i] for i in members) - job.num_gpus
            if best is None or (spare, group) < best[:2]:
                best = (spare, group, placement)
        return best[2] if best is not None else None

    def explain(self, job: JobSpec, placement: Placement, free: FreeGpus) -> tuple[ScorePart, ...]:
        parts = list(super().explain(job, placement, free))
        nodes = free.cluster.nodes
        for level in self.levels:
            used = sorted({nodes[i].labels.get(level, "?") for i in placement.node_indices})
            if len(used) <= 1 or len(placement.parts) <= 1:
                detail = f"within one {level} domain ({used[0] if used else '?'})"
            else:
                # capacity each group had when the job was placed (its GPUs given back)
                had: dict[str, int] = {}
                mine = dict(placement.parts)
                for index, node in enumerate(nodes):
                    group = node.labels.get(level)
                    if group is not None:
                        had[group] = had.get(group, 0) + free.free[index] + mine.get(index, 0)
                most = max(had.values(), default=0)
                detail = (
                    f"spread over {len(used)} {level} domains ({', '.join(used)}): no single"
                    f" {level} domain had {job.num_gpus} free GPUs (most: {most})"
                )
            parts.append(ScorePart(f"topology-{level}", -float(len(used)), detail))
        return tuple(parts)


def _fill_group(need: int, members: list[int], free: FreeGpus) -> Placement | None:
    """Whole free nodes first (most GPUs first), then the best-fitting partial node."""
    whole = sorted(
        (i for i in members if free.free[i] == free.capacity[i]),
        key=lambda i: (-free.capacity[i], i),
    )
    parts: list[tuple[int, int]] = []
    for index in whole:
        if need == 0:
            break
        if free.capacity[index] <= need:
            parts.append((index, free.capacity[index]))
            need -= free.capacity[index]
    if need:
        used = {i for i, _ in parts}
        partial = sorted(
            (i for i in members if i not in used and free.free[i] >= need),
            key=lambda i: (free.free[i], i),
        )
        if not partial:
            return None
        parts.append((partial[0], need))
    return Placement(tuple(parts))
