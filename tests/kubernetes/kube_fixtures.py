"""Kubernetes test objects: the emulator wrapper, and nodes and Jobs shaped like a real GPU
cluster's (labels of NVIDIA's GPU feature discovery, taints, suspended labelled Jobs)."""

from __future__ import annotations

from typing import Any

from kmock_ext import StatefulKubernetesEmulator
from kmock_thread import KMockThread
from kubernetes import client


class Emulator:
    def __init__(self, handler: StatefulKubernetesEmulator, server: KMockThread) -> None:
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
