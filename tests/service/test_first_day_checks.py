"""Issue 34, first-day point 2: submission checks that agree with each other.

Found live on `ilucid serve --gpus 2` (virtual GPUs, whose memory nobody reports):
`--gpu-type a100` was refused at once, but `--gpu-memory 80` was taken and then
ignored; and a gang refusal spoke of "the asked type" when no type was asked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory, HostResources
from ilucid.service.api import build_app
from ilucid.service.auth import create_token
from ilucid.service.db import make_engine, migrate
from ilucid.service.scheduler_service import SchedulerService


class Virtual:
    """The live service on 2 virtual GPUs that report no memory (as `serve --gpus 2`)."""

    def __init__(self, folder: Path) -> None:
        url = f"sqlite:///{folder / 'checks.db'}"
        migrate(url)
        self.engine = make_engine(url)
        backend = LocalBackend(
            folder, GpuInventory(2, "virtual", 0.0, "virtual"), host_resources=HostResources(2, 8.0)
        )
        self.service = SchedulerService(self.engine, backend, policy="fifo")
        self.client = TestClient(build_app(self.service), raise_server_exceptions=False)
        self.user = {"Authorization": f"Bearer {create_token(self.engine, 'ann', 'vision')}"}

    def submit(self, **fields: object) -> tuple[int, dict[str, object]]:
        body = {"command": ["sleep", "30"], **fields}
        response = self.client.post("/jobs", json=body, headers=self.user)
        return response.status_code, response.json()


@pytest.fixture
def virtual(tmp_path: Path) -> Iterator[Virtual]:
    made = Virtual(tmp_path)
    yield made
    for job in list(made.service.scheduler.jobs):
        made.service.cancel(job)
    made.engine.dispose()


def test_gpu_memory_on_gpus_that_report_none_is_refused_naming_the_field(
    virtual: Virtual,
) -> None:
    status, body = virtual.submit(gpu_memory_gb=80)
    assert status == 409, body  # well-formed; this cluster cannot honour it
    detail = str(body["detail"])
    assert detail.startswith("gpu_memory_gb: "), detail
    assert "memory unknown" in detail and "virtual" in detail and "80 GB" in detail, detail
    # as the type check is: both refuse at once what the cluster cannot honour
    status, body = virtual.submit(gpu_type="a100")
    assert status == 409 and str(body["detail"]).startswith("gpu_type: "), body
    assert virtual.service.scheduler.jobs == {}


def test_a_gang_refusal_names_no_type_when_none_was_asked(virtual: Virtual) -> None:
    status, body = virtual.submit(gpus=2, nodes=2, gpus_per_node=1)
    assert status == 409, body
    detail = str(body["detail"])
    assert detail == "nodes: a gang of 2 x 1 GPUs needs 2 nodes with 1 GPUs each; 1 here", detail
    assert "asked type" not in detail
