"""Cloud capacity for a gang through cluster-autoscaler's ProvisioningRequest API.

A provisioned pool is a node group that cluster-autoscaler scales up when asked
(``autoscaling.x-k8s.io/v1`` ProvisioningRequest, the API Kueue's provisioning
admission check uses). The core plans on stable virtual slots ``<pool>-0 ..
<pool>-(n-1)``; the autoscaler names the real nodes as it likes, so the real nodes
(labelled with the pool's node label) are left out of the observed cluster and the
slots stand for them.

For a job placed on slots, ilucid creates one PodTemplate per pod template of the
workload (the template its pods will run: the user's, with a node selector on the
pool's label and the consume annotations) and one ProvisioningRequest naming them,
``ilucid-<job id>``, both owned by the workload (deleting the workload deletes them).
The workload is admitted once the request reports ``Provisioned=True``; its pods
then carry ``autoscaling.x-k8s.io/consume-provisioning-request`` so the autoscaler
counts them against the capacity it booked. ``Failed``, or ``BookingExpired`` /
``CapacityRevoked`` before the pods exist, ends that attempt: the request is
deleted and its reason is what the service records and explains.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ilucid.backends.base import PowerState
from ilucid.backends.kubernetes_kinds import Template, with_hosts
from ilucid.core import Node

__all__ = [
    "BEST_EFFORT",
    "CLASS_NAME",
    "CONSUME",
    "FAILURES",
    "FOR_JOB",
    "GROUP",
    "KIND",
    "PLURAL",
    "POOL",
    "SLOTS",
    "VERSION",
    "ProvisionedPool",
    "Standing",
    "on_hosts",
    "pod_templates",
    "pool_template",
    "provisioning_request",
    "request_name",
    "slot_states",
    "slots_of",
    "standing",
    "without_pools",
]

GROUP, VERSION, PLURAL, KIND = (
    "autoscaling.x-k8s.io",
    "v1",
    "provisioningrequests",
    "ProvisioningRequest",
)
BEST_EFFORT = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
#: the pod annotations cluster-autoscaler matches pods to a request by (Kueue sets both)
CONSUME = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS_NAME = "autoscaling.x-k8s.io/provisioning-class-name"
#: label on ilucid's requests and templates: the job they are for (the watch selects it)
FOR_JOB = "ilucid.io/provisioned-for"
#: annotations on a request: the pool and the slots the core placed the job on
POOL = "ilucid.io/pool"
SLOTS = "ilucid.io/placed-on"
#: conditions that end a request's attempt before its pods exist
FAILURES = ("Failed", "BookingExpired", "CapacityRevoked")

Obj = Mapping[str, Any]
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True, slots=True)
class ProvisionedPool:
    """A node group cluster-autoscaler brings up on a ProvisioningRequest: at most
    ``nodes`` nodes of ``gpus_per_node`` GPUs of ``gpu_type`` (the value GPU feature
    discovery writes in ``nvidia.com/gpu.product``, so jobs asking a product match),
    whose nodes carry ``node_label`` (default ``ilucid.io/pool=<name>``)."""

    name: str
    nodes: int
    gpus_per_node: int
    gpu_type: str
    provisioning_class: str = BEST_EFFORT
    node_label: tuple[str, str] | None = None
    #: the request's ``spec.parameters`` (e.g. ``ValidUntilSeconds`` for the best-effort class)
    parameters: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        where = f"provisioned pool {self.name!r}"
        if not _DNS_LABEL.match(self.name) or len(self.name) > 50:
            raise ValueError(f"{where}: the name must be a DNS label (a-z, 0-9, -), 50 at most")
        if self.nodes <= 0 or self.gpus_per_node <= 0:
            raise ValueError(f"{where}: nodes and gpus_per_node must be > 0")
        if self.node_label is None:
            object.__setattr__(self, "node_label", ("ilucid.io/pool", self.name))

    @property
    def label(self) -> tuple[str, str]:
        assert self.node_label is not None  # set in __post_init__
        return self.node_label

    @classmethod
    def parse(cls, text: str) -> ProvisionedPool:
        """``NAME:NODES:GPUS_PER_NODE:GPU_TYPE[:CLASS]`` (``ilucid serve --kube-pool``)."""
        fields = text.split(":")
        if len(fields) not in (4, 5) or not fields[1].isdigit() or not fields[2].isdigit():
            raise ValueError(
                f"--kube-pool {text!r}: give NAME:NODES:GPUS_PER_NODE:GPU_TYPE[:CLASS],"
                " e.g. cloud:16:8:NVIDIA-H100-80GB-HBM3"
            )
        name, nodes, gpus, gpu_type = fields[:4]
        chosen = fields[4] if len(fields) == 5 else BEST_EFFORT
        return cls(name, int(nodes), int(gpus), gpu_type, provisioning_class=chosen)

    def slots(self) -> list[str]:
        return [f"{self.name}-{index}" for index in range(self.nodes)]

    def slot_nodes(self) -> tuple[Node, ...]:
        """The core's nodes for the pool: its slots, labelled ``pool=<name>``."""
        return tuple(
            Node(slot, self.gpus_per_node, self.gpu_type, labels={"pool": self.name})
            for slot in self.slots()
        )


