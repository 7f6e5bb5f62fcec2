"""Issue 18's acceptance on a real Slurm 22.05 with typed GRES: two slurmd, node1 with
4 a100 and node2 with 4 v100 (``Gres=gpu:a100:4`` / ``gpu:v100:4``, gres.conf ``Type=``;
see conftest's ``slurm_typed_nodes``). Jobs go through the service's API (``POST
/jobs``) and the service's passes; what Slurm really ran is read back from Slurm
(squeue's GRES) and from the job itself (``$SLURMD_NODENAME``, per srun task)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from slurm_harness import SlurmCluster

from ilucid.backends.slurm import SlurmBackend
from ilucid.backends.slurm_parse import parse_jobs
from ilucid.service.api import build_app
from ilucid.service.auth import create_token
from ilucid.service.db import make_engine, migrate
from ilucid.service.scheduler_service import SchedulerService

pytestmark = pytest.mark.xdist_group("slurm")

#: each task records where it runs, then waits for the test to let it end
RECORD = (
    'echo "$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES" >> "{out}/$ILUCID_JOB_ID";'
    ' while [ ! -e "{out}/done" ]; do sleep 0.2; done'
)


class Live:
    """A service on the real Slurm backend, driven pass by pass through its API."""

    def __init__(
        self, cluster: SlurmCluster, folder: Path, data: Path, out: Path, account: str
    ) -> None:
        # run as root, the jobs run as ``account``: their data and output folders are
        # where it reaches (not tmp_path)
        self.cluster, self.out = cluster, out
        url = f"sqlite:///{folder / 'ilucid.db'}"
        migrate(url)
        self.engine = make_engine(url)
        self.backend = SlurmBackend(data, slurm_conf=cluster.conf)
        self.service = SchedulerService(self.engine, self.backend, policy="fifo")
        self.client = TestClient(build_app(self.service))
        token = create_token(self.engine, "root", "ops", True, account)
        self.headers = {"Authorization": f"Bearer {token}"}

    def command(self, tasks_per_node: bool = False) -> list[str]:
        command = ["sh", "-c", RECORD.format(out=self.out)]
        return ["srun", "--ntasks-per-node=1", *command] if tasks_per_node else command

    def submit(self, gang: bool = False, **fields: Any) -> str:
        body = {"command": self.command(gang), **fields}
        response = self.client.post("/jobs", json=body, headers=self.headers)
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    def state(self, job_id: str) -> str:
        return str(self.client.get(f"/jobs/{job_id}", headers=self.headers).json()["state"])

    def until_running(self, job_id: str, timeout: float = 60) -> tuple[tuple[str, int], ...]:
        """The job's parts as Slurm reports them once it runs there."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.service.reconcile()
            seen = self.backend.observe().jobs.get(job_id)
            if self.state(job_id) == "running" and seen is not None and seen.parts:
                return seen.parts
            time.sleep(0.3)
        raise AssertionError(f"{job_id} never ran: {self.state(job_id)}, {self.explain(job_id)}")

    def passes(self, count: int) -> None:
        for _ in range(count):
            self.service.reconcile()
            time.sleep(0.2)

    def explain(self, job_id: str) -> str:
        return str(self.client.get(f"/jobs/{job_id}/explain", headers=self.headers).json())

    def nodes(self) -> dict[str, dict[str, Any]]:
        shown = self.client.get("/nodes", headers=self.headers).json()
        return {node["name"]: node for node in shown}

    def slurm_gres(self, job_id: str) -> tuple[str, tuple[tuple[str | None, int], ...]]:
        """Slurm's own record of the job: its node list and (GPU type, count) per node."""
        tag = f"{self.backend.prefix}{job_id}"
        jobs = parse_jobs(json.loads(self.cluster.squeue()))
        [job] = [j for j in jobs if j.name == tag and j.state == "RUNNING"]
        return job.nodes, tuple((gpu_type, len(indices)) for gpu_type, indices in job.gres)

    def ran_on(self, job_id: str, tasks: int = 1) -> list[str]:
        """Where the job's tasks say they run ($SLURMD_NODENAME), once all have said."""
        path = self.out / job_id
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            lines = path.read_text().splitlines() if path.exists() else []
            if len(lines) >= tasks:
                return sorted(line.split()[0] for line in lines)
            time.sleep(0.2)
        raise AssertionError(f"{job_id}: its tasks never said where they run")

    def close(self) -> None:
        (self.out / "done").touch()
        for job_id in list(self.service.scheduler.jobs):
            self.service.cancel(job_id)
        self.passes(2)
        ours = [
            str(j.job_id)
            for j in parse_jobs(json.loads(self.cluster.squeue()))
            if j.name.startswith(self.backend.prefix) and j.state in ("PENDING", "RUNNING")
        ]
        if ours:
            subprocess.run(["scancel", *ours], env=self.cluster.env(), check=False)
        self.engine.dispose()


