"""Issue 18 on the live path: a real ``ilucid serve`` on one virtual GPU runs two
inference services of 500 milli-GPUs each on that GPU (the same
``CUDA_VISIBLE_DEVICES``), and a third waits, saying that no shared GPU has room."""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory
from ilucid.service.db import make_engine, migrate
from ilucid.service.job_store import JobRequest
from ilucid.service.scheduler_service import SchedulerService

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_helpers import free_port, run_ilucid, serving

#: the default profile with no training reserve (one GPU: a reserve would hold it back)
PROFILE = """\
[profile]
name = "shared-gpus"
base = "ilucid"

[settings]
reserve_training = 0.0
profile_limit_s = false
"""

SERVICE = 'echo "$CUDA_VISIBLE_DEVICES" > "$OUT/$ILUCID_JOB_ID"; sleep 60'


@pytest.fixture
def server(tmp_path: Path, job_scratch: Path) -> Iterator[tuple[dict[str, str], Path]]:
    port = free_port()
    data = tmp_path / "data"
    profile = tmp_path / "shared.toml"
    profile.write_text(PROFILE, encoding="utf-8")
    env = {**os.environ, "OUT": str(job_scratch)}
    extra = ("--policy", str(profile), "--grace", "2")
    with serving(data, port, 1, env, *extra) as served:
        yield served, job_scratch


def _get(env: dict[str, str], path: str) -> Any:
    request = urllib.request.Request(
        f"{env['ILUCID_URL']}{path}", headers={"Authorization": f"Bearer {env['ILUCID_TOKEN']}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_two_halves_share_one_gpu_and_a_third_waits_with_the_reason(
    server: tuple[dict[str, str], Path],
) -> None:
    env, out = server
    ids = []
    for _ in range(3):
        submitted = run_ilucid(
            "submit", "--class", "inference", "--gpu-milli", "500", "--",
            "sh", "-c", SERVICE,
            env=env,
        )  # fmt: skip
        assert submitted.returncode == 0, submitted.stderr
        ids.append(submitted.stdout.strip())
    first, second, third = ids
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if (out / first).exists() and (out / second).exists():
            break
        time.sleep(0.2)
    seen = {job: (out / job).read_text().strip() for job in (first, second)}
    assert seen == {first: "0", second: "0"}, seen  # one GPU, both on it
    assert [_get(env, f"/jobs/{job}")["state"] for job in ids] == ["running", "running", "pending"]
    # the GPU map names both jobs on the one GPU
    (node,) = _get(env, "/nodes")
    assert set(node["gpu_jobs"][0].split(" + ")) == {first, second}
    assert not (out / third).exists()
    why = run_ilucid("explain", third, env=env)
    assert why.returncode == 0, why.stderr
    assert "no shared GPU with 500 milli-GPUs left" in why.stdout, why.stdout
    started = run_ilucid("explain", second, env=env).stdout
    assert "gpu-share" in started and "1000 of 1000 taken there now" in started, started
    # the first ends: the third takes its half, on the same GPU
    assert run_ilucid("cancel", first, env=env).returncode == 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (out / third).exists():
        time.sleep(0.2)
    assert (out / third).read_text().strip() == "0"


def test_a_restart_keeps_each_share_on_its_gpu(tmp_path: Path, job_scratch: Path) -> None:
    """Shares are adopted under their GPU's index: after a restart a new half joins
    the share with room, on that share's GPU, and never one that is full."""
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    migrate(url)
    engine = make_engine(url)
    inventory = GpuInventory(2, "v100", 16.0, "virtual")

    def service() -> SchedulerService:
        return SchedulerService(engine, LocalBackend(tmp_path / "data", inventory), policy="fifo")

    def half(live: SchedulerService, milli: int) -> str:
        command = [
            "sh",
            "-c",
            f'echo "$CUDA_VISIBLE_DEVICES" > {job_scratch}/$ILUCID_JOB_ID; sleep 60',
        ]
        request = JobRequest(command, 1, "inference", "ann", "vision", gpu_milli=milli)
        return live.submit(request)

    def gpu_of(live: SchedulerService, job_id: str) -> str:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (job_scratch / job_id).exists():
            live.reconcile()
            time.sleep(0.1)
        return (job_scratch / job_id).read_text().strip()

    first = service()
    jobs = [half(first, 500), half(first, 500), half(first, 300)]
    # the 300 opens a share on the second GPU (the first is full)
    assert [gpu_of(first, job) for job in jobs] == ["0", "0", "1"]
    again = service()  # a restart: the same database and job folders
    again.reconcile()
    # one node of two GPUs: each share is labelled by its GPU's index on the host
    assert again.scheduler.free.shares_left(0) == {0: 0, 1: 700}
    late = half(again, 600)
    assert gpu_of(again, late) == "1"
    for job in [*jobs, late]:
        again.cancel(job)
    engine.dispose()
