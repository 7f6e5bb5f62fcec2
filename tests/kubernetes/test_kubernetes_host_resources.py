"""Issue 18 on Kubernetes (emulator, real client): nodes' allocatable CPUs and memory are
the core's node capacities, and a workload's pods' own ``cpu``/``memory`` requests are what
the core books for it on each node, so a placement never puts pods where kube-scheduler
could not bind them for want of CPUs or memory."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from sqlalchemy import select
from sqlalchemy.orm import Session

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kube_fixtures import (
    Emulator,
    backend,
    caught_up,
    create,
    gang_controllers,
    gpu_job,
    gpu_node,
    jobset,
)

from ilucid.backends.base import BackendUnavailable
from ilucid.backends.kubernetes_kinds import JOB, JOBSET
from ilucid.service.db import JobRow, make_engine, migrate
from ilucid.service.scheduler_service import SchedulerService

GiB = 2**30


def node(name: str, cpu: Any, memory: Any, gpus: int = 8) -> dict[str, Any]:
    made = gpu_node(name, gpus=gpus)
    allocatable = made["status"]["allocatable"]
    for field, value in (("cpu", cpu), ("memory", memory)):
        if value is None:
            del allocatable[field]
        else:
            allocatable[field] = value
    return made


def asking(job: dict[str, Any], **requests: str) -> dict[str, Any]:
    """``job`` whose (first) container requests ``cpu``/``memory``."""
    [container] = job["spec"]["template"]["spec"]["containers"]
    container["resources"]["requests"] = dict(requests)
    return job


def service(tmp_path: Path, api: Any) -> SchedulerService:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    migrate(url)
    return SchedulerService(make_engine(url), backend(api), policy="fifo")


def passes(svc: SchedulerService, batch: client.BatchV1Api, count: int = 3) -> None:
    """Service passes, with the Job controller's part played (admitted Jobs get a pod)."""
    for _ in range(count):
        caught_up(svc.backend, batch.api_client)
        svc.reconcile()
        for job in batch.list_job_for_all_namespaces().items:
            active = (job.status.active if job.status else 0) or 0
            if not job.spec.suspend and not active:
                body = {"status": {"active": 1}}
                batch.patch_namespaced_job_status(job.metadata.name, job.metadata.namespace, body)


def rows(svc: SchedulerService) -> dict[str, JobRow]:
    with Session(svc.engine) as session:
        return {r.cwd.rsplit("/", 1)[1]: r for r in session.scalars(select(JobRow)) if r.cwd}


def test_allocatable_cpu_and_memory_are_the_nodes_capacities(emulator: Emulator) -> None:
    core = client.CoreV1Api(emulator.api())
    for made in (
        node("gpu-a", "63500m", "263543236Ki"),
        node("gpu-b", "8", "16Gi"),
        node("gpu-c", "4", "1e9"),  # bytes in decimal exponent form
        node("gpu-d", None, None),  # not said: no limit (0)
    ):
        core.create_node(made)
    seen = backend(emulator.api()).observe()
    assert [(n.name, n.cpus, n.memory_gb) for n in seen.cluster.nodes] == [
        ("gpu-a", 63.5, 263543236 * 1024 / GiB),
        ("gpu-b", 8.0, 16.0),
        ("gpu-c", 4.0, 1e9 / GiB),
        ("gpu-d", 0.0, 0.0),
    ]


def test_a_node_quantity_that_is_not_one_names_the_node_and_field(emulator: Emulator) -> None:
    core = client.CoreV1Api(emulator.api())
    core.create_node(node("gpu-a", "16", "64Gi"))
    core.create_node(node("gpu-z", "16", "12GB"))  # "GB" is no Kubernetes suffix
    made = backend(emulator.api())
    with pytest.raises(BackendUnavailable) as refused:
        made.observe()
    assert "node gpu-z: status.allocatable.memory: '12GB' is not a Kubernetes quantity" in str(
        refused.value
    )
    # corrected, it is read on a later pass (the refusal did not stick)
    core.patch_node_status("gpu-z", {"status": {"allocatable": {"memory": "12G"}}})
    deadline = time.monotonic() + 10
    while True:
        try:
            cluster = made.observe().cluster
            break
        except BackendUnavailable:
            assert time.monotonic() < deadline, "the corrected node was never read"
            time.sleep(0.1)
    assert {n.name: n.memory_gb for n in cluster.nodes}["gpu-z"] == 12e9 / GiB