@pytest.fixture
def live(
    slurm_typed_nodes: SlurmCluster,
    tmp_path: Path,
    slurm_data: Path,
    job_scratch: Path,
    slurm_account: str,
) -> Iterator[Live]:
    made = Live(slurm_typed_nodes, tmp_path, slurm_data, job_scratch, slurm_account)
    yield made
    made.close()


def scontrol(cluster: SlurmCluster, *args: str) -> None:
    subprocess.run(["scontrol", *args], env=cluster.env(), check=True, capture_output=True)


def test_the_cluster_is_two_typed_nodes(live: Live) -> None:
    shown = live.nodes()
    assert {name: (n["gpus"], n["gpu_type"]) for name, n in shown.items()} == {
        "node1": (4, "a100"),
        "node2": (4, "v100"),
    }


def test_a_job_asking_a100_lands_on_the_a100_nodes_gpus(live: Live) -> None:
    v100 = live.submit(gpus=2, gpu_type="v100")  # first, so fifo would take node1 for it
    a100 = live.submit(gpus=2, gpu_type="a100")
    assert live.until_running(v100) == (("node2", 2),)
    assert live.until_running(a100) == (("node1", 2),)
    # Slurm itself gave the job typed GRES on the node: gpu:a100:2 on node1
    assert live.slurm_gres(a100) == ("node1", (("a100", 2),))
    assert live.slurm_gres(v100) == ("node2", (("v100", 2),))
    assert live.ran_on(a100) == ["node1"] and live.ran_on(v100) == ["node2"]
    # 4 GPUs are free (2 a100, 2 v100) but only 2 of the type asked: it waits for a100
    more = live.submit(gpus=3, gpu_type="a100")
    live.passes(5)
    assert live.state(more) == "pending"
    assert "a100" in live.explain(more).lower(), live.explain(more)


def test_a_gang_of_2_nodes_x_4_gpus_gets_both_nodes(live: Live) -> None:
    gang = live.submit(gang=True, gpus=8, nodes=2, gpus_per_node=4)
    assert sorted(live.until_running(gang)) == [("node1", 4), ("node2", 4)]
    nodes, gres = live.slurm_gres(gang)
    assert nodes == "node[1-2]" and sorted(gres) == [("a100", 4), ("v100", 4)]
    assert live.ran_on(gang, tasks=2) == ["node1", "node2"]  # a task on each node
    assert all(node["free_gpus"] == 0 for node in live.nodes().values())


def test_drain_takes_the_node_out_of_placement_and_resume_brings_it_back(live: Live) -> None:
    busy = live.submit(gpus=3, gpu_type="a100")  # node1 keeps 1 GPU free, node2 all 4
    assert live.until_running(busy) == (("node1", 3),)
    assert live.nodes()["node2"]["excluded"] is None
    scontrol(live.cluster, "update", "nodename=node2", "state=drain", "reason=fan failure")
    try:
        live.passes(1)  # the very next pass
        shown = live.nodes()
        assert shown["node2"]["excluded"] == "drained: fan failure"
        assert shown["node1"]["excluded"] is None
        two = live.submit(gpus=2)  # would fit only on node2's 4 free GPUs
        v100 = live.submit(gpus=1, gpu_type="v100")  # only node2 has v100
        live.passes(5)
        for job_id in (two, v100):  # not placed by the core, not only held by Slurm
            assert live.state(job_id) == "pending"
            assert live.service.scheduler.jobs[job_id].status.value == "pending"
        assert live.nodes()["node2"]["free_gpus"] == 4
    finally:
        scontrol(live.cluster, "update", "nodename=node2", "state=resume")
    assert live.until_running(two) == (("node2", 2),)
    assert live.until_running(v100) == (("node2", 1),)
    assert live.nodes()["node2"]["excluded"] is None


def test_a_share_of_one_gpu_is_refused_naming_the_field(live: Live) -> None:
    """Slurm hands out whole GPUs here (no shards configured): a fraction is refused at
    submission rather than queued forever."""
    body = {"command": live.command(), "gpus": 1, "gpu_milli": 500}
    response = live.client.post("/jobs", json=body, headers=live.headers)
    assert response.status_code == 409, response.text
    assert response.json()["detail"] == (
        "gpu_milli: the slurm backend gives jobs whole GPUs only"
        " (leave gpu_milli out to ask for one whole GPU)"
    )


