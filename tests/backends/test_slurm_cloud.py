"""Issue 35 on a real Slurm 22.05: cloud nodes (``State=CLOUD Feature=pool_cloud``) under
Slurm's power saving, whose ResumeProgram starts a local slurmd (standing in for a cloud
API) and whose SuspendProgram stops it (see conftest's ``slurm_cloud_nodes``). ilucid sees
them whatever their power state, powers them up and down through ``scontrol``, and places
jobs there as on any node; never powering one down under a job."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from slurm_harness import SlurmCluster, slurm_job

from ilucid.backends.base import Capabilities, ObservedJob, PowerState, ProcessState
from ilucid.backends.slurm import SlurmBackend

pytestmark = pytest.mark.xdist_group("slurm")

CLOUD_NODES = ("cloud1/a100", "cloud1/v100", "cloud2/a100", "cloud2/v100")
T = TypeVar("T")


def until(what: str, probe: Callable[[], T | None], within_s: float = 120) -> T:
    """``probe()`` once it returns something (polled), else a failure naming ``what``."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        seen = probe()
        if seen is not None:
            return seen
        time.sleep(0.3)
    raise AssertionError(f"{what}: not within {within_s:g} s")


def scontrol(cluster: SlurmCluster, *args: str) -> None:
    subprocess.run(["scontrol", *args], env=cluster.env(), check=True, capture_output=True)


def power_of(backend: SlurmBackend, node: str) -> PowerState:
    backend.observe()
    return backend.power_states()[node]


def test_powered_down_cloud_nodes_are_in_the_cluster_off_labelled_and_not_excluded(
    slurm_cloud_nodes: SlurmCluster, tmp_path: Path
) -> None:
    backend = SlurmBackend(tmp_path / "data", slurm_conf=slurm_cloud_nodes.conf)
    assert Capabilities.of(backend).powers is backend
    before = len(slurm_cloud_nodes.power_log())
    cluster = backend.observe().cluster
    nodes = {node.name: node for node in cluster.nodes}
    assert set(nodes) == {"node1/a100", "node1/v100", *CLOUD_NODES}
    for name in CLOUD_NODES:
        assert nodes[name].labels["pool"] == "cloud", nodes[name]
        assert nodes[name].num_gpus == 4
    assert "pool" not in nodes["node1/a100"].labels  # on-prem: the core's main pool
    assert backend.power_states() == dict.fromkeys(CLOUD_NODES, PowerState.OFF)
    assert backend.excluded_nodes() == {}  # off is available on demand, not excluded
    # ilucid only looked (the session's cluster may carry earlier tests' lines)
    assert slurm_cloud_nodes.power_log()[before:] == []
    with pytest.raises(ValueError, match="node1/a100: not a cloud node"):
        backend.power_down("node1/a100")

    # a cloud node really taken out of service still is excluded, with Slurm's reason
    scontrol(slurm_cloud_nodes, "update", "NodeName=cloud2", "State=DRAIN", "Reason=bad image")
    try:
        backend.observe()
        assert backend.excluded_nodes() == {
            "cloud2/a100": "drained: bad image",
            "cloud2/v100": "drained: bad image",
        }
        assert backend.power_states()["cloud2/a100"] is PowerState.OFF
    finally:
        scontrol(slurm_cloud_nodes, "update", "NodeName=cloud2", "State=RESUME")
    backend.observe()
    assert backend.excluded_nodes() == {}
    assert backend.power_states() == dict.fromkeys(CLOUD_NODES, PowerState.OFF)


