"""A service that bursts to a paid pool, on a clock the test moves: 2 on-prem GPUs and one
4-GPU node labelled ``pool=cloud`` (2.50 per GPU-hour, 60 s start-up, released after
600 s idle), waiting valued at 100 per GPU-hour, tenant vision with a monthly budget.

The backend is the in-memory one, plus the power calls of a cluster manager's cloud
nodes (it records what it was asked), so the service brings the node up and releases
it as it would on Slurm. The reconcile loop is driven by hand: :meth:`CloudSite.advance`.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from memory_backend import MemoryBackend

from ilucid.backends.base import PowerState
from ilucid.core import Cluster, Node, PoolSpec, SchedulerConfig
from ilucid.core.cloud import CloudBudget
from ilucid.service.api import build_app
from ilucid.service.auth import create_token
from ilucid.service.db import make_engine, migrate
from ilucid.service.scheduler_service import SchedulerService

PRICE = 2.5
STARTUP_S = 60.0
IDLE_S = 600.0
CLOUD_GPUS = 4
BUDGET = 5000.0
#: mid-month, so that nothing here reaches the month's end
START = datetime.datetime(2026, 12, 10, tzinfo=datetime.UTC).timestamp()


class PoweredMemoryBackend(MemoryBackend):
    """The memory backend with on-demand nodes: ``asked`` lists each power call."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(cluster)
        self.asked: list[tuple[str, str]] = []
        self.power = {n.name: PowerState.OFF for n in cluster.nodes if "pool" in n.labels}

    def power_states(self) -> dict[str, PowerState]:
        return dict(self.power)

    def power_up(self, node: str) -> None:
        self.asked.append(("up", node))
        self.power[node] = PowerState.ON

    def power_down(self, node: str) -> None:
        self.asked.append(("down", node))
        self.power[node] = PowerState.OFF


class CloudSite:
    def __init__(
        self, root: Path, budgets: dict[str, CloudBudget] | None = None, paid: bool = True
    ) -> None:
        """``paid=False``: the same site without the paid pool (no [pools] table)."""
        url = f"sqlite:///{root / 'ilucid.db'}"
        migrate(url)
        self.engine = make_engine(url)
        self.now = START
        cluster = Cluster((Node("onprem", 2), Node("cloud0", CLOUD_GPUS, labels={"pool": "cloud"})))
        self.backend = PoweredMemoryBackend(cluster)
        pool = PoolSpec("cloud", PRICE, startup_s=STARTUP_S, idle_release_s=IDLE_S)
        config = SchedulerConfig(
            pools={"cloud": pool},
            value_of_wait=100.0,
            budgets=budgets if budgets is not None else {"vision": CloudBudget(limit=BUDGET)},
        )
        if not paid:
            config = SchedulerConfig()
        self.service = SchedulerService(
            self.engine, self.backend, policy="ilucid", config=config, clock=lambda: self.now
        )
        self.admin = create_token(self.engine, "root", "ops", admin=True)
        self.alice = create_token(self.engine, "alice", "vision")
        self.bob = create_token(self.engine, "bob", "nlp")
        self.client = TestClient(build_app(self.service, metrics_public=True))

    def headers(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    def submit(self, token: str, gpus: int = 2, estimate_s: float = 3600.0) -> str:
        body = {"command": ["true"], "gpus": gpus, "estimate_s": estimate_s}
        made = self.client.post("/jobs", json=body, headers=self.headers(token))
        assert made.status_code == 201, made.text
        return str(made.json()["id"])

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.service.reconcile()

    def burst(self) -> tuple[str, str]:
        """Alice's first job fills on-prem; her second would wait an hour (worth 100 x 2
        GPUs x 1 h = 200 > 2.50 x 2 GPUs x 1 h + start-up) and bursts at ``self.now``."""
        onprem = self.submit(self.alice)
        self.service.reconcile()
        cloud = self.submit(self.alice)
        self.service.reconcile()
        runs = self.service.scheduler.cloud.runs  # type: ignore[union-attr]
        assert list(runs) == [cloud], runs
        assert self.job(onprem)["state"] == self.job(cloud)["state"] == "running"
        return onprem, cloud

    def job(self, job_id: str) -> dict[str, Any]:
        got = self.client.get(f"/jobs/{job_id}", headers=self.headers(self.admin))
        assert got.status_code == 200, got.text
        result: dict[str, Any] = got.json()
        return result

    def quotas(self, token: str) -> dict[str, Any]:
        got = self.client.get("/views/quotas", headers=self.headers(token))
        assert got.status_code == 200, got.text
        result: dict[str, Any] = got.json()
        return result
