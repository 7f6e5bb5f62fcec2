"""The API holds under concurrency (issue 30, finding 3).

A real uvicorn server in this process serves the real app over HTTP; the reconcile
loop is driven by hand, so a "slow pass" is the test holding the scheduler's lock.
Found on a service that had run a while: a submission committed to SQLite on the
event loop while holding that lock, so one slow pass stalled every endpoint, and
every submission was a transaction of its own.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from sqlalchemy import Engine, event, select
from sqlalchemy.orm import Session
from starlette.routing import BaseRoute

from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory
from ilucid.service.api import build_app
from ilucid.service.auth import create_token
from ilucid.service.db import JobRow, make_engine, migrate
from ilucid.service.job_store import JobRequest
from ilucid.service.scheduler_service import SchedulerService

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_helpers import free_port, serve_command

JOB = {"command": ["true"], "gpus": 1}


@dataclass
class Api:
    url: str
    service: SchedulerService
    engine: Engine
    admin: str
    alice: str

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token or self.alice}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    """The service on 2 virtual GPUs behind a real uvicorn server (no loop: the tests
    run passes themselves)."""
    url = f"sqlite:///{tmp_path / 'ilucid.db'}"
    migrate(url)
    engine = make_engine(url)
    admin = create_token(engine, "root", "ops", admin=True)
    alice = create_token(engine, "alice", "vision")
    backend = LocalBackend(tmp_path, GpuInventory(2, "virtual", 0, "virtual"), grace_s=1.0)
    service = SchedulerService(engine, backend, policy="fifo")
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(build_app(service), host="127.0.0.1", port=port, log_level="warning")
    )
    serving = threading.Thread(target=server.run, daemon=True)
    serving.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and serving.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield Api(f"http://127.0.0.1:{port}", service, engine, admin, alice)
    finally:
        server.should_exit = True
        serving.join(30)
        with service.lock:
            running = [j for j, s in service.scheduler.jobs.items() if s.status.value == "running"]
        for job_id in running:
            backend.stop(job_id)
        engine.dispose()


class SlowPass:
    """A thread that holds the service's lock, as a long pass does, until released."""

    def __init__(self, service: SchedulerService) -> None:
        held, self._release = threading.Event(), threading.Event()

        def slow_pass() -> None:
            with service.lock:
                held.set()
                self._release.wait(5)

        self.thread = threading.Thread(target=slow_pass)
        self.thread.start()
        assert held.wait(10)

    def release(self) -> None:
        self._release.set()
        self.thread.join(10)


def test_a_slow_pass_holding_the_lock_stalls_neither_a_submission_nor_healthz(api: Api) -> None:
    passing = SlowPass(api.service)
    try:
        with ThreadPoolExecutor(1) as pool, api.client() as client:
            submitted = pool.submit(client.post, "/jobs", json=JOB)
            time.sleep(0.3)  # the submission is in flight while the pass holds the lock
            began = time.perf_counter()
            health = httpx.get(f"{api.url}/healthz", timeout=30)
            healthz_s = time.perf_counter() - began
            answer = submitted.result(timeout=3)  # answered while the lock is still held
            assert passing.thread.is_alive(), "the pass ended before the submission was answered"
    finally:
        passing.release()
    assert health.status_code == 200 and healthz_s < 0.5, f"/healthz took {healthz_s:.2f} s"
    assert answer.status_code == 201, answer.text
    job_id = answer.json()["id"]
    with Session(api.engine) as session:  # committed before it was answered
        assert session.get(JobRow, job_id) is not None
    with api.service.lock:  # the next holder of the lock hands it to the core
        assert job_id in api.service.scheduler.jobs


