"""Kubernetes test objects: the emulator wrapper, and nodes and Jobs shaped like a real GPU
cluster's (labels of NVIDIA's GPU feature discovery, taints, suspended labelled Jobs)."""

from __future__ import annotations

import json
import time
from typing import Any

from kmock_thread import KMockThread
from kmock_watch import ClusterEmulator
from kubernetes import client

from ilucid.backends.kubernetes_watch import key_of


class Emulator:
    def __init__(self, handler: ClusterEmulator, server: KMockThread) -> None:
        self.handler, self.server = handler, server
        self.url = server.url

    def api(self) -> client.ApiClient:
        return client.ApiClient(client.Configuration(host=self.url))

    def requests(self) -> list[Any]:
        return list(self.handler[:])


def gpu_node(
    name: str,
    gpus: int = 8,
    product: str = "NVIDIA-A100-SXM4-80GB",
    ready: bool = True,
    cordoned: bool = False,
    rack: str | None = None,
) -> dict[str, Any]:
    """A node as NVIDIA's GPU feature discovery labels it."""
    labels = {
        "kubernetes.io/hostname": name,
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.memory": "81920",
        "nvidia.com/gpu.count": str(gpus),
        "topology.kubernetes.io/zone": "zone-a",
    }
    if rack:
        labels["ilucid.io/rack"] = rack
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "unschedulable": cordoned,
            "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        },
        "status": {
            "allocatable": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": str(gpus)},
            "capacity": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def gpu_job(
    name: str,
    gpus: int,
    job_class: str = "training",
    namespace: str = "team-a",
    queue: str | None = "default",
    suspend: bool = True,
) -> dict[str, Any]:
    """A training or inference Job as a user submits it for ilucid: suspended, labelled."""
    labels = {"ilucid.io/queue": queue} if queue else {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": {"ilucid.io/class": job_class, "ilucid.io/estimate-seconds": "600"},
        },
        "spec": {
            "suspend": suspend,
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                    "containers": [
                        {
                            "name": "main",
                            "image": "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
                            "command": ["python", "train.py"],
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                        }
                    ],
                }
            },
        },
    }


def _pod_template(gpus: int) -> dict[str, Any]:
    return {
        "spec": {
            "restartPolicy": "Never",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "containers": [
                {
                    "name": "main",
                    "image": "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
                    "command": ["torchrun", "train.py"],
                    "resources": {"limits": {"nvidia.com/gpu": gpus}},
                }
            ],
        }
    }


def _meta(name: str, namespace: str, job_class: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": namespace,
        "labels": {"ilucid.io/queue": "default"},
        "annotations": {"ilucid.io/class": job_class, "ilucid.io/estimate-seconds": "3600"},
    }


def jobset(
    name: str, replicas: int, gpus: int, namespace: str = "team-a", leader: bool = False
) -> dict[str, Any]:
    """A JobSet as a user submits it for ilucid: ``replicas`` one-pod Jobs of ``gpus`` GPUs
    (and, with ``leader``, a CPU-only leader Job), suspended and labelled."""
    replicated = [
        {
            "name": "workers",
            "replicas": replicas,
            "template": {
                "spec": {
                    "parallelism": 1,
                    "completions": 1,
                    "backoffLimit": 0,
                    "template": _pod_template(gpus),
                }
            },
        }
    ]
    if leader:
        replicated.insert(
            0,
            {
                "name": "leader",
                "replicas": 1,
                "template": {"spec": {"parallelism": 1, "template": _pod_template(0)}},
            },
        )
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": _meta(name, namespace, "training"),
        "spec": {"suspend": True, "replicatedJobs": replicated},
    }


def pytorchjob(name: str, workers: int, gpus: int, namespace: str = "team-a") -> dict[str, Any]:
    """A Kubeflow PyTorchJob: one master and ``workers`` workers of ``gpus`` GPUs each,
    suspended (``runPolicy.suspend``) and labelled."""
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": _meta(name, namespace, "training"),
        "spec": {
            "runPolicy": {"suspend": True, "cleanPodPolicy": "None"},
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": _pod_template(gpus)},
                "Worker": {"replicas": workers, "template": _pod_template(gpus)},
            },
        },
    }


