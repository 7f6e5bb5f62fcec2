"""The API's edge, for every route the app has (found by walking the app, so a route
added later is covered): hostile query values get 4xx, never 5xx; every numeric query
parameter has bounds; an unknown body field is refused with the closest known name.

The app is the real one (SQLite in a temporary folder, the local backend on virtual
GPUs), nothing mocked.
"""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path
from typing import Any

import pytest
from fastapi.openapi.utils import get_openapi
from fastapi.testclient import TestClient

from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory
from ilucid.service import routes_views
from ilucid.service.api import build_app
from ilucid.service.auth import create_token
from ilucid.service.db import make_engine, migrate
from ilucid.service.edge import QUERY_INT_MAX, QUERY_NUMBER_MAX, QUERY_TEXT_MAX
from ilucid.service.request_models import SubmitBody
from ilucid.service.routes_views import HISTORY_PAGE_MAX
from ilucid.service.scheduler_service import SchedulerService

_folder = Path(tempfile.mkdtemp(prefix="ilucid-edges-"))
_url = f"sqlite:///{_folder / 'edges.db'}"
migrate(_url)
_engine = make_engine(_url)
ADMIN = {"Authorization": f"Bearer {create_token(_engine, 'root', 'ops', admin=True)}"}
APP = build_app(
    SchedulerService(_engine, LocalBackend(_folder, GpuInventory(2, "virtual", 0, "v")))
)
CLIENT = TestClient(APP, raise_server_exceptions=False)

#: what a client may put in any query parameter: past every 64-bit integer, negative,
#: not a number, not finite, empty, long
HOSTILE = [
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "1" + "0" * 400,
    "-1",
    "0",
    "abc",
    "1.5",
    "nan",
    "inf",
    "-inf",
    "1e309",
    "",
    "x" * 5000,
]


#: the app's own description of itself: every route, its methods and query parameters,
#: with the dashboard's internal views (left out of the published schema)
SCHEMA = APP.openapi()
_VIEWS = [copy.copy(route) for route in routes_views.router.routes]
for _route in _VIEWS:
    _route.include_in_schema = True
_PATHS = {**SCHEMA["paths"], **get_openapi(title="views", version="0", routes=_VIEWS)["paths"]}
ROUTES = [(m.upper(), path, op) for path, ops in _PATHS.items() for m, op in ops.items()]
WITH_QUERY = [
    (method, path, param["name"], param["schema"])
    for method, path, op in ROUTES
    for param in op.get("parameters", [])
    if param["in"] == "query"
]


def test_the_walk_finds_the_routes_and_their_query_parameters() -> None:
    named = {(m, p, q) for m, p, q, _ in WITH_QUERY}
    assert ("GET", "/views/history", "cursor") in named
    assert ("GET", "/api/v1/timeline", "minutes") in named
    assert len(ROUTES) >= 15


@pytest.fixture(scope="module")
def job() -> str:
    response = CLIENT.post("/jobs", json={"command": ["true"], "gpus": 0}, headers=ADMIN)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _path(template: str, job: str) -> str:
    return template.replace("{job_id}", job)


@pytest.mark.parametrize(("method", "template", "name"), [q[:3] for q in WITH_QUERY])
def test_hostile_query_values_never_get_a_5xx(
    method: str, template: str, name: str, job: str
) -> None:
    failures = []
    for value in HOSTILE:
        response = CLIENT.request(method, _path(template, job), params={name: value}, headers=ADMIN)
        if response.status_code >= 500:
            failures.append(f"{name}={value[:30]!r}: {response.status_code} {response.text[:200]}")
    assert not failures, "\n".join(failures)


def test_a_huge_history_page_is_refused_with_the_bound() -> None:
    response = CLIENT.get("/views/history", params={"limit": 9223372036854775807}, headers=ADMIN)
    assert response.status_code == 422, response.text
    assert response.json()["detail"].startswith(f"limit: must be <= {HISTORY_PAGE_MAX}")


def _bounded(schema: dict[str, Any]) -> bool:
    """A number with a lower and an upper bound within the shared limits, text with a
    length within them (or one of a list)."""
    kinds = [k for k in schema.get("anyOf", [schema]) if k.get("type") != "null"]
    for kind in kinds:
        low = "minimum" in kind or "exclusiveMinimum" in kind
        high = kind.get("maximum", kind.get("exclusiveMaximum"))
        if kind.get("type") == "integer":
            ok = low and high is not None and high <= QUERY_INT_MAX
        elif kind.get("type") == "number":
            ok = low and high is not None and high <= QUERY_NUMBER_MAX
        else:
            ok = "enum" in kind or kind.get("maxLength", QUERY_TEXT_MAX + 1) <= QUERY_TEXT_MAX
        if not ok:
            return False
    return True


def test_every_query_parameter_is_bounded_by_the_shared_limits() -> None:
    unbounded = [
        f"{m} {p} {name}: {schema}" for m, p, name, schema in WITH_QUERY if not _bounded(schema)
    ]
    assert not unbounded, unbounded


# -- unknown body fields ------------------------------------------------------------------
def _post(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = CLIENT.post("/jobs", json=body, headers=ADMIN)
    return response.status_code, response.json()


def test_a_mistyped_field_is_refused_with_the_close_match() -> None:
    status, body = _post({"command": ["true"], "gpus": 0, "estimate": 5})
    assert status == 422, body
    assert body["detail"] == "estimate: unknown field (did you mean estimate_s?)"
    assert body["errors"][0]["loc"] == ["body", "estimate"]


def test_an_alias_is_suggested_and_a_far_name_lists_the_fields() -> None:
    status, body = _post({"command": ["true"], "clas": "inference"})
    assert status == 422 and body["detail"] == "clas: unknown field (did you mean class?)"
    status, body = _post({"command": ["true"], "zzz": 1})
    assert status == 422 and body["detail"].startswith("zzz: unknown field (the fields are ")
    assert "estimate_s" in body["detail"]


def test_every_body_model_refuses_unknown_fields() -> None:
    response = CLIENT.put("/policy", json={"policy": "fifo", "polcy": "x"}, headers=ADMIN)
    assert response.status_code == 422, response.text
    assert response.json()["detail"] == "polcy: unknown field (did you mean policy?)"
    for method, path, op in ROUTES:
        for content in op.get("requestBody", {}).get("content", {}).values():
            name = content["schema"]["$ref"].rsplit("/", 1)[-1]
            model = SCHEMA["components"]["schemas"][name]
            assert model.get("additionalProperties") is False, (method, path, name)


def test_the_known_names_still_work_by_alias_and_by_name() -> None:
    assert SubmitBody.model_validate({"command": ["x"], "job_class": "inference"}).job_class
    status, body = _post({"command": ["true"], "gpus": 0, "class": "inference", "estimate_s": 5})
    assert status == 201, body
