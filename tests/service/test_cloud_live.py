"""Issue 35, the live service's side of paid pools, on the in-memory backend: a job that
opted out waits on-prem and says why, one that may burst runs in the pool with the
reason's numbers, and a restart keeps the month's spending (the ledger in the database).
The real cluster managers' power calls are tested on Slurm (tests/backends/
test_slurm_burst.py) and the Kubernetes emulator."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from memory_backend import MemoryBackend

from ilucid.core import Cluster, Node, PoolSpec, SchedulerConfig
from ilucid.core.cloud import CloudBudget
from ilucid.service.api import build_app
from ilucid.service.auth import create_token
from ilucid.service.db import make_engine, migrate
from ilucid.service.scheduler_service import SchedulerService

CLUSTER = Cluster((Node("onprem", 4), Node("cloud0", 4, labels={"pool": "cloud"})))
CONFIG = SchedulerConfig(
    pools={"cloud": PoolSpec("cloud", 2.5, 300.0, idle_release_s=600.0)},
    value_of_wait=10.0,
    budgets={"vision": CloudBudget(limit=500.0)},
)


class Clock:
    def __init__(self) -> None:
        self.now = 1_796_601_600.0  # 2026-12-07 00:00 UTC

    def __call__(self) -> float:
        return self.now


def service_on(url: str, backend: MemoryBackend, clock: Clock) -> SchedulerService:
    return SchedulerService(make_engine(url), backend, policy="fifo", config=CONFIG, clock=clock)


def test_an_opted_out_job_waits_a_bursting_one_is_billed_and_a_restart_keeps_the_bill(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'ilucid.db'}"
    migrate(url)
    backend = MemoryBackend(CLUSTER)
    clock = Clock()
    service = service_on(url, backend, clock)
    client = TestClient(build_app(service))
    token = create_token(service.engine, "alice", "vision")
    alice = {"Authorization": f"Bearer {token}"}

    def submit(**body: object) -> str:
        made = client.post("/jobs", json={"command": ["train"], "gpus": 4, **body}, headers=alice)
        assert made.status_code == 201, made.text
        return str(made.json()["id"])

    hold = submit(estimate_s=36_000)
    service.reconcile()
    assert backend.jobs[hold].parts == (("onprem", 4),)
    stays = submit(estimate_s=600, cloud=False)
    service.reconcile()
    why = client.get(f"/jobs/{stays}/explain", headers=alice).json()["why"]
    assert "submitted with --no-cloud: on-prem only" in why, why
    assert stays not in backend.jobs

    service.cancel(stays)  # out of the way: FIFO serves its head first
    bursts = submit(estimate_s=3600)
    service.reconcile()
    assert backend.jobs[bursts].parts == (("cloud0", 4),)
    decisions = client.get(f"/jobs/{bursts}/explain", headers=alice).json()["decisions"]
    burst = [d for d in decisions if d["code"] == "Burst"]
    assert burst, decisions
    assert "tenant vision has 500 of 500 left this month" in burst[0]["message"]
    # an hour later it ends: 4 GPUs x 3,600 s x 2.5/GPU-h = 10 of the tenant's budget
    clock.now += 3600
    backend.end(bursts, 0)
    service.reconcile()
    cloud = service.reconciler.scheduler.cloud
    assert cloud is not None
    assert cloud.spent("vision", clock.now)[0] == pytest.approx(10.0)

    # a restart: the month's spending is read back, not forgotten
    restarted = service_on(url, backend, clock)
    again = restarted.reconciler.scheduler.cloud
    assert again is not None
    assert again.spent("vision", clock.now)[0] == pytest.approx(10.0)
    assert again.left("vision", clock.now)[0] == pytest.approx(490.0)
    assert again.tenant_cost == {"vision": pytest.approx(10.0)}  # all months, kept too
