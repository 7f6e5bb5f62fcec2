"""Issue 34, first-day point 1: ``ilucid nodes`` shows what jobs book on a node besides
GPUs. A 0-GPU job waited for CPUs a ``--cpus 2`` job held, and the table showed no CPUs
or memory at all, so nothing on screen said why."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory, HostResources
from ilucid.cli.app import build_parser
from ilucid.cli.client import _nodes
from ilucid.service.api import build_app
from ilucid.service.auth import create_token
from ilucid.service.db import make_engine, migrate
from ilucid.service.scheduler_service import SchedulerService


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[SchedulerService, TestClient]]:
    url = f"sqlite:///{tmp_path / 'nodes.db'}"
    migrate(url)
    engine = make_engine(url)
    backend = LocalBackend(
        tmp_path, GpuInventory(2, "virtual", 0.0, "virtual"), host_resources=HostResources(2, 8.0)
    )
    service = SchedulerService(engine, backend, policy="fifo")
    client = TestClient(build_app(service), raise_server_exceptions=False)
    client.headers["Authorization"] = f"Bearer {create_token(engine, 'root', 'ops', True)}"
    yield service, client
    for job in list(service.scheduler.jobs):
        service.cancel(job)
    engine.dispose()


def test_nodes_shows_free_and_total_cpus_and_memory(
    served: tuple[SchedulerService, TestClient], capsys: pytest.CaptureFixture[str]
) -> None:
    service, client = served
    body = {"command": ["sleep", "30"], "gpus": 1, "cpus": 2, "memory_gb": 3}
    assert client.post("/jobs", json=body).status_code == 201
    service.reconcile()  # the core books the job's CPUs and memory on the node
    assert _nodes(client, build_parser().parse_args(["nodes"])) == 0
    header, _, row = capsys.readouterr().out.splitlines()[:3]
    columns = [c.strip() for c in header.split("  ") if c.strip()]
    assert columns[:7] == [
        "NODE",
        "TYPE",
        "GPUS",
        "FREE",
        "GPU MEMORY",
        "FREE CPUS",
        "FREE MEMORY",
    ], header
    cells = row.split()
    assert cells[:5] == [cells[0], "virtual", "2", "1", "unknown"], row
    assert cells[5] == "0/2", row  # both CPUs booked: why a job stating CPUs waits
    assert cells[6:8] == ["5/8", "GB"], row