def slurm_node(cluster: SlurmCluster, name: str) -> dict[str, str]:
    """Slurm's own view of a node (``scontrol show node``): CPUTot, RealMemory (MiB)..."""
    shown = subprocess.run(
        ["scontrol", "show", "node", name, "--oneliner"],
        env=cluster.env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(word.split("=", 1) for word in shown.split() if "=" in word)


def slurm_job(live: Live, job_id: str) -> tuple[dict[str, Any], str]:
    """The running Slurm job standing for ``job_id``: squeue's JSON record, and
    ``scontrol show job -d`` (its per-node allocation lines included)."""
    tag = f"{live.backend.prefix}{job_id}"
    jobs = json.loads(live.cluster.squeue())["jobs"]
    [raw] = [j for j in jobs if j["name"] == tag and j["job_state"] == "RUNNING"]
    shown = subprocess.run(
        ["scontrol", "show", "job", "-d", str(raw["job_id"])],
        env=live.cluster.env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return raw, shown


def cpus_per_node(shown: str) -> dict[str, int]:
    """Per node of a running job, how many CPUs Slurm allocated it (``CPU_IDs=0-5,8``)."""
    counted = {}
    for line in shown.splitlines():
        words = dict(w.split("=", 1) for w in line.split() if "=" in w)
        if "CPU_IDs" in words and "Nodes" in words:
            total = 0
            for piece in words["CPU_IDs"].split(","):
                first, _, last = piece.partition("-")
                total += int(last or first) - int(first) + 1
            counted[words["Nodes"]] = total
    return counted


def test_nodes_offer_the_cpus_and_memory_slurm_says_they_have(live: Live) -> None:
    shown = live.nodes()
    for name in ("node1", "node2"):
        said = slurm_node(live.cluster, name)
        cpus, memory_gb = float(said["CPUTot"]), int(said["RealMemory"]) / 1024
        assert (shown[name]["cpus"], shown[name]["memory_gb"]) == (cpus, memory_gb)
        assert (shown[name]["free_cpus"], shown[name]["free_memory_gb"]) == (cpus, memory_gb)


def test_a_job_gets_from_slurm_the_cpus_and_memory_ilucid_booked(live: Live) -> None:
    cpus = float(slurm_node(live.cluster, "node1")["CPUTot"])
    memory_gb = int(slurm_node(live.cluster, "node1")["RealMemory"]) / 1024
    job = live.submit(gpus=2, gpu_type="a100", cpus=cpus - 4, memory_gb=3)
    assert live.until_running(job) == (("node1", 2),)
    raw, shown = slurm_job(live, job)
    assert (raw["minimum_cpus_per_node"], raw["memory_per_node"]) == (cpus - 4, 3 * 1024)
    assert f"CPUs/Task={cpus - 4:g}" in shown and "MinMemoryNode=3G" in shown, shown
    assert cpus_per_node(shown) == {"node1": cpus - 4}  # what Slurm allocated on the node
    node1 = live.nodes()["node1"]
    assert (node1["free_cpus"], node1["free_memory_gb"]) == (4, memory_gb - 3)
    # 2 a100 GPUs are free on node1, but not 8 CPUs: ilucid holds it back (Slurm would too)
    more = live.submit(gpus=1, gpu_type="a100", cpus=8)
    live.passes(4)
    assert live.state(more) == "pending"
    assert "the most free on one of them: 4 CPUs" in live.explain(more), live.explain(more)


def test_a_gang_gets_its_cpus_and_memory_on_each_node(live: Live) -> None:
    gang = live.submit(gang=True, gpus=8, nodes=2, gpus_per_node=4, cpus=6, memory_gb=2)
    assert sorted(live.until_running(gang)) == [("node1", 4), ("node2", 4)]
    raw, shown = slurm_job(live, gang)
    assert cpus_per_node(shown) == {"node1": 6, "node2": 6}, shown
    assert raw["memory_per_node"] == 2 * 1024 and "MinMemoryNode=2G" in shown
    assert live.ran_on(gang, tasks=2) == ["node1", "node2"]  # srun's tasks fit those CPUs


def test_a_need_no_node_meets_is_refused_naming_the_field(live: Live) -> None:
    said = slurm_node(live.cluster, "node1")
    cpus, memory_gb = int(said["CPUTot"]), int(said["RealMemory"]) / 1024
    for field, need, detail in (
        ("cpus", cpus + 1, f"cpus: no node has {cpus + 1} CPUs (most here: {cpus} CPUs)"),
        (
            "memory_gb",
            16,
            f"memory_gb: no node has 16 GB (most here: {memory_gb:g} GB)",
        ),
    ):
        body = {"command": live.command(), "gpus": 1, field: need}
        response = live.client.post("/jobs", json=body, headers=live.headers)
        assert response.status_code == 409, response.text
        assert response.json()["detail"] == detail
