"""Driving the test Slurm cluster that ``slurm/start_slurm.sh`` sets up."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ilucid.backends.base import ObservedJob, ProcessState
from ilucid.backends.slurm import SlurmBackend

HERE = Path(__file__).resolve().parent / "slurm"


@dataclass
class SlurmCluster:
    directory: Path
    conf: str
    nodes: int = 1  # slurmd daemons on this host (node1..nodeN), 4 a100 + 4 v100 each
    gres: str = "mixed"  # "split": one type a node (node1 4 x a100, node2 4 x v100)
    #: cloud nodes cloud1..cloudN (State=CLOUD, Feature=pool_cloud) under power saving:
    #: Slurm's ResumeProgram starts a slurmd for each, its SuspendProgram stops it
    cloud: int = 0

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": self.conf}

    def squeue(self) -> str:
        return subprocess.run(
            ["squeue", "--json"], env=self.env(), capture_output=True, text=True, check=True
        ).stdout

    def stop_controller(self) -> None:
        pid = (self.directory / "run" / "slurmctld.pid").read_text().strip()
        subprocess.run(["kill", "-TERM", pid], check=False)
        for _ in range(100):
            if subprocess.run(["kill", "-0", pid], check=False, capture_output=True).returncode:
                return
            time.sleep(0.1)

    def start(self) -> None:
        """(Re)start whichever daemons are down; state in the directory is kept."""
        done = subprocess.run(
            ["bash", str(HERE / "start_slurm.sh"), str(self.directory)],
            env={
                **os.environ,
                "SLURM_TEST_NODES": str(self.nodes),
                "SLURM_TEST_GRES": self.gres,
                "SLURM_TEST_CLOUD": str(self.cloud),
            },
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"start_slurm.sh failed:\n{done.stderr[-3000:]}")

    def power_log(self) -> list[str]:
        """What the ResumeProgram and SuspendProgram did, a line each: ``<epoch> resume
        cloud1``, ``<epoch> suspend cloud1`` (and anything slurmd said when started)."""
        log = self.directory / "power" / "power.log"
        return log.read_text().splitlines() if log.exists() else []

    def slurmd_running(self, node: str) -> bool:
        """Whether the slurmd of ``node`` runs (its pid file names a live process)."""
        pid_file = self.directory / "run" / f"slurmd-{node}.pid"
        try:
            os.kill(int(pid_file.read_text().strip()), 0)
        except (OSError, ValueError):
            return False
        return True


def started_cluster(nodes: int, gres: str = "mixed", cloud: int = 0) -> Iterator[SlurmCluster]:
    """A fixture's body: a fresh cluster of ``nodes`` ordinary nodes and ``cloud`` cloud
    nodes, stopped (no daemon left) and removed after the test; skips where Slurm cannot
    run (not root, cannot be installed). ``yield from started_cluster(1, cloud=2)``."""
    if os.geteuid() != 0:
        pytest.skip("Slurm's daemons need root here (slurmctld runs as SlurmUser=root)")
    if shutil.which("slurmctld") is None and shutil.which("apt-get") is None:
        pytest.skip("Slurm is not installed and apt-get is not available to install it")
    directory = Path(tempfile.mkdtemp(prefix="ilucid-slurm-"))
    directory.chmod(0o755)  # munged and job steps run as other users
    cluster = SlurmCluster(directory, str(directory / "slurm.conf"), nodes, gres, cloud)
    try:
        cluster.start()
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        subprocess.run(["bash", str(HERE / "stop_slurm.sh"), str(directory)], check=False)
        if "apt-get install failed" in str(exc):
            pytest.skip(f"Slurm cannot be installed here: {exc}")
        raise  # installed but not working: a failure, not a skip
    yield cluster
    subprocess.run(
        ["bash", str(HERE / "stop_slurm.sh"), str(directory), "--purge"],
        capture_output=True,
        check=False,
        timeout=120,
    )


def slurm_job(cluster: SlurmCluster, slurm_id: int) -> dict[str, object]:
    """Slurm's own record of one job (``squeue --json``)."""
    jobs = json.loads(cluster.squeue())["jobs"]
    return next(j for j in jobs if j["job_id"] == slurm_id)


def wait_for(backend: SlurmBackend, job_id: str, state: ProcessState) -> ObservedJob:
    """The backend's view of ``job_id`` once it is in ``state`` (at most 60 s)."""
    deadline = time.monotonic() + 60
    seen = None
    while time.monotonic() < deadline:
        seen = backend.observe().jobs.get(job_id)
        if seen is not None and seen.state is state:
            return seen
        time.sleep(0.3)
    raise AssertionError(f"{job_id} never {state}; last seen {seen}")
