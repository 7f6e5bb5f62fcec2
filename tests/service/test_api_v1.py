"""The versioned API's promises, one by one, against the real app (SQLite in a temporary
folder, the local backend on virtual GPUs): errors as problem details on every path,
the old paths as deprecated aliases, pages by cursor, and the statuses that say whose
fault a refusal is."""

from __future__ import annotations

import asyncio
import tempfile
import threading
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory
from ilucid.service.api import build_app
from ilucid.service.api_contract import DEPRECATED_SINCE
from ilucid.service.auth import create_token
from ilucid.service.db import make_engine, migrate
from ilucid.service.scheduler_service import SchedulerService

PROBLEM = "application/problem+json"
_folder = Path(tempfile.mkdtemp(prefix="ilucid-v1-"))
_url = f"sqlite:///{_folder / 'v1.db'}"
migrate(_url)
_engine = make_engine(_url)
ADMIN = {"Authorization": f"Bearer {create_token(_engine, 'root', 'ops', admin=True)}"}
ALICE = {"Authorization": f"Bearer {create_token(_engine, 'alice', 'vision')}"}
BOB = {"Authorization": f"Bearer {create_token(_engine, 'bob', 'nlp')}"}
SERVICE = SchedulerService(_engine, LocalBackend(_folder, GpuInventory(4, "virtual", 0, "v")))
CLIENT = TestClient(build_app(SERVICE), raise_server_exceptions=False)


def _submit(headers: dict[str, str], **body: object) -> str:
    answer = CLIENT.post("/api/v1/jobs", json={"command": ["sleep", "60"], **body}, headers=headers)
    assert answer.status_code == 201, answer.text
    assert answer.headers["location"] == f"/api/v1/jobs/{answer.json()['id']}"
    return str(answer.json()["id"])


