"""Issue 18 on a real Slurm 22.05 (two slurmd, 4 a100 + 4 v100 each; see conftest): the
inventory follows the cluster on every pass, and a job on a node that goes down is
reported and held again, not lost."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from slurm_harness import SlurmCluster, slurm_job, wait_for

from ilucid.backends.base import Capabilities, ProcessState
from ilucid.backends.slurm import SlurmBackend

pytestmark = pytest.mark.xdist_group("slurm")


def scontrol(cluster: SlurmCluster, *args: str, check: bool = True) -> None:
    subprocess.run(["scontrol", *args], env=cluster.env(), check=check, capture_output=True)


def test_a_drained_node_is_excluded_with_slurms_reason_and_resuming_brings_it_back(
    slurm_two_nodes: SlurmCluster, tmp_path: Path
) -> None:
    backend = SlurmBackend(tmp_path / "data", slurm_conf=slurm_two_nodes.conf)
    assert Capabilities.of(backend).excludes is backend
    before = backend.observe().cluster
    assert backend.excluded_nodes() == {}
    scontrol(slurm_two_nodes, "update", "nodename=node2", "state=drain", "reason=disk swap")
    try:
        seen = backend.observe()  # the very next pass
        # "draining" while a job of an earlier test on this shared cluster still ends there
        excluded = backend.excluded_nodes()
        assert set(excluded) == {"node2/a100", "node2/v100"}, excluded
        assert set(excluded.values()) <= {"drained: disk swap", "draining: disk swap"}, excluded
        assert len(set(excluded.values())) == 1, excluded
        # still in the cluster: jobs there stay accounted where they run
        assert seen.cluster == before
    finally:
        scontrol(slurm_two_nodes, "update", "nodename=node2", "state=resume")
    # Slurm says "not responding" until it has pinged the resumed node (well under 1 s)
    said = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        backend.observe()
        said.append(backend.excluded_nodes())
        if not said[-1]:
            break
        time.sleep(0.2)
    assert said[-1] == {}, said
    assert all(set(s) == {"node2/a100", "node2/v100"} for s in said[:-1]), said


def test_a_job_whose_node_goes_down_is_reported_held_and_restarts_only_when_ilucid_says(
    slurm_two_nodes: SlurmCluster, slurm_data: Path, slurm_account: str, job_scratch: Path
) -> None:
    backend = SlurmBackend(slurm_data, slurm_conf=slurm_two_nodes.conf)
    backend.observe()
    marks = job_scratch / "runs"  # the job runs as slurm_account: where it may write
    command = ["sh", "-c", f'echo "$SLURMD_NODENAME" >> {marks}; sleep 120']
    backend.enqueue("lost1", command, 2, run_as=slurm_account)
    backend.observe()
    backend.start("lost1", command, 2, placement=[("node2/a100", 2)], run_as=slurm_account)
    running = wait_for(backend, "lost1", ProcessState.RUNNING)
    deadline = time.monotonic() + 30
    while not running.parts and time.monotonic() < deadline:
        running = wait_for(backend, "lost1", ProcessState.RUNNING)
    assert running.parts == (("node2/a100", 2),)
    while not marks.exists() and time.monotonic() < deadline:  # its command runs there
        time.sleep(0.1)
    assert marks.read_text().split() == ["node2"]

    scontrol(slurm_two_nodes, "update", "nodename=node2", "state=down", "reason=psu failed")
    try:
        held = wait_for(backend, "lost1", ProcessState.HELD)
    finally:  # ReturnToService=2 may have brought it back already
        scontrol(slurm_two_nodes, "update", "nodename=node2", "state=resume", check=False)
    assert held.reason is not None and held.reason.startswith("Slurm requeued it"), held
    assert "node2" in held.reason
    [slurm_id] = [j.job_id for j in backend._jobs["lost1"]]
    job = slurm_job(slurm_two_nodes, slurm_id)
    assert job["job_state"] == "PENDING" and str(job["state_reason"]).startswith("JobHeld")
    time.sleep(3)  # Slurm would have started it again by now had ilucid not held it
    assert backend.observe().jobs["lost1"].state is ProcessState.HELD

    # ilucid starts it again, elsewhere; it is not taken back a second time
    deadline = time.monotonic() + 60
    while (
        backend.start("lost1", command, 2, placement=[("node1/a100", 2)], run_as=slurm_account)
        is None
    ):
        assert time.monotonic() < deadline, "not released"
        backend.observe()
        time.sleep(0.3)
    again = wait_for(backend, "lost1", ProcessState.RUNNING)
    for _ in range(5):
        again = backend.observe().jobs["lost1"]
        assert again.state is ProcessState.RUNNING and again.reason is None, again
        time.sleep(0.3)
    assert marks.read_text().split() == ["node2", "node1"]
    backend.cancel("lost1")
