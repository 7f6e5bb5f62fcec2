"""Strict input at the API's edge: non-finite, huge, coercible, unencodable or oversized
submissions get a 4xx naming the field, never a 5xx, and never poison the job list."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory
from ilucid.service.api import build_app
from ilucid.service.auth import create_token
from ilucid.service.db import make_engine, migrate
from ilucid.service.edge import MAX_BODY_BYTES
from ilucid.service.scheduler_service import SchedulerService

_folder = Path(tempfile.mkdtemp(prefix="ilucid-strict-"))
_url = f"sqlite:///{_folder / 'strict.db'}"
migrate(_url)
_engine = make_engine(_url)
HEADERS = {
    "Authorization": f"Bearer {create_token(_engine, 'root', 'ops', admin=True)}",
    "Content-Type": "application/json",
}
CLIENT = TestClient(
    build_app(SchedulerService(_engine, LocalBackend(_folder, GpuInventory(4, "virtual", 0, "v")))),
    raise_server_exceptions=False,
)


def post(raw: str) -> tuple[int, object]:
    response = CLIENT.post("/jobs", content=raw.encode("utf-8", "surrogatepass"), headers=HEADERS)
    return response.status_code, response.json()


@pytest.mark.parametrize("field", ["gpus", "estimate_s", "checkpoint_s"])
@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e309", "-1e309", "1e300"])
def test_non_finite_and_huge_numbers_are_refused_with_the_field(field: str, number: str) -> None:
    status, body = post(f'{{"command": ["true"], "{field}": {number}}}')
    assert status == 422, body
    assert isinstance(body, dict) and body["errors"][0]["loc"] == ["body", field]
    assert body["detail"].startswith(f"{field}: must be ")


@pytest.mark.parametrize("value", ['"2"', "true", "2.5", "[2]"])
def test_gpus_must_be_a_whole_number_not_something_coercible(value: str) -> None:
    status, body = post(f'{{"command": ["true"], "gpus": {value}}}')
    assert status == 422 and body["errors"][0]["loc"] == ["body", "gpus"]  # type: ignore[index]
    assert body["detail"] == f"gpus: must be a whole number (got {value})"  # type: ignore[index]


def test_a_number_with_no_fraction_is_the_whole_number_json_schema_says_it_is() -> None:
    # JSON Schema's "integer" holds 2.0: a generated client may send it so
    status, body = post('{"command": ["true"], "gpus": 2.0}')
    assert status == 201, body


def test_a_lone_surrogate_is_refused_and_the_job_list_stays_readable() -> None:
    status, body = post('{"command": ["echo", "\\ud800"]}')
    assert status == 422, body
    assert "UTF-8" in json.dumps(body)
    assert CLIENT.get("/jobs", headers=HEADERS).status_code == 200


def test_oversized_bodies_and_commands_are_refused() -> None:
    big = json.dumps({"command": ["echo", "x" * (MAX_BODY_BYTES + 1)]})
    response = CLIENT.post("/jobs", content=big, headers=HEADERS)
    assert response.status_code == 413 and "bytes" in response.json()["detail"]
    many = json.dumps({"command": ["echo"] + ["y" * 1000] * 200})
    status, body = post(many)
    assert status == 422 and "at most 131,072" in json.dumps(body)


def test_cwd_must_be_absolute() -> None:
    status, body = post('{"command": ["true"], "cwd": "relative/dir"}')
    assert status == 422 and body["errors"][0]["loc"] == ["body", "cwd"]  # type: ignore[index]
    assert body["detail"] == 'cwd: must be an absolute path (got "relative/dir")'  # type: ignore[index]


def test_a_valid_submission_is_still_accepted_and_listed() -> None:
    status, body = post('{"command": ["true"], "gpus": 1, "estimate_s": 60, "cwd": "/tmp"}')
    assert status == 201, body
    listed = CLIENT.get("/jobs", headers=HEADERS)
    assert listed.status_code == 200
    assert body["id"] in {j["id"] for j in listed.json()}  # type: ignore[index]
