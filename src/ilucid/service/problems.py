"""Errors as problem details (RFC 9457, ``application/problem+json``).

Every error the API answers, whoever raises it (a route, the request validation, the
body limit, the router for an unknown path or method), has one shape: ``type``,
``title``, ``status``, ``detail`` (one sentence naming the field at fault, which the
CLI prints), and for a malformed request the structured ``errors``. A generated client
parses them all with one model, :class:`Problem`, which the schema declares once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

__all__ = [
    "PROBLEM_MEDIA_TYPE",
    "FieldError",
    "Problem",
    "install_problem_handlers",
    "problem_response",
]

PROBLEM_MEDIA_TYPE = "application/problem+json"


class FieldError(BaseModel):
    """One field at fault in a malformed request, as a program reads it."""

    type: str = Field(description="what was wrong (pydantic's error type, e.g. greater_than)")
    loc: list[str | int] = Field(description="where: body, query or path, then the field")
    msg: str = Field(description="what was wrong, in pydantic's words")
    input: Any = Field(None, description="the value refused, when short")


class Problem(BaseModel):
    """An error (RFC 9457 problem details): ``detail`` says in one sentence what to fix."""

    type: str = Field(
        "about:blank", description="a URI naming the kind of problem (about:blank: the status)"
    )
    title: str = Field(description="the status's name, e.g. Unprocessable Content")
    status: int = Field(ge=400, le=599, description="the HTTP status code")
    detail: str = Field(description="one sentence naming the field or the rule at fault")
    errors: list[FieldError] | None = Field(
        None, description="for a malformed request (422): each field at fault"
    )


def _title(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def problem_response(
    status: int,
    detail: str,
    *,
    errors: Sequence[Mapping[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """The answer for an error: a :class:`Problem` as ``application/problem+json``."""
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": _title(status),
        "status": status,
        "detail": detail,
    }
    if errors is not None:
        body["errors"] = list(errors)
    return JSONResponse(
        body, status_code=status, headers=dict(headers or {}), media_type=PROBLEM_MEDIA_TYPE
    )


#: The methods a 405's ``Allow`` header may name
_METHODS = ("DELETE", "GET", "PATCH", "POST", "PUT")


def _allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at this path (a 405's ``Allow`` header): the
    router's own answer names only the first route whose path matched."""
    methods = set()
    for method in _METHODS:
        probe = {**request.scope, "method": method}
        if any(route.matches(probe)[0] == Match.FULL for route in request.app.router.routes):
            methods.add(method)
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = ", ".join(_allowed_methods(request))
    detail = exc.detail if isinstance(exc.detail, str) else _title(exc.status_code)
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"no such path: {request.url.path}"
    elif exc.status_code == 405 and detail == "Method Not Allowed":
        detail = f"{request.method} is not allowed on {request.url.path} (see Allow)"
    return problem_response(exc.status_code, detail, headers=headers)


def install_problem_handlers(app: FastAPI) -> None:
    """Answer every HTTP error of ``app`` (a route's, the router's 404 and 405, the
    body parser's 400) as a problem; 422s are :func:`ilucid.service.edge.validation_answer`."""
    app.add_exception_handler(StarletteHTTPException, _http_error)


def problem_statuses(statuses: Iterable[int]) -> dict[int | str, dict[str, Any]]:
    """``responses=`` of a route: the error statuses it may answer beyond those every
    route of its kind answers (see :mod:`ilucid.service.api_contract`)."""
    return {status: {"description": _title(status)} for status in sorted(set(statuses))}
