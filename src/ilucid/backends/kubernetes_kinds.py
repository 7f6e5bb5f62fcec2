"""The workloads ilucid schedules on Kubernetes and the nodes it places them on, read
from the API's JSON.

Each kind is suspend-based (as Kueue integrates them): a user creates it suspended
with the queue label; ilucid admits it by writing the chosen nodes as required node
affinity into every pod template (scheduling directives may change while it is
suspended) and un-suspending it in the same JSON patch, which also tests that it is
still suspended and unchanged since ilucid read it; preemption suspends it again, and
its controller deletes all its pods, so a gang stops as a whole.

* batch/v1 Job: ``spec.suspend``; one pod template, ``spec.template``, of
  ``parallelism`` pods; ended by a Complete or Failed condition; running while
  ``status.active``.
* JobSet (``jobset.x-k8s.io/v1alpha2``): ``spec.suspend``; a template per replicated
  job, ``spec.replicatedJobs[i].template.spec.template``, of replicas x
  min(parallelism, completions) pods; Completed or Failed; running while any
  ``status.replicatedJobsStatus[].active``.
* PyTorchJob (``kubeflow.org/v1``): ``spec.runPolicy.suspend``; a template per role,
  ``spec.pytorchReplicaSpecs[role].template``, of ``replicas`` pods; Succeeded or
  Failed; running while any ``status.replicaStatuses[role].active``.

A workload's GPUs are the sum over its templates of pods x the containers'
``nvidia.com/gpu`` limits (requests when no limit is given). Its CPUs and memory per node
(what ilucid books on each node it places it on) are its pods' own ``cpu``/``memory``
requests (limits when no request is given, as the API server defaults them): ilucid never
rewrites them, so what runs is what it booked (see ``Kind.host_needs``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ilucid.backends.kubernetes_quantity import cpus_of, memory_gb_of
from ilucid.core import Cluster, Node

__all__ = [
    "GPU",
    "HOSTNAME",
    "JOB",
    "JOBSET",
    "KINDS",
    "PRODUCT",
    "PYTORCHJOB",
    "Kind",
    "Template",
    "gpu_type_of",
    "node_inventory",
    "with_hosts",
]

Obj = Mapping[str, Any]
GPU = "nvidia.com/gpu"
PRODUCT = "nvidia.com/gpu.product"
MEMORY = "nvidia.com/gpu.memory"  # MiB, as GPU feature discovery writes it
HOSTNAME = "kubernetes.io/hostname"
#: node labels read as topology (the core's placer uses ``rack`` and ``nvlink``)
TOPOLOGY = {
    "zone": "topology.kubernetes.io/zone",
    "rack": "ilucid.io/rack",
    "nvlink": "ilucid.io/nvlink-domain",
}


def _dig(obj: Any, *path: str) -> Any:
    for step in path:
        obj = obj.get(step) if isinstance(obj, Mapping) else None
    return obj


def _count(value: Any, default: int = 0) -> int:
    text = str(value) if value is not None else ""
    return int(text) if text.isdigit() else default


@dataclass(frozen=True, slots=True)
class Template:
    path: str  # JSON pointer of the pod template in the workload
    pods: int
    spec: Obj  # the pod template (metadata, spec)

    @property
    def gpus_per_pod(self) -> int:
        total = 0
        for container in _dig(self.spec, "spec", "containers") or []:
            resources = container.get("resources") or {}
            wanted = (resources.get("limits") or {}).get(GPU)
            if wanted is None:
                wanted = (resources.get("requests") or {}).get(GPU)
            total += _count(wanted)
        return total

    def host_need(self, where: str) -> tuple[float | None, float | None]:
        """One pod's CPUs and memory (GB): its containers' requests summed, or its
        largest init container's when that is more (None: no container states it)."""
        spec = self.spec.get("spec") or {}
        found: list[float | None] = [None, None]
        for index, (name, read) in enumerate((("cpu", cpus_of), ("memory", memory_gb_of))):
            for group, combine in (("containers", sum), ("initContainers", max)):
                amounts = []
                for container in spec.get(group) or []:
                    resources = container.get("resources") or {}
                    value = (resources.get("requests") or {}).get(name)
                    value = (resources.get("limits") or {}).get(name) if value is None else value
                    if value is not None:
                        field = f"{self.path}/spec/{group}/{container.get('name')}"
                        amounts.append(read(value, f"{where}: {field} {name}"))
                if amounts:
                    found[index] = max(found[index] or 0.0, combine(amounts))
        return found[0], found[1]


