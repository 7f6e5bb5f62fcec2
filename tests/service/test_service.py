"""The live service end to end on the local backend: real processes, SQLite, REST API.

Jobs are short shell commands on virtual GPUs; the reconcile loop is driven
by hand (``service.reconcile()``) so every step is observable.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory
from ilucid.service.api import build_app
from ilucid.service.auth import create_token
from ilucid.service.db import make_engine, migrate
from ilucid.service.scheduler_service import SchedulerService


def until(predicate, service: SchedulerService, timeout: float = 15.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        service.reconcile()
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


class Site:
    def __init__(self, root: Path, gpus: int = 2) -> None:
        self.root = root
        self.url = f"sqlite:///{root / 'ilucid.db'}"
        migrate(self.url)
        self.engine = make_engine(self.url)
        self.gpus = gpus
        self.admin = create_token(self.engine, "root", "ops", admin=True)
        self.alice = create_token(self.engine, "alice", "vision")
        self.bob = create_token(self.engine, "bob", "nlp")
        self.start()

    def start(self) -> None:
        backend = LocalBackend(
            self.root, GpuInventory(self.gpus, "virtual", 0, "virtual"), grace_s=2.0
        )
        self.service = SchedulerService(self.engine, backend, policy="tiered")
        self.client = TestClient(build_app(self.service))

    def call(self, method: str, path: str, token: str, **kw):  # type: ignore[no-untyped-def]
        return self.client.request(method, path, headers={"Authorization": f"Bearer {token}"}, **kw)

    def state(self, job_id: str) -> str:
        return str(self.call("GET", f"/jobs/{job_id}", self.admin).json()["state"])


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    site = Site(tmp_path)
    yield site
    for job in site.call("GET", "/jobs", site.admin).json():
        if job["state"] == "running":
            site.service.backend.stop(job["id"])


def submit(site: Site, token: str, command: list[str], gpus: int = 1, **extra: object) -> str:
    response = site.call("POST", "/jobs", token, json={"command": command, "gpus": gpus, **extra})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def test_jobs_run_as_processes_with_their_gpus_and_logs(site: Site) -> None:
    job = submit(site, site.alice, ["sh", "-c", "echo gpu=$CUDA_VISIBLE_DEVICES; exit 0"])
    failing = submit(site, site.alice, ["sh", "-c", "echo oops >&2; exit 3"])
    until(lambda: site.state(job) == "succeeded" and site.state(failing) == "failed", site.service)
    assert site.call("GET", f"/jobs/{job}/logs", site.alice).text.strip() in ("gpu=0", "gpu=1")
    shown = site.call("GET", f"/jobs/{failing}", site.alice).json()
    assert shown["exit_code"] == 3
    assert [t["to"] for t in shown["transitions"]] == ["pending", "running", "running", "failed"]
    assert shown["transitions"][2]["reason"].startswith("launched on GPUs ")
    stderr = site.call("GET", f"/jobs/{failing}/logs?stream=stderr", site.alice).text
    assert stderr.strip() == "oops"


def test_queue_explain_and_ownership(site: Site) -> None:
    blocker = submit(site, site.alice, ["sleep", "30"], gpus=2, estimate_s=600)
    site.service.reconcile()
    waiting = submit(site, site.bob, ["true"], gpus=2, estimate_s=60)
    site.service.reconcile()
    assert site.state(blocker) == "running" and site.state(waiting) == "pending"
    queue = site.call("GET", "/queue", site.bob).json()
    assert queue[0]["id"] == waiting and queue[0]["position"] == 1
    assert queue[0]["expected_start"] > time.time() + 500  # after the blocker's estimate
    why = site.call("GET", f"/jobs/{waiting}/explain", site.bob).json()["why"]
    assert why.startswith("pending (position 1 in tiered order)")
    assert why.endswith(": all 2 GPUs are busy (2 training)"), why  # the true cause
    # bob cannot see or cancel alice's job; the admin can
    assert site.call("GET", f"/jobs/{blocker}", site.bob).status_code == 404
    assert site.call("DELETE", f"/jobs/{blocker}", site.bob).status_code == 404
    assert [j["id"] for j in site.call("GET", "/jobs", site.bob).json()] == [waiting]
    assert site.call("DELETE", f"/jobs/{blocker}", site.admin).json()["state"] == "stopping"
    until(
        lambda: site.state(blocker) == "cancelled" and site.state(waiting) == "succeeded",
        site.service,
    )


def test_bad_requests_and_tokens_are_refused(site: Site) -> None:
    assert site.client.get("/jobs").status_code == 401
    assert site.call("GET", "/jobs", "not-a-token").status_code == 401
    too_big = site.call("POST", "/jobs", site.alice, json={"command": ["true"], "gpus": 9})
    # well-formed, but more than this cluster holds: a conflict with the cluster, 409
    assert too_big.status_code == 409 and "between 0 and 2" in too_big.json()["detail"]
    bad_class = site.call("POST", "/jobs", site.alice, json={"command": ["true"], "class": "batch"})
    assert bad_class.status_code == 422 and "class: must be one of" in bad_class.json()["detail"]
    assert site.call("PUT", "/policy", site.alice, json={"policy": "fifo"}).status_code == 403
    assert site.call("PUT", "/policy", site.admin, json={"policy": "srtf"}).status_code == 422
    assert site.call("PUT", "/policy", site.admin, json={"policy": "fifo"}).status_code == 200


def test_inference_preempts_training_and_the_training_job_resumes(site: Site) -> None:
    train = submit(
        site,
        site.alice,
        ["sh", "-c", "trap 'exit 143' TERM; sleep 30 & wait"],
        gpus=2,
        estimate_s=3600,
    )
    until(lambda: site.state(train) == "running", site.service)
    serve = submit(site, site.bob, ["sh", "-c", "sleep 0.5"], gpus=1, **{"class": "inference"})
    until(lambda: site.state(serve) == "succeeded", site.service)
    shown = site.call("GET", f"/jobs/{train}", site.admin).json()
    assert shown["preemptions"] == 1
    reasons = " ".join(t["reason"] for t in shown["transitions"])
    assert f"preempted by inference job {serve}" in reasons
    until(lambda: site.state(train) == "running", site.service)  # resumed


def test_restart_readopts_running_jobs_and_loses_nothing(site: Site) -> None:
    running = submit(site, site.alice, ["sleep", "1.5"], gpus=1)
    pending = submit(site, site.alice, ["true"], gpus=2)
    until(lambda: site.state(running) == "running", site.service)
    site.start()  # a new service process on the same database and job directory
    assert site.state(running) == "running" and site.state(pending) == "pending"
    until(
        lambda: site.state(running) == "succeeded" and site.state(pending) == "succeeded",
        site.service,
    )
    # the history the estimators and what-if replays read
    history = site.call("GET", "/history.csv", site.admin).text.splitlines()
    assert history[0].startswith("id,submit_time,num_gpus,duration")
    assert {line.split(",")[0] for line in history[1:]} == {running, pending}


def test_metrics_and_openapi(site: Site) -> None:
    submit(site, site.alice, ["true"])
    submit(site, site.bob, ["true"], **{"class": "inference"})
    text = site.call("GET", "/metrics", site.admin).text
    assert 'ilucid_jobs{state="pending"} 2' in text
    assert 'ilucid_pending_jobs{class="inference",tenant="nlp"} 1' in text
    site.service.reconcile()
    text = site.call("GET", "/metrics", site.admin).text
    assert 'ilucid_decisions_total{action="start",reason="Scheduled"}' in text
    assert "ilucid_pass_duration_seconds_count 1.0" in text and 'le="+Inf"} 1' in text
    assert "/api/v1/jobs/{job_id}/explain" in site.client.get("/openapi.json").json()["paths"]


def test_a_tenant_name_cannot_inject_a_metric_line(site: Site) -> None:
    evil = create_token(site.engine, "mallory", 'lab"} 1\nevil_metric{a="b')
    submit(site, evil, ["true"])
    text = site.call("GET", "/metrics", site.admin).text
    assert not any(line.startswith("evil_metric") for line in text.splitlines())
    assert 'ilucid_pending_jobs{class="training",tenant="lab\\"} 1\\nevil_metric{a=\\"b"} 1' in (
        text
    )
