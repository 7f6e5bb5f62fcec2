"""Issue 34, first-day point 1: a half-GPU job's explanation read ``shared GPU 0`` while
the local backend had launched it on GPU 1 (GPU 0 held a whole-GPU job). The placer's
share is a label of its books; which physical GPU holds it is the backend's choice, so
the story names the GPU where the backend launched it, and nothing names another."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.testclient import TestClient

from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory
from ilucid.service.api import build_app
from ilucid.service.auth import create_token
from ilucid.service.db import make_engine, migrate
from ilucid.service.scheduler_service import SchedulerService


def test_a_half_gpu_job_is_explained_on_the_gpu_it_was_launched_on(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'share.db'}"
    migrate(url)
    engine = make_engine(url)
    backend = LocalBackend(tmp_path, GpuInventory(2, "virtual", 0.0, "virtual"))
    service = SchedulerService(engine, backend, policy="fifo")
    client = TestClient(build_app(service), raise_server_exceptions=False)
    client.headers["Authorization"] = f"Bearer {create_token(engine, 'ann', 'vision')}"
    try:
        body = {"command": ["sleep", "30"], "gpus": 1}
        whole = client.post("/jobs", json=body).json()["id"]
        service.reconcile()
        half = client.post("/jobs", json={**body, "gpu_milli": 500}).json()["id"]
        service.reconcile()
        on = {j["id"]: j["gpu_indices"] for j in client.get("/jobs").json()}
        assert on[whole] == "0" and on[half] == "1", on
        result = client.get(f"/jobs/{half}/explain").json()
        said = "\n".join(
            [result["why"]]
            + [d["message"] for d in result["decisions"]]
            + [line["text"] for line in result["story"]]
        )
        assert "on GPU 1 of vm, shared: 500 of its 1000 milli-GPUs" in said, said
        assert not re.search(r"\([^()]*\(", said), said  # no nested parentheses either
        named = set(re.findall(r"\bGPUs? (\d+)", said))
        assert named == {"1"}, said  # no other GPU index anywhere in its story
    finally:
        for job in list(service.scheduler.jobs):
            service.cancel(job)
        engine.dispose()