def _job_templates(obj: Obj) -> list[Template]:
    pods = max(1, _count(_dig(obj, "spec", "parallelism"), 1))
    return [Template("/spec/template", pods, _dig(obj, "spec", "template") or {})]


def _jobset_templates(obj: Obj) -> list[Template]:
    found = []
    for index, replicated in enumerate(_dig(obj, "spec", "replicatedJobs") or []):
        job = _dig(replicated, "template", "spec") or {}
        parallelism = _count(job.get("parallelism"), 1)
        per_job = min(parallelism, _count(job.get("completions"), parallelism))
        pods = _count(replicated.get("replicas"), 1) * per_job
        path = f"/spec/replicatedJobs/{index}/template/spec/template"
        found.append(Template(path, pods, job.get("template") or {}))
    return found


def _pytorch_templates(obj: Obj) -> list[Template]:
    specs = _dig(obj, "spec", "pytorchReplicaSpecs") or {}
    return [
        Template(
            f"/spec/pytorchReplicaSpecs/{role}/template",
            _count(spec.get("replicas"), 1),
            spec.get("template") or {},
        )
        for role, spec in sorted(specs.items())
    ]


def _job_active(obj: Obj) -> int:
    return _count(_dig(obj, "status", "active"))


def _jobset_active(obj: Obj) -> int:
    return sum(_count(s.get("active")) for s in _dig(obj, "status", "replicatedJobsStatus") or [])


def _pytorch_active(obj: Obj) -> int:
    statuses = _dig(obj, "status", "replicaStatuses") or {}
    return sum(_count(s.get("active")) for s in statuses.values() if isinstance(s, Mapping))