@dataclass(frozen=True, slots=True)
class Standing:
    """Where a request stands, from its conditions."""

    provisioned: bool
    failure: str | None  # the failed condition in words, when one holds
    words: str  # the latest condition in words, for explain


def request_name(job_id: str) -> str:
    """``ilucid-<job id>`` as a DNS name (lowercase; other characters become ``-``)."""
    tail = re.sub(r"[^a-z0-9-]+", "-", job_id.lower()).strip("-")
    return f"ilucid-{tail or 'job'}"[:240]


def without_pools(spec: Obj, pools: Iterable[ProvisionedPool]) -> dict[str, Any]:
    """A pod template with ilucid's pool choice taken out (node selector on a pool's
    label, the consume annotations): what an on-prem admission starts from."""
    template = copy.deepcopy(dict(spec))
    pod = template.get("spec")
    if isinstance(pod, dict) and pod.get("nodeSelector"):
        keys = {pool.label[0] for pool in pools}
        selector = {k: v for k, v in pod["nodeSelector"].items() if k not in keys}
        if selector:
            pod["nodeSelector"] = selector
        else:
            pod.pop("nodeSelector")
    meta = template.get("metadata")
    if isinstance(meta, dict) and meta.get("annotations"):
        notes = {k: v for k, v in meta["annotations"].items() if k not in (CONSUME, CLASS_NAME)}
        if notes:
            meta["annotations"] = notes
        else:
            meta.pop("annotations")
    return template


def on_hosts(spec: Obj, nodes: list[str], pools: Iterable[ProvisionedPool]) -> dict[str, Any]:
    """A pod template admitted on-prem: no pool choice, node affinity on ``nodes``."""
    template = without_pools(spec, pools)
    pod = template.setdefault("spec", {})
    pod["affinity"] = with_hosts(pod.get("affinity"), nodes)
    return template


def pool_template(
    spec: Obj, pool: ProvisionedPool, request: str, pools: Iterable[ProvisionedPool]
) -> dict[str, Any]:
    """A pod template admitted to ``pool``: a node selector on the pool's label instead
    of ilucid's node affinity, and the annotations consuming ``request``."""
    template = without_pools(spec, pools)
    pod = template.setdefault("spec", {})
    if pod.get("affinity"):  # ilucid's hostnames from an earlier on-prem admission
        affinity = with_hosts(pod["affinity"], [])
        if affinity:
            pod["affinity"] = affinity
        else:
            pod.pop("affinity")
    key, value = pool.label
    pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), key: value}
    meta = template.setdefault("metadata", {})
    meta["annotations"] = {
        **(meta.get("annotations") or {}),
        CONSUME: request,
        CLASS_NAME: pool.provisioning_class,
    }
    return template


def _string_quantities(template: dict[str, Any]) -> dict[str, Any]:
    """Resource amounts as the API writes them, strings (``8`` -> ``"8"``): the client's
    typed PodTemplate model refuses a number where a quantity is."""
    pod = template.get("spec") or {}
    for group in ("containers", "initContainers"):
        for container in pod.get(group) or []:
            resources = container.get("resources") or {}
            for side in ("limits", "requests"):
                if isinstance(resources.get(side), dict):
                    resources[side] = {k: str(v) for k, v in resources[side].items()}
    return template


def _owner(workload: Obj) -> dict[str, Any]:
    meta = workload["metadata"]
    return {
        "apiVersion": workload.get("apiVersion") or "",
        "kind": workload.get("kind") or "",
        "name": meta["name"],
        "uid": meta.get("uid") or "",
    }