def test_pod_requests_are_booked_and_nodes_short_of_them_are_passed_over(
    emulator: Emulator, tmp_path: Path
) -> None:
    api = emulator.api()
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    core.create_node(node("gpu-a", "16", "64Gi"))  # GPUs enough, CPUs and memory not
    core.create_node(node("gpu-b", "96", "1Ti"))
    svc = service(tmp_path, api)
    batch.create_namespaced_job("team-a", asking(gpu_job("big", 4), cpu="24", memory="100Gi"))
    passes(svc, batch)
    big = rows(svc)["big"]
    assert (big.state, big.cpus, big.memory_gb) == ("running", 24.0, 100.0)
    admitted = batch.read_namespaced_job("big", "team-a")
    term = admitted.spec.template.spec.affinity.node_affinity
    [hosts] = term.required_during_scheduling_ignored_during_execution.node_selector_terms
    assert hosts.match_expressions[0].values == ["gpu-b"]  # gpu-a has 16 CPUs, not 24
    # its pods ask Kubernetes for exactly what the core booked on gpu-b
    [container] = admitted.spec.template.spec.containers
    assert container.resources.requests == {"cpu": "24", "memory": "100Gi"}
    names = [n.name for n in svc.cluster.nodes]
    free = svc.scheduler.free
    b = names.index("gpu-b")
    assert (free.cpus_free[b], free.memory_free[b]) == (96 - 24, 1024 - 100)

    # 4 GPUs are free on each node, but neither has 80 free CPUs: it waits, saying so
    batch.create_namespaced_job("team-a", asking(gpu_job("wide", 4), cpu="80"))
    passes(svc, batch)
    wide = rows(svc)["wide"]
    assert (wide.state, wide.cpus, wide.memory_gb) == ("pending", 80.0, None)
    assert batch.read_namespaced_job("wide", "team-a").spec.suspend
    why = svc.scheduler.why_pending(wide.id, time.time())
    assert "most free on one of them: 72 CPUs" in why and "needs 80 CPUs on each" in why, why


def test_a_gang_books_its_largest_pod_and_its_pods_without_gpus_on_each_node(
    emulator: Emulator, tmp_path: Path
) -> None:
    api = emulator.api()
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    for name in ("gpu-a", "gpu-b"):
        core.create_node(node(name, "32", "256Gi", gpus=4))
    gang = jobset("js", 2, 4, leader=True)
    leader, workers = gang["spec"]["replicatedJobs"]
    resources = {"leader": {"cpu": "2", "memory": "4Gi"}, "workers": {"cpu": "10"}}
    for replicated in (leader, workers):
        [container] = replicated["template"]["spec"]["template"]["spec"]["containers"]
        container["resources"]["requests"] = resources[replicated["name"]]
    assert JOBSET.host_needs(gang, "JobSet team-a/js") == (10 + 2, 4.0)
    create(api, gang)
    svc = service(tmp_path, api)
    deadline = time.monotonic() + 10
    while "js" not in rows(svc) or rows(svc)["js"].state != "running":
        assert time.monotonic() < deadline, rows(svc)
        passes(svc, batch, 1)
        gang_controllers(api)
    js = rows(svc)["js"]
    assert (js.nodes, js.gpus_per_node, js.cpus, js.memory_gb) == (2, 4, 12.0, 4.0)
    assert list(svc.scheduler.free.cpus_free) == [32 - 12, 32 - 12]  # on each of its nodes


def test_a_jobs_pods_all_count_and_an_init_container_counts_when_larger() -> None:
    job = gpu_job("par", 3)
    job["spec"]["parallelism"] = 3
    spec = job["spec"]["template"]["spec"]
    spec["containers"][0]["resources"] = {"limits": {"cpu": "500m", "memory": "2Gi"}}
    spec["initContainers"] = [
        {"name": "fetch", "resources": {"requests": {"cpu": "4", "memory": "1Gi"}}}
    ]
    # per pod: max(containers 0.5, init 4) CPUs and max(2, 1) GiB; three pods may share a node
    assert JOB.host_needs(job, "Job team-a/par") == (12.0, 6.0)
    assert JOB.host_needs(gpu_job("plain", 1), "Job team-a/plain") == (None, None)


def test_a_workload_whose_request_is_not_a_quantity_is_not_accepted(
    emulator: Emulator, tmp_path: Path
) -> None:
    api = emulator.api()
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    core.create_node(node("gpu-a", "16", "64Gi"))
    svc = service(tmp_path, api)
    bad = gpu_job("bad", 1)
    bad["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "lots"}
    # the API server would refuse such a Job; the emulator keeps it, as a CRD might
    batch.create_namespaced_job("team-a", bad)
    batch.create_namespaced_job("team-a", gpu_job("good", 1))
    passes(svc, batch)
    assert set(rows(svc)) == {"good"}
    with pytest.raises(ValueError, match=r"Job team-a/bad: /spec/template/spec/containers/main"):
        JOB.host_needs(batch.read_namespaced_job("bad", "team-a").to_dict(), "Job team-a/bad")
