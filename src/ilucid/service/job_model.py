"""What a submission may ask for on this cluster, checked once at the edge of the
service (API, CLI and opted-in cluster-manager jobs all pass here).

Each refusal names the field and what the cluster has instead, e.g. ``gpu_type:
no node has GPU type h200 (types here: a100, v100)``: a request that no node
could ever hold would otherwise wait forever with a vaguer reason.
"""

from __future__ import annotations

from ilucid.core import Cluster, JobClass
from ilucid.service.job_store import JobRequest

__all__ = ["NotPermitted", "ServiceError", "TryAgain", "Unsatisfiable", "check_request"]


class ServiceError(ValueError):
    """A request the service refuses; the message says why, ``status`` whose fault it is
    (the API's answer): 422, the request itself is wrong."""

    status = 422


class Unsatisfiable(ServiceError):
    """A well-formed request this cluster cannot run (no node of that GPU type, more
    GPUs than it has): 409, a conflict with the cluster as it is."""

    status = 409


class NotPermitted(ServiceError):
    """A request this user may not make here (a command off the allow-list, no Unix
    account to run it as): 403."""

    status = 403


class TryAgain(ServiceError):
    """A request that lost a race with others and may simply be sent again: 503."""

    status = 503


def _types_here(cluster: Cluster) -> str:
    return ", ".join(sorted({node.gpu_type for node in cluster.nodes})) or "none"


def _check_command(request: JobRequest) -> None:
    if not request.command or any(not isinstance(a, str) for a in request.command):
        raise ServiceError("command must be a non-empty list of strings")
    if not request.command[0] or any("\x00" in a for a in request.command):
        raise ServiceError("command: the program must be named and no argument may hold NUL")
    if request.cwd is not None and "\x00" in request.cwd:
        raise ServiceError("cwd must not hold NUL")
    if request.name is not None and ("\x00" in request.name or len(request.name) > 128):
        raise ServiceError("name must be at most 128 characters without NUL")
    if request.job_class not in {c.value for c in JobClass}:
        known = ", ".join(c.value for c in JobClass)
        raise ServiceError(f"class must be one of {known}")


def _check_types(request: JobRequest, cluster: Cluster) -> list[int]:
    """The GPU counts of the nodes whose type and memory the request accepts."""
    types = {node.gpu_type for node in cluster.nodes}
    if request.gpu_type is not None and request.gpu_type not in types:
        raise Unsatisfiable(
            f"gpu_type: no node has GPU type {request.gpu_type}"
            f" (types here: {_types_here(cluster)})"
        )
    unknown = [t for t in request.preferred_gpu_types if t not in types]
    if unknown:
        raise Unsatisfiable(
            f"preferred_gpu_types: no node has GPU type {', '.join(unknown)}"
            f" (types here: {_types_here(cluster)})"
        )
    fitting = [
        node
        for node in cluster.nodes
        if request.gpu_type in (None, node.gpu_type)
        # a node that does not report its GPUs' memory (0) is not ruled out
        and (
            request.gpu_memory_gb is None
            or node.gpu_memory_gb <= 0
            or node.gpu_memory_gb >= request.gpu_memory_gb
        )
    ]
    of_kind = [node for node in cluster.nodes if request.gpu_type in (None, node.gpu_type)]
    if request.gpu_memory_gb is not None and not any(n.gpu_memory_gb > 0 for n in of_kind):
        # no node could be checked: the request would be taken on trust, then ignored
        of_type = f" of type {request.gpu_type}" if request.gpu_type else ""
        kinds = ", ".join(sorted({n.gpu_type for n in of_kind})) or "none"
        raise Unsatisfiable(
            f"gpu_memory_gb: no GPU{of_type} here reports its memory (types here: {kinds},"
            f" memory unknown), so {request.gpu_memory_gb:g} GB cannot be honoured; leave"
            " it out"
        )
    if request.gpu_memory_gb is not None and not fitting:
        largest = max((node.gpu_memory_gb for node in cluster.nodes), default=0.0)
        of_type = f" of type {request.gpu_type}" if request.gpu_type else ""
        raise Unsatisfiable(
            f"gpu_memory_gb: no GPU{of_type} has {request.gpu_memory_gb:g} GB"
            f" (largest here: {largest:g} GB)"
        )
    return [node.num_gpus for node in fitting]


def _check_shape(request: JobRequest, sizes: list[int]) -> None:
    if (request.nodes is None) != (request.gpus_per_node is None):
        raise ServiceError("nodes and gpus_per_node come together (a gang of nodes x GPUs)")
    if request.nodes is not None and request.gpus_per_node is not None:
        if request.nodes * request.gpus_per_node != request.gpus:
            raise ServiceError(
                f"gpus: {request.gpus} is not nodes x gpus_per_node"
                f" ({request.nodes} x {request.gpus_per_node})"
            )
        big_enough = sum(1 for size in sizes if size >= request.gpus_per_node)
        if big_enough < request.nodes:
            kind = f" of type {request.gpu_type}" if request.gpu_type else ""
            if request.gpu_memory_gb is not None:
                kind += f" with {request.gpu_memory_gb:g} GB or more"
            raise Unsatisfiable(
                f"nodes: a gang of {request.nodes} x {request.gpus_per_node} GPUs needs"
                f" {request.nodes} nodes with {request.gpus_per_node} GPUs{kind} each;"
                f" {big_enough} here"
            )
    if request.gpus > sum(sizes):
        raise Unsatisfiable(
            f"gpus: must be between 0 and {sum(sizes)} (the GPUs here that fit the request)"
        )
    if not 0 < request.gpu_milli <= 1000:
        raise ServiceError(f"gpu_milli: must be in 1..1000 (got {request.gpu_milli})")
    if request.gpu_milli < 1000 and request.gpus != 1:
        raise ServiceError(
            f"gpu_milli: a share of one GPU needs gpus = 1 (got gpus = {request.gpus})"
        )


def _check_host(request: JobRequest, cluster: Cluster) -> None:
    """CPUs and memory per node that no node has (nodes that do not say are not ruled out)."""
    for field, need, unit in (
        ("cpus", request.cpus, "CPUs"),
        ("memory_gb", request.memory_gb, "GB"),
    ):
        if need is None:
            continue
        have = [
            node.cpus if field == "cpus" else node.memory_gb
            for node in cluster.nodes
            if request.gpu_type in (None, node.gpu_type)
        ]
        if have and all(0 < h < need for h in have):
            raise Unsatisfiable(
                f"{field}: no node has {need:g} {unit} (most here: {max(have):g} {unit})"
            )


def check_request(request: JobRequest, cluster: Cluster) -> None:
    """Refuse, naming the field, what no node of ``cluster`` could ever run."""
    _check_command(request)
    if request.gpus < 0:
        raise ServiceError(f"gpus: must be >= 0 (got {request.gpus})")
    if request.gpus > cluster.total_gpus:
        raise Unsatisfiable(
            f"gpus: must be between 0 and {cluster.total_gpus} (this cluster's total)"
        )
    sizes = _check_types(request, cluster)
    _check_shape(request, sizes)
    for field, value in (("cpus", request.cpus), ("memory_gb", request.memory_gb)):
        if value is not None and not value > 0:
            raise ServiceError(f"{field} must be > 0 (got {value:g})")
    _check_host(request, cluster)