@dataclass(frozen=True, slots=True)
class Kind:
    group: str
    version: str
    plural: str
    kind: str
    suspend_path: tuple[str, ...]
    templates: Callable[[Obj], list[Template]]
    active: Callable[[Obj], int]
    #: condition type -> how it ended ("Complete" or "Failed")
    ends: Mapping[str, str]
    #: a gang kind: its pods are spread one per node (nodes x GPUs per node)
    gang: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def suspended(self, obj: Obj) -> bool:
        return bool(_dig(obj, *self.suspend_path))

    def finished(self, obj: Obj) -> str | None:
        for condition in _dig(obj, "status", "conditions") or []:
            ended = self.ends.get(str(condition.get("type")))
            if ended and condition.get("status") == "True":
                return ended
        return None

    def suspend_body(self, value: bool) -> dict[str, Any]:
        """A merge patch setting the suspend field."""
        body: dict[str, Any] = {self.suspend_path[-1]: value}
        for step in reversed(self.suspend_path[:-1]):
            body = {step: body}
        return body

    def gpus(self, obj: Obj) -> int:
        return sum(t.pods * t.gpus_per_pod for t in self.templates(obj))

    def shape(self, obj: Obj) -> tuple[int, int] | None:
        """(pods, GPUs each) of a gang whose GPU pods all ask the same; else None."""
        with_gpus = [t for t in self.templates(obj) if t.gpus_per_pod > 0 and t.pods > 0]
        sizes = {t.gpus_per_pod for t in with_gpus}
        if not self.gang or len(sizes) != 1:
            return None
        return sum(t.pods for t in with_gpus), sizes.pop()

    def host_needs(self, obj: Obj, where: str) -> tuple[float | None, float | None]:
        """CPUs and memory (GB) the workload may take on one node it is placed on: a
        gang's largest GPU pod (one a node) plus its pods without GPUs (a launcher may
        share any of its nodes); a Job's pods all together (kube-scheduler may put them
        all on one of its nodes). None where no pod states it."""
        totals: list[float | None] = [None, None]
        largest: list[float | None] = [None, None]
        for template in self.templates(obj):
            need = template.host_need(where)
            alone = self.gang and template.gpus_per_pod > 0
            for index, amount in enumerate(need):
                if amount is None:
                    continue
                if alone:
                    largest[index] = max(largest[index] or 0.0, amount)
                else:
                    totals[index] = (totals[index] or 0.0) + template.pods * amount
        return _plus(largest[0], totals[0]), _plus(largest[1], totals[1])

    def admission(
        self,
        obj: Obj,
        nodes: list[str],
        placed_on: str,
        rewrite: Callable[[Obj], dict[str, Any]] | None = None,
    ) -> list[dict[str, Any]]:
        """The JSON patch that admits ``obj`` on ``nodes``: it tests that the object is
        the one read and still suspended, writes the node affinity into every pod
        template (or, given ``rewrite``, replaces each pod template by what it makes of
        it: a provisioned pool's node selector and annotations) and the placement
        annotation, and un-suspends it."""
        meta = obj.get("metadata") or {}
        suspend = "/" + "/".join(self.suspend_path)
        ops: list[dict[str, Any]] = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]},
            {"op": "test", "path": suspend, "value": True},
        ]
        for template in self.templates(obj):
            if not template.spec.get("spec"):
                continue
            if rewrite is not None:
                ops.append({"op": "add", "path": template.path, "value": rewrite(template.spec)})
                continue
            affinity = with_hosts(_dig(template.spec, "spec", "affinity"), nodes)
            ops.append({"op": "add", "path": f"{template.path}/spec/affinity", "value": affinity})
        if meta.get("annotations"):
            path = "/metadata/annotations/" + placed_on.replace("~", "~0").replace("/", "~1")
            ops.append({"op": "add", "path": path, "value": ",".join(nodes)})
        else:
            ops.append(
                {
                    "op": "add",
                    "path": "/metadata/annotations",
                    "value": {placed_on: ",".join(nodes)},
                }
            )
        ops.append({"op": "replace", "path": suspend, "value": False})
        return ops


def _plus(a: float | None, b: float | None) -> float | None:
    return None if a is None and b is None else (a or 0.0) + (b or 0.0)


JOB = Kind(
    "batch", "v1", "jobs", "Job", ("spec", "suspend"), _job_templates, _job_active,
    {"Complete": "Complete", "Failed": "Failed"}, gang=False,
)  # fmt: skip
JOBSET = Kind(
    "jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", ("spec", "suspend"),
    _jobset_templates, _jobset_active, {"Completed": "Complete", "Failed": "Failed"},
    gang=True,
)  # fmt: skip
PYTORCHJOB = Kind(
    "kubeflow.org", "v1", "pytorchjobs", "PyTorchJob", ("spec", "runPolicy", "suspend"),
    _pytorch_templates, _pytorch_active, {"Succeeded": "Complete", "Failed": "Failed"},
    gang=True,
)  # fmt: skip
KINDS: dict[str, Kind] = {kind.plural: kind for kind in (JOB, JOBSET, PYTORCHJOB)}


