"""Issue 35, live on a real Slurm 22.05: the service bursts to cloud nodes and releases them.

The cluster (conftest's ``slurm_cloud_nodes``) has one on-prem machine (node1: 4 a100 +
4 v100) and two ``State=CLOUD`` machines whose ResumeProgram starts a local slurmd
(standing in for a cloud API) and whose SuspendProgram stops it. The service runs the
default profile with a paid pool: a job that fits on-prem powers nothing up; a job that
would wait on-prem while waiting is worth more than the cloud run powers up one cloud
machine, runs there, and the machine is released once idle for the pool's idle time;
nothing is killed, and explain says why with the numbers.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from slurm_harness import SlurmCluster

from ilucid.backends.base import PowerState
from ilucid.backends.slurm import SlurmBackend
from ilucid.core import PoolSpec, SchedulerConfig
from ilucid.service.api import build_app
from ilucid.service.auth import create_token
from ilucid.service.db import make_engine, migrate
from ilucid.service.scheduler_service import SchedulerService

pytestmark = pytest.mark.xdist_group("slurm")

T = TypeVar("T")
IDLE_S = 15.0


def until(
    what: str, probe: Callable[[], T | None], service: SchedulerService, within_s: float = 150
) -> T:
    """Reconcile until ``probe()`` returns something, else a failure naming ``what``."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        service.reconcile()
        seen = probe()
        if seen is not None:
            return seen
        time.sleep(0.5)
    raise AssertionError(f"{what}: not within {within_s:g} s")


def test_a_job_that_would_wait_bursts_to_a_cloud_node_brought_up_and_released_after_idle(
    slurm_cloud_nodes: SlurmCluster,
    slurm_account: str,
    slurm_data: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ILUCID_TOKEN", "the-services-own-secret")
    url = f"sqlite:///{slurm_data / 'ilucid.db'}"
    migrate(url)
    engine = make_engine(url)
    backend = SlurmBackend(slurm_data, slurm_conf=slurm_cloud_nodes.conf)
    pool = PoolSpec("cloud", 2.5, startup_s=60.0, idle_release_s=IDLE_S)
    config = SchedulerConfig(pools={"cloud": pool}, value_of_wait=100.0)
    service = SchedulerService(engine, backend, policy="ilucid", config=config)
    client = TestClient(build_app(service))
    token = create_token(engine, "alice", "vision", False, slurm_account)
    alice = {"Authorization": f"Bearer {token}"}
    log_before = len(slurm_cloud_nodes.power_log())

    def submit(gpus: int, seconds: int, name: str) -> str:
        body = {
            "command": ["sh", "-c", f"sleep {seconds}; hostname; echo $SLURMD_NODENAME"],
            "gpus": gpus,
            "gpu_type": "a100",
            "estimate_s": seconds,
            "name": name,
        }
        made = client.post("/jobs", json=body, headers=alice)
        assert made.status_code == 201, made.text
        return str(made.json()["id"])

    def state(job_id: str) -> str:
        return str(client.get(f"/jobs/{job_id}", headers=alice).json()["state"])

    try:
        # on-prem has room: it starts there and nothing is powered up
        onprem = submit(4, 90, "holds-onprem")
        until("the on-prem job runs", lambda: state(onprem) == "running" or None, service)
        assert slurm_cloud_nodes.power_log()[log_before:] == []
        assert backend.power_states()["cloud1/a100"] is PowerState.OFF

        # node1's 4 a100 are taken: a second a100 job would wait ~90 s on-prem, worth
        # 100/GPU-h x 4 GPUs x 0.025 h = 10 > 2.5 x 4 x (5 s + 60 s start-up) = 0.18
        burst = submit(4, 5, "bursts")
        until("the burst job runs", lambda: state(burst) == "running" or None, service)
        # Slurm runs its ResumeProgram for the machine ilucid asked up (once)
        log = until(
            "Slurm resumes cloud1",
            lambda: slurm_cloud_nodes.power_log()[log_before:] or None,
            service,
        )
        assert [line.split()[1:] for line in log] == [["resume", "cloud1"]], log
        started = [d for d in service_decisions(client, burst, alice) if d["action"] == "start"]
        assert started and started[-1]["code"] == "Burst", started
        sentence = str(started[-1]["message"])
        assert "burst to cloud (a100, 2.50/GPU-h): expected wait on-prem" in sentence, sentence
        assert "x 4 GPUs valued at 100/GPU-h" in sentence and "start-up 1 min" in sentence

        assert (
            until(
                "the burst job ends",
                lambda: state(burst) if state(burst) in ("succeeded", "failed") else None,
                service,
            )
            == "succeeded"
        )
        out = (slurm_data / "spool" / "slurm" / slurm_account / f"{burst}.stdout.log").read_text()
        assert out.split()[-1] == "cloud1", out
        # released after its idle time, not before, and never while the job ran
        released_at = until(
            "the idle cloud machine is released",
            lambda: next(
                (
                    line
                    for line in slurm_cloud_nodes.power_log()[log_before:]
                    if " suspend " in line
                ),
                None,
            ),
            service,
        )
        resumed_at = float(slurm_cloud_nodes.power_log()[log_before].split()[0])
        assert float(released_at.split()[0]) - resumed_at >= IDLE_S
        until(
            "cloud1 is off",
            lambda: backend.power_states()["cloud1/a100"] is PowerState.OFF or None,
            service,
        )
        # nothing was killed: the on-prem job ends on its own
        assert (
            until(
                "the on-prem job ends",
                lambda: state(onprem) if state(onprem) in ("succeeded", "failed") else None,
                service,
            )
            == "succeeded"
        )
    finally:
        engine.dispose()


def service_decisions(
    client: TestClient, job_id: str, headers: dict[str, str]
) -> list[dict[str, object]]:
    """The job's stored decisions, from its explanation."""
    shown = client.get(f"/jobs/{job_id}/explain", headers=headers)
    assert shown.status_code == 200, shown.text
    return list(shown.json()["decisions"])
