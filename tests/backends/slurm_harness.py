"""Driving the test Slurm cluster that ``slurm/start_slurm.sh`` sets up."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ilucid.backends.base import ObservedJob, ProcessState
from ilucid.backends.slurm import SlurmBackend

HERE = Path(__file__).resolve().parent / "slurm"


@dataclass
class SlurmCluster:
    directory: Path
    conf: str
    nodes: int = 1  # slurmd daemons on this host (node1..nodeN), 4 a100 + 4 v100 each
    gres: str = "mixed"  # "split": one type a node (node1 4 x a100, node2 4 x v100)

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
            env={**os.environ, "SLURM_TEST_NODES": str(self.nodes), "SLURM_TEST_GRES": self.gres},
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"start_slurm.sh failed:\n{done.stderr[-3000:]}")


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
