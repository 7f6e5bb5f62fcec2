"""Issue 18: a Job that asks a GPU product (a nodeSelector, or a required node affinity,
on ``nvidia.com/gpu.product``) is placed by the live service only on nodes of that
product. The cluster has V100 nodes sorted before the A100 one, so a placer blind to the
type would take a V100 node first; the admitted Job's affinity names the node chosen
(the emulator has no kube-scheduler: that affinity is where its pods may run) and keeps
the user's own product term."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from sqlalchemy import select
from sqlalchemy.orm import Session

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kube_fixtures import Emulator, backend, create, gpu_job, gpu_node
from test_kubernetes_backend import passes

from ilucid.service.db import JobRow, make_engine, migrate
from ilucid.service.scheduler_service import SchedulerService

A100 = "NVIDIA-A100-SXM4-80GB"
V100 = "Tesla-V100-SXM2-16GB"
PRODUCT = "nvidia.com/gpu.product"


def asking(name: str, gpus: int, product: str, by: str) -> dict[str, Any]:
    """A Job for ``gpus`` GPUs of ``product``, asked as users do: by a nodeSelector or by
    a required node affinity."""
    job = gpu_job(name, gpus)
    pod = job["spec"]["template"]["spec"]
    if by == "nodeSelector":
        pod["nodeSelector"] = {PRODUCT: product}
    else:
        term = {"matchExpressions": [{"key": PRODUCT, "operator": "In", "values": [product]}]}
        pod["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
            }
        }
    return job


def admitted_hosts(batch: client.BatchV1Api, name: str) -> list[str]:
    """The hostnames the admitted Job's pods are bound to by the affinity ilucid wrote."""
    job = batch.read_namespaced_job(name, "team-a").to_dict()
    pod = job["spec"]["template"]["spec"]
    terms = pod["affinity"]["node_affinity"]["required_during_scheduling_ignored_during_execution"][
        "node_selector_terms"
    ]
    hosts = [
        value
        for term in terms
        for expression in term["match_expressions"]
        if expression["key"] == "kubernetes.io/hostname"
        for value in expression["values"]
    ]
    return sorted(set(hosts))


@pytest.mark.parametrize("by", ["nodeSelector", "affinity"])
def test_a_job_asking_a_gpu_product_is_placed_only_on_nodes_of_that_product(
    emulator: Emulator, tmp_path: Path, by: str
) -> None:
    api = emulator.api()
    core = client.CoreV1Api(api)
    for name, product in (("gpu-1", V100), ("gpu-2", V100), ("gpu-3", A100)):
        core.create_node(gpu_node(name, gpus=4, product=product))
    batch = client.BatchV1Api(api)
    create(api, asking("a100-job", 2, A100, by))
    made = backend(api)
    made.observe()
    [offered] = made.foreign_jobs()
    assert offered.gpu_type == A100, "the product the Job asks is its GPU type"
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    migrate(url)
    svc = SchedulerService(make_engine(url), made, policy="tiered")
    passes(svc, batch)

    assert admitted_hosts(batch, "a100-job") == ["gpu-3"]
    admitted = batch.read_namespaced_job("a100-job", "team-a")
    assert admitted.spec.suspend is False
    pod = admitted.spec.template.spec
    if by == "nodeSelector":  # the user's own constraint stays as they wrote it
        assert pod.node_selector == {PRODUCT: A100}
    else:
        required = pod.affinity.node_affinity.required_during_scheduling_ignored_during_execution
        [term] = required.node_selector_terms
        keys = {e.key: e.values for e in term.match_expressions}
        assert keys[PRODUCT] == [A100] and keys["kubernetes.io/hostname"] == ["gpu-3"]
    with Session(svc.engine) as session:
        [row] = session.scalars(select(JobRow))
        assert (row.gpu_type, row.state) == (A100, "running")

    # 2 A100 GPUs are free and 8 V100: a Job asking 3 A100 waits, never lands on a V100
    create(api, asking("more-a100", 3, A100, by))
    passes(svc, batch)
    assert batch.read_namespaced_job("more-a100", "team-a").spec.suspend is True
    with Session(svc.engine) as session:
        states = {r.cwd.rsplit("/", 1)[1]: r.state for r in session.scalars(select(JobRow))}
    assert states == {"a100-job": "running", "more-a100": "pending"}
    # and a Job asking V100 goes to a V100 node
    create(api, asking("v100-job", 4, V100, by))
    passes(svc, batch)
    assert admitted_hosts(batch, "v100-job") in (["gpu-1"], ["gpu-2"])
