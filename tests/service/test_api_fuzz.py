"""Property-based API fuzzing: arbitrary bodies and paths never produce a 5xx.

Runs well over 1,000 generated requests against the real app (SQLite, local
backend with virtual GPUs); malformed submissions must get a 4xx whose
detail names the field at fault.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ilucid.backends.local import GpuInventory, LocalBackend
from ilucid.service.api import build_app
from ilucid.service.auth import create_token
from ilucid.service.db import make_engine, migrate
from ilucid.service.scheduler_service import JobRequest, SchedulerService

_folder = Path(tempfile.mkdtemp(prefix="ilucid-fuzz-"))
_url = f"sqlite:///{_folder / 'fuzz.db'}"
migrate(_url)
_engine = make_engine(_url)
TOKEN = create_token(_engine, "fuzz", "fuzz")
SERVICE = SchedulerService(_engine, LocalBackend(_folder, GpuInventory(4, "virtual", 0, "v")))
CLIENT = TestClient(build_app(SERVICE), raise_server_exceptions=False)
HEADERS = {"Authorization": f"Bearer {TOKEN}"}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)
bodies = st.dictionaries(
    st.sampled_from(["command", "gpus", "class", "estimate_s", "checkpoint_s", "cwd", "x"]),
    json_values | st.lists(st.text(max_size=10), max_size=3),
    max_size=6,
)
FUZZ = settings(max_examples=700, deadline=None, suppress_health_check=list(HealthCheck))


@FUZZ
@given(bodies)
def test_random_submissions_never_5xx(body: dict[str, Any]) -> None:
    response = CLIENT.post("/jobs", json=body, headers=HEADERS)
    assert response.status_code < 500, (body, response.text)
    if response.status_code == 422:
        detail = response.json()["detail"]
        if isinstance(detail, list):  # pydantic: each error names its field
            assert all(error["loc"] for error in detail)
        else:
            assert isinstance(detail, str) and detail


@FUZZ
@given(
    st.sampled_from(["GET", "DELETE"]),
    st.text(max_size=30),
    st.sampled_from(["", "/logs", "/explain", "/profile", "/logs?stream=x"]),
)
def test_random_job_paths_never_5xx(method: str, job_id: str, suffix: str) -> None:
    path = "/jobs/" + quote(job_id, safe="") + suffix  # any id, properly encoded
    response = CLIENT.request(method, path, headers=HEADERS)
    assert response.status_code < 500, (path, response.text)


def test_field_level_messages_for_common_mistakes() -> None:
    missing = CLIENT.post("/jobs", json={"gpus": 1}, headers=HEADERS)
    assert missing.status_code == 422
    assert missing.json()["detail"][0]["loc"] == ["body", "command"]
    negative = CLIENT.post("/jobs", json={"command": ["true"], "gpus": -1}, headers=HEADERS)
    assert negative.json()["detail"][0]["loc"] == ["body", "gpus"]
    nul = CLIENT.post("/jobs", json={"command": ["echo", "a\x00b"]}, headers=HEADERS)
    assert nul.status_code == 422 and "NUL" in nul.json()["detail"]


def test_a_job_that_cannot_launch_fails_with_its_reason(tmp_path: Path) -> None:
    # (the fuzzed jobs above are never launched: their commands are random text)
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    migrate(url)
    service = SchedulerService(
        make_engine(url), LocalBackend(tmp_path, GpuInventory(1, "virtual", 0, "v"))
    )
    job = service.submit(JobRequest(["true"], gpus=1, cwd=str(tmp_path / "missing")))
    service.reconcile()
    client = TestClient(build_app(service))
    token = create_token(service.engine, "root", "ops", admin=True)
    shown = client.get(f"/jobs/{job}", headers={"Authorization": f"Bearer {token}"}).json()
    assert shown["state"] == "failed"
    assert "could not be launched" in shown["transitions"][-1]["reason"]
    service.reconcile()  # and the loop goes on