def with_hosts(affinity: Obj | None, nodes: list[str]) -> dict[str, Any]:
    """``affinity`` whose required node terms also ask for one of ``nodes`` (ilucid's
    previous choice replaced); the user's own terms and other affinities are kept.
    Terms are ORed and expressions in a term ANDed, so the hosts go into every term."""
    merged = copy.deepcopy(dict(affinity or {}))
    node = dict(merged.get("nodeAffinity") or {})
    required = dict(node.get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = []
    for term in required.get("nodeSelectorTerms") or []:
        kept = [e for e in term.get("matchExpressions") or [] if e.get("key") != HOSTNAME]
        if kept or term.get("matchFields"):
            terms.append({**term, "matchExpressions": kept})
    if nodes:
        ours = {"key": HOSTNAME, "operator": "In", "values": list(nodes)}
        terms = [{**t, "matchExpressions": [*t["matchExpressions"], ours]} for t in terms]
        terms = terms or [{"matchExpressions": [ours]}]
    if terms:
        node["requiredDuringSchedulingIgnoredDuringExecution"] = {
            **required,
            "nodeSelectorTerms": terms,
        }
    else:
        node.pop("requiredDuringSchedulingIgnoredDuringExecution", None)
    if node:
        merged["nodeAffinity"] = node
    else:
        merged.pop("nodeAffinity", None)
    return merged


def gpu_type_of(templates: Iterable[Template]) -> str | None:
    """The GPU product the pods ask for by a node selector or a required node affinity
    (``nvidia.com/gpu.product In [one]``), when every GPU pod asks for the same one."""
    found: set[str | None] = set()
    for template in templates:
        if template.gpus_per_pod <= 0:
            continue
        spec = template.spec.get("spec") or {}
        wanted = (spec.get("nodeSelector") or {}).get(PRODUCT)
        terms = _dig(
            spec, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"
        )
        for term in (terms or {}).get("nodeSelectorTerms") or []:
            for expression in term.get("matchExpressions") or []:
                values = expression.get("values") or []
                if expression.get("key") == PRODUCT and expression.get("operator") == "In":
                    wanted = values[0] if len(values) == 1 else wanted
        found.add(wanted)
    return found.pop() if len(found) == 1 else None


def _not_ready(node: Obj) -> str | None:
    for condition in _dig(node, "status", "conditions") or []:
        if condition.get("type") == "Ready":
            if condition.get("status") == "True":
                return None
            said = condition.get("reason") or ""
            return f"not Ready: {said}" if said else "not Ready"
    return "not Ready"


def _allocatable(
    allocatable: Obj, field: str, read: Callable[[object, str], float], node: str
) -> float:
    value = allocatable.get(field)
    return 0.0 if value is None else read(value, f"node {node}: status.allocatable.{field}")


def node_inventory(nodes: Iterable[Obj]) -> tuple[Cluster, dict[str, str], set[str]]:
    """Every node with allocatable GPUs as the core's node (so jobs running on one that
    is cordoned or down stay accounted where they are), with its allocatable CPUs and
    memory (0 when not given); the ones that take no new pods, with the reason
    (cordoned, not Ready); and of those, the ones that are down. A quantity that is not
    one is a ValueError naming the node and field."""
    kept: list[Node] = []
    excluded: dict[str, str] = {}
    down: set[str] = set()
    for node in sorted(nodes, key=lambda n: str(_dig(n, "metadata", "name"))):
        name = str(_dig(node, "metadata", "name"))
        allocatable = _dig(node, "status", "allocatable") or {}
        gpus = _count(allocatable.get(GPU))
        if gpus <= 0:
            continue
        not_ready = _not_ready(node)
        if not_ready:
            excluded[name] = not_ready
            down.add(name)
        elif _dig(node, "spec", "unschedulable"):
            excluded[name] = "cordoned (spec.unschedulable)"
        labels = dict(_dig(node, "metadata", "labels") or {})
        memory = str(labels.get(MEMORY, ""))
        topology = {key: labels[label] for key, label in TOPOLOGY.items() if label in labels}
        product = labels.get(PRODUCT, "generic")
        memory_gb = int(memory) / 1024.0 if memory.isdigit() else 0.0
        cpus = _allocatable(allocatable, "cpu", cpus_of, name)
        host_memory = _allocatable(allocatable, "memory", memory_gb_of, name)
        kept.append(
            Node(name, gpus, product, memory_gb, topology, cpus=cpus, memory_gb=host_memory)
        )
    return Cluster(tuple(kept)), excluded, down