def test_submissions_arriving_together_share_commits(api: Api) -> None:
    commits: list[float] = []

    def on_commit(_connection: Any) -> None:
        commits.append(time.monotonic())
        time.sleep(0.02)  # a commit that takes a while: what arrives meanwhile queues up

    clients, each = 8, 10
    start = threading.Barrier(clients)
    answered: list[str] = []

    def submitter() -> None:
        with api.client() as client:
            client.get("/healthz")
            start.wait()
            for _ in range(each):
                response = client.post("/jobs", json=JOB)
                assert response.status_code == 201, response.text
                answered.append(response.json()["id"])

    with api.client() as client:  # alice's first job gives her a uid of her own (a commit)
        assert client.post("/jobs", json=JOB).status_code == 201
    event.listen(api.engine, "commit", on_commit)
    try:
        threads = [threading.Thread(target=submitter) for _ in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        event.remove(api.engine, "commit", on_commit)
    assert len(answered) == len(set(answered)) == clients * each
    # 80 submissions: far fewer transactions (the token look-ups commit nothing)
    assert len(commits) <= clients * each / 2, f"{len(commits)} commits for 80 submissions"
    with Session(api.engine) as session:
        stored = set(session.scalars(select(JobRow.id).where(JobRow.id.in_(answered))))
    assert stored == set(answered)


def test_a_cancel_right_after_an_answered_submission_wins_over_a_slow_pass(api: Api) -> None:
    passing = SlowPass(api.service)
    with ThreadPoolExecutor(1) as pool, api.client() as client:
        job_id = client.post("/jobs", json=JOB).json()["id"]  # answered: the lock is held
        cancelled = pool.submit(client.delete, f"/jobs/{job_id}")  # waits for the lock
        time.sleep(0.2)
        passing.release()
        assert cancelled.result(timeout=10).json()["state"] == "cancelled"
    for _ in range(3):
        api.service.reconcile()
    assert job_id not in api.service.scheduler.jobs  # never queued again after its cancel
    with Session(api.engine) as session:
        row = session.get(JobRow, job_id)
        assert row is not None and row.state == "cancelled" and row.first_start is None


def test_a_job_submitted_by_the_lock_holder_is_in_the_core_when_submit_returns(api: Api) -> None:
    with api.service.lock:
        job_id = api.service.submit(JobRequest(["true"], user="alice", tenant="vision"))
        assert job_id in api.service.scheduler.jobs
    assert len(api.service.inbox) == 0


def _api_routes(routes: Sequence[BaseRoute]) -> Iterator[APIRoute]:
    """Every API route, also those of included routers (which FastAPI may keep as one
    entry per router rather than copying their routes into the app)."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from _api_routes(included.routes)


def _dependencies(dependant: Dependant) -> Iterator[Any]:
    for sub in dependant.dependencies:
        if sub.call is not None:
            yield sub.call
        yield from _dependencies(sub)


#: async endpoints and dependencies, each of which does no database work on the loop
ASYNC_ALLOWED = {
    "healthz": "answers from memory",
    "current_service": "reads app.state",
    "_who": "a remembered token from memory; a look-up in a worker thread",
    "refit": "starts the refit in a worker thread, then waits polling memory on the loop",
}


def test_no_route_or_dependency_is_async_but_the_known_ones(api: Api) -> None:
    routes = list(_api_routes(build_app(api.service).routes))
    assert {"/jobs", "/healthz", "/nodes", "/policy", "/metrics"} <= {r.path for r in routes}
    found = {}
    for route in routes:
        for call in [route.endpoint, *_dependencies(route.dependant)]:
            if inspect.iscoroutinefunction(call):
                found[call.__name__] = route.path
    assert set(found) <= set(ASYNC_ALLOWED), f"async routes or dependencies: {found}"


def test_no_route_runs_a_database_statement_on_the_event_loop(api: Api) -> None:
    """Every route called for real; any SQL statement run on the thread of the event loop
    (one with a running loop) is named."""
    on_loop: list[str] = []

    def before_execute(*args: Any) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # a worker thread
        on_loop.append(str(args[2])[:80])

    paths = build_app(api.service).openapi()["paths"]
    assert {"/api/v1/jobs", "/api/v1/jobs/{job_id}", "/api/v1/queue"} <= set(paths)
    paths = {**paths, "/views/history": {"get": {}}}  # the dashboard's own, not published
    called = []
    with api.client(api.admin) as client:
        job_id = client.post("/jobs", json=JOB).json()["id"]
        event.listen(api.engine, "before_cursor_execute", before_execute)
        try:
            for path, methods in paths.items():
                for method in methods:
                    body = {"/api/v1/jobs": JOB, "/api/v1/policy": {"policy": "fifo"}}.get(path)
                    answer = client.request(method, path.replace("{job_id}", job_id), json=body)
                    called.append(f"{method.upper()} {path} {answer.status_code}")
        finally:
            event.remove(api.engine, "before_cursor_execute", before_execute)
    assert "POST /api/v1/jobs 201" in called, called
    assert "POST /api/v1/jobs/{job_id}/cancel 200" in called, called
    assert not on_loop, f"SQL on the event loop: {on_loop}"


@pytest.mark.skipif(os.geteuid() != 0, reason="a root service: its jobs run as dynamic uids")
def test_every_answered_submission_survives_a_kill_9(tmp_path: Path) -> None:
    """8 clients submit to a real ``ilucid serve``; it is killed (SIGKILL) while their
    submissions are in flight: every id it answered is in the database."""
    data = tmp_path / "data"
    data.mkdir()
    url = f"sqlite:///{data / 'ilucid.db'}"
    migrate(url)
    engine = make_engine(url)
    token = create_token(engine, "alice", "vision")
    port = free_port()
    server = subprocess.Popen(
        serve_command(data, port, 1, 60.0), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    answered: list[str] = []
    stop = threading.Event()
    threads: list[threading.Thread] = []

    def submitter() -> None:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers) as client:
            while not stop.is_set():
                try:
                    response = client.post("/jobs", json={"command": ["true"], "gpus": 1})
                except httpx.HTTPError:
                    return  # the service is gone
                if response.status_code == 201:
                    answered.append(response.json()["id"])

    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline and server.poll() is None, "no service"
                time.sleep(0.1)
        threads += [threading.Thread(target=submitter) for _ in range(8)]
        for thread in threads:
            thread.start()
        while len(answered) < 200 and time.monotonic() < deadline:
            time.sleep(0.005)
        server.send_signal(signal.SIGKILL)  # mid-burst: submissions are in flight
        seen = list(answered)
    finally:
        stop.set()
        server.kill()
        server.wait(30)
    for thread in threads:
        thread.join(30)
    assert len(seen) >= 200
    with Session(engine) as session:
        stored = set(session.scalars(select(JobRow.id)))
    assert set(answered) <= stored, f"answered but lost: {sorted(set(answered) - stored)}"
    engine.dispose()