def _meta(name: str, job_id: str, workload: Obj, extra: Mapping[str, str]) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": workload["metadata"]["namespace"],
        "labels": {FOR_JOB: request_name(job_id).removeprefix("ilucid-")[:63]},
        "annotations": {"ilucid.io/job-id": job_id, **extra},
    }
    if workload["metadata"].get("uid"):  # garbage-collected with the workload
        meta["ownerReferences"] = [_owner(workload)]
    return meta


def pod_templates(
    job_id: str,
    workload: Obj,
    templates: Sequence[Template],
    pool: ProvisionedPool,
    pools: Iterable[ProvisionedPool],
) -> list[tuple[dict[str, Any], int]]:
    """The PodTemplate objects for the request, each with its pod count: one per pod
    template of the workload that has pods (at most 32, the API's limit)."""
    name = request_name(job_id)
    made = []
    for index, template in enumerate(t for t in templates if t.pods > 0 and t.spec.get("spec")):
        body = {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": _meta(f"{name}-{index}", job_id, workload, {}),
            "template": _string_quantities(pool_template(template.spec, pool, name, pools)),
        }
        made.append((body, template.pods))
    if not made or len(made) > 32:
        raise ValueError(f"job {job_id}: {len(made)} pod templates (a request takes 1 to 32)")
    return made


def provisioning_request(
    job_id: str,
    workload: Obj,
    templates: Sequence[tuple[Obj, int]],
    pool: ProvisionedPool,
    slots: Sequence[str],
) -> dict[str, Any]:
    """The ProvisioningRequest for the gang: a pod set per PodTemplate, ``count`` its pods."""
    extra = {POOL: pool.name, SLOTS: ",".join(slots)}
    spec: dict[str, Any] = {
        "provisioningClassName": pool.provisioning_class,
        "podSets": [
            {"podTemplateRef": {"name": body["metadata"]["name"]}, "count": count}
            for body, count in templates
        ],
    }
    if pool.parameters:
        spec["parameters"] = dict(pool.parameters)
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": _meta(request_name(job_id), job_id, workload, extra),
        "spec": spec,
    }


def _conditions(request: Obj) -> dict[str, Mapping[str, Any]]:
    found = (request.get("status") or {}).get("conditions") or []
    return {str(c.get("type")): c for c in found if isinstance(c, Mapping)}


def _said(condition: Mapping[str, Any]) -> str:
    reason, message = condition.get("reason") or "", condition.get("message") or ""
    return f" ({reason}): {message}" if message else f" ({reason})" if reason else ""


def standing(request: Obj) -> Standing:
    """Where the request stands: a failure condition, Provisioned, Accepted, or new."""
    name = f"ProvisioningRequest {request['metadata']['name']}"
    conditions = _conditions(request)
    held = {kind for kind, c in conditions.items() if c.get("status") == "True"}
    for kind in FAILURES:
        if kind in held:
            failure = f"{name}: {kind}{_said(conditions[kind])}"
            return Standing(False, failure, failure)
    if "Provisioned" in held:
        return Standing(True, None, f"{name}: Provisioned{_said(conditions['Provisioned'])}")
    provisioned = conditions.get("Provisioned")
    detail = _said(provisioned).removeprefix(" ") if provisioned else ""
    if "Accepted" in held:
        words = f"{name}: Accepted, not Provisioned yet" + (f": {detail}" if detail else "")
    else:
        accepted = conditions.get("Accepted")
        detail = _said(accepted).removeprefix(" ") if accepted else ""
        words = f"{name}: not Accepted by cluster-autoscaler yet" + (
            f": {detail}" if detail else ""
        )
    return Standing(False, None, words)


def slots_of(request: Obj) -> list[str]:
    notes = request["metadata"].get("annotations") or {}
    return [slot for slot in str(notes.get(SLOTS, "")).split(",") if slot]


def slot_states(
    pools: Iterable[ProvisionedPool], requests: Iterable[Obj], running: Iterable[str]
) -> dict[str, PowerState]:
    """Each slot's power state: ON under a running job or a Provisioned request,
    STARTING while a request for it is not Provisioned yet, OFF otherwise."""
    states = {slot: PowerState.OFF for pool in pools for slot in pool.slots()}
    for request in requests:
        now = standing(request)
        if now.failure is not None:
            continue
        state = PowerState.ON if now.provisioned else PowerState.STARTING
        for slot in slots_of(request):
            if slot in states and states[slot] is not PowerState.ON:
                states[slot] = state
    for slot in running:
        if slot in states:
            states[slot] = PowerState.ON
    return states