def test_power_up_runs_slurms_resume_program_and_power_down_its_suspend_program(
    slurm_cloud_nodes: SlurmCluster, tmp_path: Path
) -> None:
    backend = SlurmBackend(tmp_path / "data", slurm_conf=slurm_cloud_nodes.conf)
    backend.observe()
    before = len(slurm_cloud_nodes.power_log())
    backend.power_up("cloud2/v100")  # either half names the node
    seen: list[tuple[PowerState, dict[str, str]]] = []

    def up() -> bool | None:
        backend.observe()
        seen.append((backend.power_states()["cloud2/a100"], backend.excluded_nodes()))
        return True if seen[-1][0] is PowerState.ON else None

    until("cloud2 up", up)
    assert any(line.endswith(" resume cloud2") for line in slurm_cloud_nodes.power_log()[before:])
    assert slurm_cloud_nodes.slurmd_running("cloud2")
    # on its way up it is starting, and never excluded (Slurm says "not responding" then)
    assert {state for state, _ in seen} <= {PowerState.OFF, PowerState.STARTING, PowerState.ON}
    assert all(excluded == {} for _, excluded in seen), seen
    assert backend.power_states()["cloud2/v100"] is PowerState.ON

    backend.power_down("cloud2")  # Slurm's own name works too
    until(
        "cloud2 off", lambda: True if power_of(backend, "cloud2/a100") is PowerState.OFF else None
    )
    assert any(line.endswith(" suspend cloud2") for line in slurm_cloud_nodes.power_log()[before:])
    assert not slurm_cloud_nodes.slurmd_running("cloud2")
    assert backend.excluded_nodes() == {}


def test_a_job_placed_on_a_node_powering_up_runs_there_and_holds_off_its_power_down(
    slurm_cloud_nodes: SlurmCluster, slurm_data: Path, slurm_account: str, job_scratch: Path
) -> None:
    backend = SlurmBackend(slurm_data, slurm_conf=slurm_cloud_nodes.conf)
    backend.observe()
    marks = job_scratch / "ran-on"  # the job runs as slurm_account: where it may write
    command = ["sh", "-c", f'echo "$SLURMD_NODENAME" > {marks}; sleep 4']
    backend.enqueue("burst1", command, 2, run_as=slurm_account)
    before = len(slurm_cloud_nodes.power_log())
    backend.power_up("cloud1/a100")
    backend.observe()
    assert backend.power_states()["cloud1/a100"] is PowerState.STARTING
    backend.start("burst1", command, 2, placement=[("cloud1/a100", 2)], run_as=slurm_account)

    # Slurm holds it CONFIGURING until the node registers (and its next timer pass, up
    # to 30 s): allocated there, so RUNNING, never LOST
    [slurm_id] = [job.job_id for job in backend._jobs["burst1"]]
    states: list[tuple[str, ObservedJob | None, PowerState]] = []

    def started() -> bool | None:
        job = backend.observe().jobs.get("burst1")
        slurm_state = str(slurm_job(slurm_cloud_nodes, slurm_id)["job_state"])
        states.append((slurm_state, job, backend.power_states()["cloud1/a100"]))
        assert backend.excluded_nodes() == {}, (backend.excluded_nodes(), states[-1])
        return True if slurm_state == "RUNNING" else None

    until("burst1 running in Slurm", started)
    configuring = [job for slurm_state, job, _ in states if slurm_state == "CONFIGURING"]
    assert configuring, states  # it was seen while Slurm was still configuring it
    for job in configuring:
        assert job is not None and job.state is ProcessState.RUNNING, states
        assert job.parts == (("cloud1/a100", 2),), job
    assert all(job is None or job.state is not ProcessState.LOST for _, job, _ in states)
    assert any(line.endswith(" resume cloud1") for line in slurm_cloud_nodes.power_log()[before:])

    # never under a job: refused, naming the node and the job, and nothing is killed
    with pytest.raises(ValueError, match=r"power down cloud1/a100: .*job burst1"):
        backend.power_down("cloud1/a100")
    assert not any(" suspend cloud1" in line for line in slurm_cloud_nodes.power_log()[before:])

    def ended() -> ObservedJob | None:
        job = backend.observe().jobs.get("burst1")
        return job if job is not None and job.state is ProcessState.EXITED else None

    done = until("burst1 ended", ended)
    assert done.exit_code == 0, done
    assert marks.read_text().split() == ["cloud1"]
    assert backend.power_states()["cloud1/a100"] is PowerState.ON

    # the job is over: released, Slurm's SuspendProgram stops it
    backend.power_down("cloud1/a100")
    until(
        "cloud1 off", lambda: True if power_of(backend, "cloud1/v100") is PowerState.OFF else None
    )
    assert any(line.endswith(" suspend cloud1") for line in slurm_cloud_nodes.power_log()[before:])
    assert not slurm_cloud_nodes.slurmd_running("cloud1")
