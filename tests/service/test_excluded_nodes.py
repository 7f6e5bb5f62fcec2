"""Nodes the cluster manager takes out of service (issue 18): a backend that reports
them (``ReportsExcludedNodes``) has them fenced on the next pass: no new job lands
there, jobs already there keep running, and /nodes says why. Resumed, they take
work again."""

from __future__ import annotations

import time
from pathlib import Path

from fastapi.testclient import TestClient

from ilucid.backends.base import ReportsExcludedNodes
from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory
from ilucid.service.api import build_app
from ilucid.service.auth import create_token
from ilucid.service.db import make_engine, migrate
from ilucid.service.job_store import JobRequest
from ilucid.service.scheduler_service import SchedulerService


class DrainableHost(LocalBackend):
    """This host's GPUs, with an operator's drain list as a cluster manager keeps it."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder, GpuInventory(2, "v100", 16.0, "virtual"))
        self.drained: dict[str, str] = {}

    def excluded_nodes(self) -> dict[str, str]:
        return dict(self.drained)


def _state(service: SchedulerService, job: str) -> str:
    for _ in range(40):
        service.reconcile()
        time.sleep(0.05)
    status = service.scheduler.jobs[job].status.value
    return status


def test_a_drained_node_takes_no_new_job_and_says_why(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ilucid.db'}"
    migrate(url)
    engine = make_engine(url)
    backend = DrainableHost(tmp_path)
    assert isinstance(backend, ReportsExcludedNodes)
    service = SchedulerService(engine, backend, policy="fifo")
    assert "excluded nodes" in service.capabilities.names()
    client = TestClient(build_app(service))
    headers = {"Authorization": f"Bearer {create_token(engine, 'root', 'ops', True)}"}
    host = service.cluster.nodes[0].name
    running = service.submit(JobRequest(["sleep", "30"], gpus=1))
    assert _state(service, running) == "running"

    backend.drained = {host: "drained: disk swap"}
    waiting = service.submit(JobRequest(["sleep", "30"], gpus=1))
    assert _state(service, waiting) == "pending"  # a GPU is free, but not for new work
    assert service.scheduler.jobs[running].status.value == "running"  # keeps running
    shown = client.get("/nodes", headers=headers).json()
    assert shown[0]["name"] == host and shown[0]["excluded"] == "drained: disk swap"

    backend.drained = {}
    assert _state(service, waiting) == "running"
    assert client.get("/nodes", headers=headers).json()[0]["excluded"] is None
    for job in (running, waiting):
        service.cancel(job)
    engine.dispose()


def test_a_changed_cluster_rebuilds_the_core_and_keeps_running_jobs(tmp_path: Path) -> None:
    """The cluster manager reports a different inventory (here: a node relabelled; a
    node added or gone is the same path): the core is rebuilt from the database and
    the backend on the next pass, the running job is re-adopted, never started twice."""
    from dataclasses import replace

    from ilucid.core import Cluster

    url = f"sqlite:///{tmp_path / 'ilucid.db'}"
    migrate(url)
    engine = make_engine(url)
    backend = DrainableHost(tmp_path)
    service = SchedulerService(engine, backend, policy="fifo")
    running = service.submit(JobRequest(["sleep", "30"], gpus=1))
    assert _state(service, running) == "running"
    old_core = service.scheduler
    node = backend.cluster.nodes[0]
    backend.cluster = Cluster((replace(node, labels={"rack": "r7"}),))
    service.reconcile()
    assert service.scheduler is not old_core and service.cluster == backend.cluster
    assert service.readopted == [running]
    assert _state(service, running) == "running"
    starts = [line for line in service.story(running) if line.stimulus == "backend: launched"]
    assert len(starts) == 1  # re-adopted, not launched again
    service.cancel(running)
    engine.dispose()


def test_a_cluster_that_shrank_below_a_pending_job_keeps_it(tmp_path: Path) -> None:
    """A restart on a smaller cluster (nodes gone) finds a pending job larger than
    every GPU left: the service starts, the job stays pending (accepted jobs are never
    lost) and can still be cancelled."""
    url = f"sqlite:///{tmp_path / 'ilucid.db'}"
    migrate(url)
    engine = make_engine(url)
    big = LocalBackend(tmp_path / "big", GpuInventory(4, "v100", 16.0, "virtual"))
    job = SchedulerService(engine, big, policy="fifo").submit(JobRequest(["sleep", "1"], gpus=4))
    small = DrainableHost(tmp_path / "small")  # 2 GPUs now
    service = SchedulerService(engine, small, policy="fifo")
    service.reconcile()
    assert job not in service.scheduler.jobs
    assert service.story(job)[-1].to_state == "pending"
    assert service.cancel(job) == "cancelled"
    engine.dispose()