CUSTOM = {"jobsets": ("jobset.x-k8s.io", "v1alpha2"), "pytorchjobs": ("kubeflow.org", "v1")}


def create(api: client.ApiClient, obj: dict[str, Any]) -> None:
    """Create a Job, JobSet or PyTorchJob as its user would."""
    namespace = obj["metadata"]["namespace"]
    if obj["kind"] == "Job":
        client.BatchV1Api(api).create_namespaced_job(namespace, obj)
        return
    plural = obj["kind"].lower() + "s"
    group, version = CUSTOM[plural]
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        group, version, namespace, plural, obj
    )


def gang_controllers(api: client.ApiClient) -> None:
    """What the JobSet and training operators would do with their pods: a resumed
    workload gets its pods (counted active), a suspended one loses them."""
    custom = client.CustomObjectsApi(api)
    for plural, (group, version) in CUSTOM.items():
        for obj in custom.list_cluster_custom_object(group, version, plural)["items"]:
            meta, spec, status = obj["metadata"], obj["spec"], obj.get("status") or {}
            if plural == "jobsets":
                suspended = spec.get("suspend", False)
                names = [r["name"] for r in spec["replicatedJobs"]]
                counts = {r["name"]: r["active"] for r in status.get("replicatedJobsStatus", [])}
                active = {n: 0 if suspended else 1 for n in names}
                body = {"status": {"replicatedJobsStatus": [
                    {"name": n, "active": a, "ready": a, "succeeded": 0, "failed": 0,
                     "suspended": 1 if suspended else 0}
                    for n, a in active.items()
                ]}}  # fmt: skip
            else:
                suspended = spec["runPolicy"].get("suspend", False)
                roles = list(spec["pytorchReplicaSpecs"])
                counts = {
                    r: s.get("active", 0) for r, s in status.get("replicaStatuses", {}).items()
                }
                active = {r: 0 if suspended else 1 for r in roles}
                body = {
                    "status": {"replicaStatuses": {r: {"active": a} for r, a in active.items()}}
                }
            if counts != active:
                custom.patch_namespaced_custom_object_status(
                    group, version, meta["namespace"], plural, meta["name"], body
                )


def _listed_versions(api: client.ApiClient, what: str, selector: str | None) -> dict[str, str]:
    """What the API server holds now for one watched resource: key -> resourceVersion."""
    options: dict[str, Any] = {"_preload_content": False}
    if selector:
        options["label_selector"] = selector
    if what == "nodes":
        answer = client.CoreV1Api(api).list_node(**options)
    elif what == "jobs":
        answer = client.BatchV1Api(api).list_job_for_all_namespaces(**options)
    else:
        group, version = CUSTOM[what]
        answer = client.CustomObjectsApi(api).list_cluster_custom_object(
            group, version, what, **options
        )
    items = json.loads(answer.data).get("items") or []
    return {key_of(o): str(o["metadata"]["resourceVersion"]) for o in items}


def caught_up(made: Any, api: client.ApiClient, timeout_s: float = 15.0) -> None:
    """Wait until the backend's watches hold what the API server holds now.

    Why: the watches run in threads and a pass reads only what they hold, so a write
    made by the test (a controller's status, a completion) reaches the next pass only
    once its watch event has arrived; on a loaded machine that can take longer than a
    few passes. Before the first pass there is nothing to wait for (it lists)."""
    informers = [made.nodes, *made.informers.values()]
    deadline = time.monotonic() + timeout_s
    while True:
        behind = []
        for informer in informers:
            if not informer.synced.is_set() or informer.missing is not None:
                continue
            selector = None if informer.what == "nodes" else made.queue_label
            held = {key_of(o): str(o["metadata"]["resourceVersion"]) for o in informer.snapshot()}
            if held != _listed_versions(api, informer.what, selector):
                behind.append(informer.what)
        if not behind:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the watches of {behind} did not catch up in {timeout_s} s")
        time.sleep(0.02)


#: backends made by the tests, closed (their watch threads stopped) after each test
BACKENDS: list[Any] = []


def backend(api: client.ApiClient, **options: Any) -> Any:
    from ilucid.backends.kubernetes import KubernetesBackend

    made = KubernetesBackend(api, **options)
    BACKENDS.append(made)
    return made


def close_backends() -> None:
    while BACKENDS:
        BACKENDS.pop().close()
