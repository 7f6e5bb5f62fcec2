"""The whole job model on the live path (issue 18): what a submission may ask for is
checked against this cluster with the field named, stored, handed to the core's
placer, and the start says why these GPUs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory, HostResources
from ilucid.service.api import build_app
from ilucid.service.auth import create_token
from ilucid.service.db import make_engine, migrate
from ilucid.service.scheduler_service import SchedulerService


class Api:
    def __init__(self, folder: Path) -> None:
        url = f"sqlite:///{folder / 'model.db'}"
        migrate(url)
        self.engine = make_engine(url)
        backend = LocalBackend(
            folder,
            GpuInventory(4, "v100", 16.0, "virtual"),
            profiler_gpus=1,
            host_resources=HostResources(16, 64.0),
        )
        self.service = SchedulerService(self.engine, backend, policy="fifo")
        self.client = TestClient(build_app(self.service), raise_server_exceptions=False)
        self.admin = {"Authorization": f"Bearer {create_token(self.engine, 'root', 'ops', True)}"}
        self.user = {"Authorization": f"Bearer {create_token(self.engine, 'ann', 'vision')}"}

    def submit(self, who: dict[str, str] | None = None, **fields: object) -> tuple[int, dict]:  # type: ignore[type-arg]
        body = {"command": ["sleep", "30"], **fields}
        response = self.client.post("/jobs", json=body, headers=who or self.user)
        return response.status_code, response.json()


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    made = Api(tmp_path)
    yield made
    for job in list(made.service.scheduler.jobs):
        made.service.cancel(job)
    made.engine.dispose()


@pytest.mark.parametrize(
    ("fields", "status", "sentence"),
    [
        # well-formed, but no node here could run it: a conflict with the cluster, 409
        ({"gpu_type": "h200"}, 409, "gpu_type: no node has GPU type h200 (types here: v100)"),
        (
            {"preferred_gpu_types": ["a100", "v100"]},
            409,
            "preferred_gpu_types: no node has GPU type a100 (types here: v100)",
        ),
        (
            {"gpu_memory_gb": 80},
            409,
            "gpu_memory_gb: no GPU has 80 GB (largest here: 16 GB)",
        ),
        (
            {"gpus": 4, "nodes": 2, "gpus_per_node": 2},
            409,
            "nodes: a gang of 2 x 2 GPUs needs 2 nodes with 2 GPUs each; 1 here",
        ),
        # the request itself is wrong, whatever the cluster: 422
        (
            {"gpus": 3, "nodes": 1, "gpus_per_node": 2},
            422,
            "gpus: 3 is not nodes x gpus_per_node (1 x 2)",
        ),
        ({"gpus": 2, "nodes": 2}, 422, "nodes: comes with gpus_per_node (a gang of nodes x GPUs)"),
        (
            {"gpus": 2, "gpu_milli": 500},
            422,
            "gpus: a share of a GPU (gpu_milli) is one GPU (got 2)",
        ),
    ],
)
def test_impossible_requests_are_refused_naming_the_field(
    api: Api, fields: dict[str, object], status: int, sentence: str
) -> None:
    answered, body = api.submit(**fields)
    assert answered == status, body
    assert body["detail"] == sentence


def test_out_of_range_values_are_refused_at_the_edge(api: Api) -> None:
    for fields in (
        {"gpu_milli": 0},
        {"gpu_milli": 1001},
        {"cpus": -1},
        {"gpu_memory_gb": 0},
        {"nodes": 0, "gpus_per_node": 1},
    ):
        status, body = api.submit(**fields)
        assert status == 422, (fields, body)


def test_only_an_admin_raises_priority(api: Api) -> None:
    status, body = api.submit(priority=5)
    assert status == 403 and body["detail"].startswith("priority: only an admin")
    assert api.submit(priority=-5)[0] == 201  # lowering one's own is fine
    assert api.submit(api.admin, priority=5)[0] == 201


def test_what_a_job_asked_for_is_stored_shown_and_given_to_the_placer(api: Api) -> None:
    status, body = api.submit(
        name="bert-serving",
        gpus=1,
        gpu_type="v100",
        preferred_gpu_types=["v100"],
        gpu_memory_gb=16,
        gpu_milli=500,
        cpus=2,
        memory_gb=8,
        **{"class": "inference"},
    )
    assert status == 201, body
    job = body["id"]
    shown = api.client.get(f"/jobs/{job}", headers=api.user).json()
    assert {k: shown[k] for k in ("name", "gpu_type", "gpu_memory_gb", "gpu_milli", "cpus")} == {
        "name": "bert-serving",
        "gpu_type": "v100",
        "gpu_memory_gb": 16.0,
        "gpu_milli": 500,
        "cpus": 2.0,
    }
    assert shown["preferred_gpu_types"] == ["v100"] and shown["memory_gb"] == 8.0
    spec = api.service.scheduler.jobs[job].spec
    assert (spec.gpu_type, spec.gpu_memory_gb, spec.gpu_milli) == ("v100", 16.0, 500)
    assert spec.preferred_gpu_types == ("v100",)


def test_a_gang_is_placed_whole_and_its_start_says_why_these_gpus(api: Api) -> None:
    status, body = api.submit(gpus=3, nodes=1, gpus_per_node=3)
    assert status == 201, body
    job = body["id"]
    assert api.service.scheduler.jobs[job].spec.shape == (3,)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        api.service.reconcile()
        if api.client.get(f"/jobs/{job}", headers=api.user).json()["state"] == "running":
            break
        time.sleep(0.05)
    explained = api.client.get(f"/jobs/{job}/explain", headers=api.user).json()
    start = next(d for d in explained["decisions"] if d["action"] == "start")
    host = api.service.cluster.nodes[0].name
    assert f"Why these GPUs ({host} x3): " in start["message"], start["message"]
    assert "-0 " not in start["message"]


def test_ilucid_submit_sends_the_same_fields(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    """``ilucid submit``'s flags become the API's fields (the real app answers)."""
    from ilucid.cli.app import build_parser
    from ilucid.cli.client import _submit

    args = build_parser().parse_args(
        [
            "submit",
            "--gpus",
            "2",
            "--nodes",
            "1",
            "--gpus-per-node",
            "2",
            "--gpu-type",
            "v100",
            "--prefer",
            "v100",
            "--gpu-memory",
            "16",
            "--cpus",
            "4",
            "--memory",
            "32",
            "--name",
            "resnet",
            "--",
            "sleep",
            "30",
        ]
    )
    api.client.headers.update(api.user)
    assert _submit(api.client, args) == 0
    job = capsys.readouterr().out.strip()
    shown = api.client.get(f"/jobs/{job}").json()
    asked = ("name", "gpus", "nodes", "gpus_per_node", "gpu_type", "gpu_memory_gb", "cpus")
    assert {k: shown[k] for k in asked} == {
        "name": "resnet",
        "gpus": 2,
        "nodes": 1,
        "gpus_per_node": 2,
        "gpu_type": "v100",
        "gpu_memory_gb": 16.0,
        "cpus": 4.0,
    }
    assert shown["preferred_gpu_types"] == ["v100"] and shown["memory_gb"] == 32.0
    refused = build_parser().parse_args(["submit", "--gpu-type", "h200", "--", "true"])
    with pytest.raises(ValueError, match=r"^409: gpu_type: no node has GPU type h200"):
        _submit(api.client, refused)


def test_ilucid_jobs_lists_gpus_only_for_running_jobs(
    api: Api, capsys: pytest.CaptureFixture[str]
) -> None:
    from ilucid.cli.app import build_parser
    from ilucid.cli.client import _jobs

    ended = api.submit(command=["true"])[1]["id"]
    running = api.submit(gpus=2)[1]["id"]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        api.service.reconcile()
        states = {j["id"]: j["state"] for j in api.client.get("/jobs", headers=api.user).json()}
        if states[ended] == "succeeded" and states[running] == "running":
            break
        time.sleep(0.05)
    api.client.headers.update(api.user)
    assert _jobs(api.client, build_parser().parse_args(["jobs"])) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[2:]}
    assert lines[running].split()[5] in ("0,1", "1,2", "0,2", "2,3", "1,3", "0,3")
    assert lines[ended].split()[:5] == [ended, "ann", "training", "1", "succeeded"]
    assert lines[ended].split()[5] == "true"  # the command follows at once: no GPUs shown


def test_an_opted_in_cluster_manager_job_keeps_its_type_and_gang(tmp_path: Path) -> None:
    """A job submitted to the cluster manager directly (a JobSet of 1 x 2 GPUs on
    v100, say) becomes the same job model as an API submission."""
    from sqlalchemy.orm import Session

    from ilucid.backends.base import ForeignJob
    from ilucid.service.db import JobRow
    from ilucid.service.job_store import spec_of

    class OptInHost(LocalBackend):
        def __init__(self, folder: Path) -> None:
            super().__init__(folder, GpuInventory(4, "v100", 16.0, "virtual"))
            self.offered = [
                ForeignJob("ns/trainer", "ann", 2, "training", "trainer", None, "v100", 1, 2),
                ForeignJob("ns/odd", "bob", 3, "training", "odd", None, None, 2, 2),
            ]
            self.claimed: dict[str, str] = {}

        def foreign_jobs(self) -> list[ForeignJob]:
            return [f for f in self.offered if f.key not in self.claimed]

        def claim(self, foreign: ForeignJob, job_id: str) -> None:
            self.claimed[foreign.key] = job_id

    url = f"sqlite:///{tmp_path / 'foreign.db'}"
    migrate(url)
    engine = make_engine(url)
    backend = OptInHost(tmp_path)
    service = SchedulerService(engine, backend, policy="fifo")
    with service.lock, Session(engine) as session:  # as the pass claims them
        service.reconciler.backend_queue.sync(session, backend.observe(), 4)
        trainer = spec_of(session.get(JobRow, backend.claimed["ns/trainer"]))
        odd = spec_of(session.get(JobRow, backend.claimed["ns/odd"]))
    assert (trainer.num_gpus, trainer.gpu_type, trainer.shape) == (2, "v100", (2,))
    assert service.scheduler.jobs[trainer.id].spec.shape == (2,)  # the core has it so
    assert (odd.num_gpus, odd.shape) == (3, None)  # 2 x 2 is not 3 GPUs: no gang shape
    engine.dispose()


def test_cpus_and_memory_are_booked_per_node_on_the_live_path(tmp_path: Path) -> None:
    """A host of 8 CPUs and 32 GB: a job stating more than any node has is refused naming
    the field; two jobs whose CPUs together exceed the host's do not run at once, and the
    second says why while GPUs are free."""
    url = f"sqlite:///{tmp_path / 'host.db'}"
    migrate(url)
    engine = make_engine(url)
    backend = LocalBackend(
        tmp_path,
        GpuInventory(4, "v100", 16.0, "virtual"),
        host_resources=HostResources(8, 32.0),
    )
    service = SchedulerService(engine, backend, policy="fifo")
    client = TestClient(build_app(service), raise_server_exceptions=False)
    who = {"Authorization": f"Bearer {create_token(engine, 'ann', 'vision')}"}

    def submit(**fields: object) -> Any:
        return client.post("/jobs", json={"command": ["sleep", "30"], **fields}, headers=who)

    refused = submit(cpus=16)
    assert refused.status_code == 409
    assert refused.json()["detail"] == "cpus: no node has 16 CPUs (most here: 8 CPUs)"
    first = submit(cpus=6, memory_gb=8).json()["id"]
    second = submit(cpus=4).json()["id"]
    for _ in range(3):
        service.reconcile()
    states = [client.get(f"/jobs/{j}", headers=who).json()["state"] for j in (first, second)]
    assert states == ["running", "pending"]
    why = client.get(f"/jobs/{second}/explain", headers=who).json()
    assert "lacks the free CPUs or memory" in str(why), why
    node = client.get("/nodes", headers=who).json()[0]
    assert (node["cpus"], node["free_cpus"], node["free_memory_gb"]) == (8, 2, 24)
    assert node["free_gpus"] == 3
    service.cancel(first)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        service.reconcile()
        if client.get(f"/jobs/{second}", headers=who).json()["state"] == "running":
            break
        time.sleep(0.1)
    assert client.get(f"/jobs/{second}", headers=who).json()["state"] == "running"
    service.cancel(second)
    engine.dispose()
