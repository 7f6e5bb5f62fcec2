"""Issue 18: multi-node jobs on Kubernetes. A JobSet (2 replicated Jobs x 8 GPUs) and a
Kubeflow PyTorchJob (a master and a worker of 8 GPUs) are accepted by the live service,
admitted with node affinity on every replica's pod template and the gang un-suspended
in one patch, and suspended as a whole when an inference service needs a GPU.

The emulator stands in for the API server and the test plays the controllers' part
(``gang_controllers``: a resumed workload's replicas are active, a suspended one's not).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from sqlalchemy import select
from sqlalchemy.orm import Session

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kube_fixtures import (
    CUSTOM,
    Emulator,
    backend,
    caught_up,
    create,
    gang_controllers,
    gpu_job,
    gpu_node,
    jobset,
    pytorchjob,
)
from test_kubernetes_backend import job_controller

from ilucid.service.db import DecisionRow, JobRow, make_engine, migrate
from ilucid.service.scheduler_service import SchedulerService

GANGS = {
    "jobsets": lambda: jobset("train", replicas=2, gpus=8, leader=True),
    "pytorchjobs": lambda: pytorchjob("train", workers=1, gpus=8),
}


def stored(api: client.ApiClient, plural: str, name: str = "train") -> dict[str, Any]:
    group, version = CUSTOM[plural]
    return dict(
        client.CustomObjectsApi(api).get_namespaced_custom_object(
            group, version, "team-a", plural, name
        )
    )


def pod_templates(plural: str, obj: dict[str, Any]) -> list[dict[str, Any]]:
    if plural == "jobsets":
        return [r["template"]["spec"]["template"] for r in obj["spec"]["replicatedJobs"]]
    return [r["template"] for r in obj["spec"]["pytorchReplicaSpecs"].values()]


def suspended(plural: str, obj: dict[str, Any]) -> bool:
    spec = obj["spec"]
    return bool(spec["suspend"] if plural == "jobsets" else spec["runPolicy"]["suspend"])


def passes(svc: SchedulerService, api: client.ApiClient, count: int = 4) -> None:
    for _ in range(count):
        caught_up(svc.backend, api)  # the watches bring the controllers' writes
        svc.reconcile()
        job_controller(client.BatchV1Api(api))
        gang_controllers(api)


def rows(svc: SchedulerService) -> dict[str, JobRow]:
    with Session(svc.engine) as session:
        # an accepted workload's row names it: cwd "backend-job:<key>", the key ends in its name
        return {r.cwd.rsplit("/", 1)[1]: r for r in session.scalars(select(JobRow)) if r.cwd}


@pytest.mark.parametrize("plural", list(GANGS))
def test_a_gang_is_admitted_on_every_replica_and_preempted_as_a_whole(
    emulator: Emulator, tmp_path: Path, plural: str
) -> None:
    api = emulator.api()
    for name in ("gpu-1", "gpu-2"):
        client.CoreV1Api(api).create_node(gpu_node(name))
    create(api, GANGS[plural]())
    made = backend(api)
    made.observe()
    [offered] = made.foreign_jobs()
    assert (offered.key, offered.gpus) == (f"{plural}/team-a/train", 16)
    assert (offered.nodes, offered.gpus_per_node) == (2, 8), "a gang of 2 x 8"
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    migrate(url)
    svc = SchedulerService(make_engine(url), made, policy="tiered")
    passes(svc, api)

    gang = stored(api, plural)
    assert not suspended(plural, gang) and rows(svc)["train"].state == "running"
    with Session(svc.engine) as session:
        [decision] = session.scalars(select(DecisionRow).where(DecisionRow.action == "start"))
    names = [node.name for node in svc.reconciler.cluster.nodes]
    chosen = sorted(names[index] for index, _ in json.loads(decision.placement))
    assert chosen == ["gpu-1", "gpu-2"] and gang["metadata"]["annotations"][
        "ilucid.io/placed-on"
    ] == ",".join(chosen)
    for template in pod_templates(plural, gang):  # every replica, the CPU leader too
        required = template["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]
        [term] = required["nodeSelectorTerms"]
        assert term["matchExpressions"] == [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": chosen}
        ]

    # the cluster is full: an inference service preempts the whole gang
    create(api, gpu_job("serve", 1, job_class="inference"))
    passes(svc, api)
    gang = stored(api, plural)
    assert suspended(plural, gang), "suspended as a whole"
    assert rows(svc)["serve"].state == "running"
    train = rows(svc)["train"]
    assert (train.state, train.preemptions) == ("pending", 1)
    if plural == "jobsets":
        statuses = gang["status"]["replicatedJobsStatus"]
        assert [s["active"] for s in statuses] == [0, 0], "every replica stopped"
    else:
        assert [s["active"] for s in gang["status"]["replicaStatuses"].values()] == [0, 0]
