"""The published contract: the OpenAPI schema as the server behaves, and the
``Deprecation`` header on the old, unversioned paths.

FastAPI's own schema promises a 422 body it never sends (``HTTPValidationError``) and
leaves out the statuses routes raise. Here every operation declares each error it can
answer, all as one :class:`~ilucid.service.problems.Problem` (``application/problem+json``):

- 401 on every operation that needs a bearer token (all but /healthz, and /metrics when
  it is served publicly), declared as the ``bearer`` security scheme;
- 422 where there is a parameter or a body to get wrong, 400 (unparsable) and 413 (over
  the size limit) where there is a body, 404 where the path names a job;
- whatever a route declares itself (403, 409, 503: ``problem_statuses``).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic.json_schema import models_json_schema
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ilucid.service.problems import PROBLEM_MEDIA_TYPE, FieldError, Problem, problem_statuses

__all__ = ["DEPRECATED_SINCE", "Deprecated", "contract_schema", "legacy_prefixes"]

#: When the unversioned paths were deprecated (RFC 9745's ``Deprecation: @<epoch s>``)
DEPRECATED_SINCE = calendar.timegm((2026, 12, 7, 0, 0, 0))
#: Operations anyone may call without a token
_PUBLIC = {("/healthz", "get")}
_PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}
_JOB_PATH = re.compile(r"\{job_id\}")


def _problem_schemas() -> dict[str, Any]:
    _, defs = models_json_schema(
        [(Problem, "serialization"), (FieldError, "serialization")],
        ref_template="#/components/schemas/{model}",
    )
    return dict(defs.get("$defs", {}))


def _errors(path: str, operation: dict[str, Any], public: bool) -> set[int]:
    """The error statuses ``operation`` can answer beyond those its route declares."""
    statuses = {int(code) for code in operation.get("responses", {}) if code[0] in "45"}
    statuses.discard(422)  # FastAPI's guess: added back below where it holds
    if not public:
        statuses.add(401)
    if operation.get("parameters") or operation.get("requestBody"):
        statuses.add(422)
    if operation.get("requestBody"):
        statuses.update((400, 413))
    if _JOB_PATH.search(path):
        statuses.add(404)
    return statuses


def contract_schema(app: FastAPI, *, metrics_public: bool) -> dict[str, Any]:
    """The OpenAPI schema of ``app`` with every error it answers declared (see above)."""
    schema = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
    )
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    schemas.update(_problem_schemas())
    components["securitySchemes"] = {
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "an API token: `ilucid token create` (or --data-dir/admin.token)",
        }
    }
    schema["security"] = [{"bearer": []}]
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            public = (path, method) in _PUBLIC or (path == "/metrics" and metrics_public)
            if (path, method) in _PUBLIC:
                operation["security"] = []
            elif public:  # a token is read when sent, not needed
                operation["security"] = [{"bearer": []}, {}]
            responses = operation.setdefault("responses", {})
            errors = _errors(path, operation, public)
            responses.pop("422", None)
            for status, declared in problem_statuses(errors).items():
                responses[str(status)] = {
                    "description": declared["description"],
                    "content": {PROBLEM_MEDIA_TYPE: {"schema": _PROBLEM_REF}},
                }
    return schema


def legacy_prefixes(paths: Iterable[str]) -> tuple[str, ...]:
    """The first segments (``/jobs``, ``/policy``) of the old API paths among ``paths``."""
    return tuple(sorted({"/" + p.strip("/").split("/")[0] for p in paths if p.strip("/")}))


class Deprecated:
    """Marks each answer on an old, unversioned API path as deprecated (RFC 9745),
    with a link to its successor under ``prefix``; the paths move for one release."""

    def __init__(self, app: ASGIApp, *, old: tuple[str, ...], prefix: str) -> None:
        self.app = app
        self.old = old
        self.prefix = prefix

    def _is_old(self, path: str) -> bool:
        return any(path == p or path.startswith(p + "/") for p in self.old)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._is_old(scope["path"]):
            await self.app(scope, receive, send)
            return
        # the path as the client sent it (percent-encoded): a header is Latin-1 text
        raw = scope.get("raw_path") or quote(scope["path"]).encode("ascii")
        successor = self.prefix + raw.decode("latin-1").split("?", 1)[0]

        async def marked(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["Deprecation"] = f"@{DEPRECATED_SINCE}"
                headers.append("Link", f'<{successor}>; rel="successor-version"')
            await send(message)

        await self.app(scope, receive, marked)