def _is_problem(response: object, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text  # type: ignore[attr-defined]
    assert response.headers["content-type"] == PROBLEM  # type: ignore[attr-defined]
    body = response.json()  # type: ignore[attr-defined]
    assert body["status"] == status and body["type"] == "about:blank" and body["title"]
    assert isinstance(body["detail"], str) and body["detail"]
    return dict(body)


@pytest.mark.parametrize(
    ("method", "path", "headers", "body", "status"),
    [
        ("GET", "/api/v1/jobs", {}, None, 401),
        ("GET", "/api/v1/jobs", {"Authorization": "Bearer nope"}, None, 401),
        ("GET", "/api/v1/jobs/j999999", "admin", None, 404),
        ("GET", "/api/v1/nowhere", "admin", None, 404),
        ("PUT", "/api/v1/policy", "alice", {"policy": "fifo"}, 403),
        ("PUT", "/api/v1/policy", "admin", {"policy": "nope"}, 422),
        ("POST", "/api/v1/jobs", "admin", {"command": ["x"], "gpus": 64}, 409),
        ("POST", "/api/v1/jobs", "admin", {"command": ["x"], "gpu_type": "h200"}, 409),
        ("POST", "/api/v1/jobs", "alice", {"command": ["x"], "priority": 5}, 403),
        ("POST", "/api/v1/jobs", "admin", {"command": ["x"], "gpus": -1}, 422),
        ("POST", "/api/v1/jobs", "admin", {"command": ["x"], "gpsu": 1}, 422),
        ("GET", "/jobs/j999999", "admin", None, 404),  # the old paths too
    ],
)
def test_every_error_is_a_problem_whose_status_says_whose_fault(
    method: str, path: str, headers: object, body: object, status: int
) -> None:
    sent = {"admin": ADMIN, "alice": ALICE}[headers] if isinstance(headers, str) else headers
    answer = CLIENT.request(method, path, json=body, headers=sent)  # type: ignore[arg-type]
    problem = _is_problem(answer, status)
    if status == 422:
        assert problem["errors"], problem
    if "gpsu" in str(body):
        assert problem["detail"] == "gpsu: unknown field (did you mean gpus?)"


def test_an_unparsable_body_and_an_oversized_one_are_problems() -> None:
    raw = CLIENT.post(
        "/api/v1/jobs",
        content=b"\xff\xfe{",
        headers={**ADMIN, "Content-Type": "application/json"},
    )
    assert raw.status_code in (400, 422) and raw.headers["content-type"] == PROBLEM
    big = CLIENT.post(
        "/api/v1/jobs", content=b"x" * (2 << 20), headers={**ADMIN, "Content-Length": "2097152"}
    )
    _is_problem(big, 413)


def test_a_method_not_served_names_every_method_the_path_has() -> None:
    answer = CLIENT.options("/api/v1/jobs/j000001", headers=ADMIN)
    _is_problem(answer, 405)
    assert answer.headers["allow"] == "GET, HEAD"
    old = CLIENT.request("PATCH", "/jobs/j000001", headers=ADMIN)
    _is_problem(old, 405)
    assert old.headers["allow"] == "DELETE, GET, HEAD"  # the old path's DELETE is there


def test_old_paths_answer_as_before_with_a_deprecation_header() -> None:
    job = _submit(ALICE)
    listed = CLIENT.get("/jobs", headers=ALICE)
    assert listed.status_code == 200 and isinstance(listed.json(), list)
    assert listed.headers["deprecation"] == f"@{DEPRECATED_SINCE}"
    assert listed.headers["link"] == '</api/v1/jobs>; rel="successor-version"'
    shown = CLIENT.get(f"/jobs/{job}/explain", headers=ALICE)
    assert shown.status_code == 200 and shown.headers["deprecation"].startswith("@")
    assert shown.headers["link"] == f'</api/v1/jobs/{job}/explain>; rel="successor-version"'
    gone = CLIENT.delete(f"/jobs/{job}", headers=ALICE)
    assert gone.status_code == 200 and gone.json()["state"] == "cancelled"
    assert "deprecation" in gone.headers
    assert "deprecation" in CLIENT.get("/openapi.json").headers
    for current in ("/api/v1/jobs", "/healthz", "/metrics", "/api/v1/openapi.json"):
        assert "deprecation" not in CLIENT.get(current, headers=ADMIN).headers, current
    # an old path holding bytes a header cannot carry still answers (the link is encoded)
    odd = CLIENT.get("/jobs/%FF%C3%9C", headers=ALICE)
    assert odd.status_code == 404 and odd.headers["link"].startswith("</api/v1/jobs/%FF")


def test_a_gang_states_no_gpus_in_v1_but_the_old_path_takes_the_equal_count() -> None:
    gang = {"command": ["x"], "nodes": 1, "gpus_per_node": 2}
    v1 = CLIENT.post("/api/v1/jobs", json={**gang, "gpus": 2}, headers=ADMIN)
    assert _is_problem(v1, 422)["detail"].startswith("gpus: leave it out")  # type: ignore[union-attr]
    job = _submit(ADMIN, **gang)
    assert CLIENT.get(f"/api/v1/jobs/{job}", headers=ADMIN).json()["gpus"] == 2
    old = CLIENT.post("/jobs", json={**gang, "gpus": 2}, headers=ADMIN)
    assert old.status_code == 201, old.text
    wrong = CLIENT.post("/jobs", json={**gang, "gpus": 3}, headers=ADMIN)
    assert _is_problem(wrong, 422)["detail"].startswith("gpus: 3 is not")  # type: ignore[union-attr]
    half = CLIENT.post("/api/v1/jobs", json={**gang, "gpu_milli": 500}, headers=ADMIN)
    assert "not a gang" in _is_problem(half, 422)["detail"]  # type: ignore[operator]
    alone = CLIENT.post("/api/v1/jobs", json={"command": ["x"], "nodes": 2}, headers=ADMIN)
    assert "gpus_per_node" in _is_problem(alone, 422)["detail"]  # type: ignore[operator]


def test_cancel_is_a_post_and_the_job_record_stays() -> None:
    job = _submit(BOB)
    done = CLIENT.post(f"/api/v1/jobs/{job}/cancel", headers=BOB)
    assert done.status_code == 200 and done.json() == {"id": job, "state": "cancelled"}
    assert CLIENT.get(f"/api/v1/jobs/{job}", headers=BOB).json()["state"] == "cancelled"
    _is_problem(CLIENT.post(f"/api/v1/jobs/{job}/cancel", headers=ALICE), 404)
    assert CLIENT.delete(f"/api/v1/jobs/{job}", headers=BOB).status_code == 405


def test_pages_walk_every_job_once_while_jobs_arrive() -> None:
    mine = [_submit(ALICE, name=f"walk-{n}") for n in range(7)]
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, object] = {"limit": 3}
        if cursor:
            params["cursor"] = cursor
        page = CLIENT.get("/api/v1/jobs", params=params, headers=ALICE).json()  # type: ignore[arg-type]
        seen += [job["id"] for job in page["jobs"]]
        pages += 1
        if pages == 1:
            mine.append(_submit(ALICE, name="late"))  # arrives mid-walk: on a later page
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)), seen
    assert set(mine) <= set(seen)
    everyone = CLIENT.get("/api/v1/jobs", params={"limit": 1000}, headers=ALICE).json()["jobs"]
    assert seen == [job["id"] for job in everyone]  # oldest first, in one order
    assert all(job["user"] == "alice" for job in everyone)
    # another user's job is no cursor of yours: 404, as its id would be
    bobs = _submit(BOB)
    _is_problem(CLIENT.get("/api/v1/jobs", params={"cursor": bobs}, headers=ALICE), 404)
    _is_problem(CLIENT.get("/api/v1/jobs", params={"limit": 0}, headers=ALICE), 422)


class _SlowRefits:
    """A keeper whose refit runs until the test ends it: ``refit(wait)`` blocks its
    caller up to ``wait`` seconds, as the real one does while a fit runs."""

    def __init__(self) -> None:
        self.finished = threading.Event()

    def refit(self, wait_s: float = 0.0) -> dict[str, object]:
        self.finished.wait(wait_s)
        return self.refit_outcome(2, True)

    def refit_outcome(self, target: int, started: bool) -> dict[str, object]:
        return {"status": "done" if self.finished.is_set() else "running", "version": target}


def test_waiting_refits_hold_no_worker_thread_so_every_other_route_still_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fifty admins' ``refit?wait=600`` in flight (more than the 40 worker threads) must
    not stall a listing: the wait polls on the event loop. (When each wait held a thread,
    the listing waited for a refit to end: here, never, so it would time out.)"""
    keeper = _SlowRefits()
    monkeypatch.setattr(SERVICE, "durations", keeper)
    app = build_app(SERVICE)

    async def scenario() -> list[object]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            refits = [
                asyncio.create_task(client.post("/api/v1/model/refit?wait=600", headers=ADMIN))
                for _ in range(50)
            ]
            await asyncio.sleep(0.5)  # every refit is waiting by now
            try:
                listed = await asyncio.wait_for(client.get("/api/v1/jobs", headers=ADMIN), 30)
                assert listed.status_code == 200
                assert not any(task.done() for task in refits)  # they still wait
            finally:
                keeper.finished.set()
            answers = await asyncio.gather(*refits)
        return [answer.json()["status"] for answer in answers]

    assert asyncio.run(scenario()) == ["done"] * 50
