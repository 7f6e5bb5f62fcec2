"""The Kubernetes backend reads a running workload's progress report from the log of its
first running pod, through the API (``pods/log`` with ``tailLines``), at most every 10 s."""

from __future__ import annotations

import sys
from pathlib import Path

from kubernetes import client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kube_fixtures import Emulator, backend, gpu_job, gpu_node

from ilucid.backends.base import ProcessState


def _pod(name: str, job: str, phase: str) -> dict[str, object]:
    return {
        "metadata": {"name": name, "namespace": "team-a", "labels": {"job-name": job}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
        "status": {"phase": phase},
    }


def test_progress_comes_from_the_first_running_pods_log(emulator: Emulator) -> None:
    api = emulator.api()
    core = client.CoreV1Api(api)
    core.create_node(gpu_node("gpu-a"))
    job = gpu_job("train", 2, suspend=False)
    job["metadata"]["annotations"]["ilucid.io/job-id"] = "j1"
    client.BatchV1Api(api).create_namespaced_job("team-a", job)
    core.create_namespaced_pod("team-a", _pod("train-aaaaa", "train", "Failed"))
    core.create_namespaced_pod("team-a", _pod("train-bbbbb", "train", "Running"))
    core.create_namespaced_pod("team-a", _pod("other-ccccc", "other", "Running"))
    old_lines = b"".join(b"ILUCID_PROGRESS step=1 total=500\n" for _ in range(300))
    emulator.handler.pod_logs[("team-a", "train-aaaaa")] = b"ILUCID_PROGRESS step=499 total=500\n"
    emulator.handler.pod_logs[("team-a", "other-ccccc")] = b"ILUCID_PROGRESS step=9 total=9\n"
    emulator.handler.pod_logs[("team-a", "train-bbbbb")] = (
        old_lines + b"[rank0] ILUCID_PROGRESS step=120 total=500\nloss 0.3 \xff\n"
    )
    now = [0.0]
    kube = backend(api, clock=lambda: now[0])
    seen = kube.observe().jobs["j1"]
    assert seen.state is ProcessState.RUNNING
    assert seen.progress == (120.0, 500.0)
    asked = [r for r in emulator.requests() if r.resource is not None and r.subresource == "log"]
    assert [(r.name, r.params.get("tailLines")) for r in asked] == [("train-bbbbb", "200")]
    emulator.handler.pod_logs[("team-a", "train-bbbbb")] += b"ILUCID_PROGRESS step=130 total=500\n"
    assert kube.observe().jobs["j1"].progress == (120.0, 500.0)  # read less than 10 s ago
    now[0] = 10.0
    assert kube.observe().jobs["j1"].progress == (130.0, 500.0)
