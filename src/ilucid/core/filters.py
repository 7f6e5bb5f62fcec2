"""Filters: whether a kind of node could ever host a job, whatever runs on it.

GPU type, GPU memory, and the CPUs and memory a job needs on a node against what
the node has. A rejection is the words ``kubectl describe pod`` would count the
node under ("with GPU type V100 (needs A100)").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ilucid.core.decision import Reason
from ilucid.core.model import Cluster, JobSpec, Node
from ilucid.core.reason_codes import ReasonCode

__all__ = [
    "DEFAULT_FILTERS",
    "Filter",
    "GpuMemoryFilter",
    "GpuTypeFilter",
    "HostFilter",
    "allowed_types",
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
            ReasonCode.GPU_TYPE_MISMATCH,
            f"with GPU type {node.gpu_type} (needs {' or '.join(wanted)})",
        )


class GpuMemoryFilter:
    name = "gpu-memory"

    def reject(self, job: JobSpec, node: Node) -> Reason | None:
        need = job.gpu_memory_gb
        if need is None or node.gpu_memory_gb <= 0 or node.gpu_memory_gb >= need:
            return None
        return Reason(
            ReasonCode.INSUFFICIENT_GPU_MEMORY,
            f"with {node.gpu_memory_gb:g} GB GPUs (needs {need:g} GB)",
            {"have_gb": node.gpu_memory_gb, "need_gb": need},
        )


class HostFilter:
    """CPUs and memory a job needs on each node, against what the node has at all (a
    node whose cluster manager does not say has no limit)."""

    name = "host"

    def reject(self, job: JobSpec, node: Node) -> Reason | None:
        for need, have, unit in (
            (job.cpus, node.cpus, "CPUs"),
            (job.memory_gb, node.memory_gb, "GB of memory"),
        ):
            if need is not None and have > 0 and have < need:
                return Reason(
                    ReasonCode.INSUFFICIENT_HOST,
                    f"with {have:g} {unit} (needs {need:g})",
                    {"have": have, "need": need},
                )
        return None


DEFAULT_FILTERS: tuple[Filter, ...] = (GpuTypeFilter(), GpuMemoryFilter(), HostFilter())


def allowed_types(
    job: JobSpec, cluster: Cluster, filters: Sequence[Filter] = DEFAULT_FILTERS
) -> tuple[str, ...] | None:
    """GPU types whose nodes pass every filter; ``None`` means all (the fast, common case)."""
    if (job.gpu_type, job.gpu_memory_gb, job.cpus, job.memory_gb) == (None, None, None, None):
        return None
    types = {n.gpu_type for n in cluster.nodes if all(f.reject(job, n) is None for f in filters)}
    return tuple(sorted(types))
