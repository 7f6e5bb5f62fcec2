"""REST API of the live scheduler (FastAPI), under ``/api/v1`` (its OpenAPI schema at
``/api/v1/openapi.json``; docs/api.md). The paths before it (``/jobs``...) answer as
aliases for one release, with a ``Deprecation`` header; /healthz and /metrics stay
unversioned, where probes and scrapers look.

Every route but /healthz, the schema and the dashboard page at / needs
``Authorization: Bearer <token>``. Users see, explain and cancel their own
jobs; admins see everything and may change the policy. The queue, the GPU map
(/nodes) and the /timeline counts are visible to every user, with owners and
job ids but never another user's command. /metrics shows every tenant's counts,
so it needs an admin token unless the service was started with
``metrics_public`` (``ilucid serve --metrics-public``, for a scraper on a trusted
network). Errors are problem details (RFC 9457, ``application/problem+json``) whose
``detail`` says what to fix, with a status code that says whose fault it is; a 422 for a
malformed request also lists its ``errors`` (:mod:`ilucid.service.problems`).

There is no /docs or /redoc: FastAPI's pages load Swagger UI and ReDoc from a
CDN, and would run that script on the origin where the dashboard keeps its
token. Any OpenAPI viewer can read /openapi.json instead. Every response carries
``X-Content-Type-Options: nosniff`` and a Content-Security-Policy (the
dashboard's own, else one that allows nothing and no framing).
"""

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel

from ilucid import __version__
from ilucid.service import routes_admin, routes_cluster, routes_jobs, routes_legacy, routes_views
from ilucid.service.api_contract import Deprecated, contract_schema, legacy_prefixes
from ilucid.service.dashboard import CONTENT_SECURITY_POLICY, DASHBOARD_HTML, static_files
from ilucid.service.edge import MAX_BODY_BYTES, BodyLimit, SecurityHeaders, validation_answer
from ilucid.service.problems import install_problem_handlers
from ilucid.service.request_models import body_fields
from ilucid.service.routes_jobs import API_PREFIX
from ilucid.service.scheduler_service import SchedulerService

__all__ = ["build_app"]


def _body_fields(route: object) -> list[str]:
    """The field names of the request body ``route`` takes (none without a body model)."""
    names: list[str] = []
    if isinstance(route, APIRoute):
        for param in route.dependant.body_params:
            model = param.field_info.annotation
            if isinstance(model, type) and issubclass(model, BaseModel):
                names.extend(body_fields(model))
    return names


async def _invalid(request: Request, exc: Exception) -> JSONResponse:
    """422, a problem whose ``detail`` is one sentence naming each field at fault (what the CLI
    prints; an unknown field with the closest known one), with the structured errors
    under ``errors``."""
    assert isinstance(exc, RequestValidationError)
    return validation_answer(exc.errors(), _body_fields(request.scope.get("route")))


def _dashboard() -> HTMLResponse:
    """The web dashboard (no token needed to load it; its API calls need one)."""
    return HTMLResponse(
        DASHBOARD_HTML,
        headers={
            "Content-Security-Policy": CONTENT_SECURITY_POLICY,
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-cache",
        },
    )


def build_app(service: SchedulerService, *, metrics_public: bool = False) -> FastAPI:
    """The API of ``service``. /metrics needs an admin token unless ``metrics_public``."""
    app = FastAPI(
        title="ilucid",
        description="Interpretable GPU scheduler: live service API (docs/api.md). Errors are"
        " problem details (RFC 9457); the unversioned paths are deprecated aliases.",
        version=__version__,
        openapi_url=f"{API_PREFIX}/openapi.json",
        # operation ids are the routes' names (submit, list_jobs, explain, cancel): what a
        # generated client calls its functions
        generate_unique_id_function=lambda route: route.name,
        docs_url=None,  # Swagger UI and ReDoc would load script from a CDN: /openapi.json only
        redoc_url=None,
    )
    app.state.service = service
    app.state.metrics_public = metrics_public
    versioned = (routes_jobs.router, routes_cluster.router, routes_admin.router)
    old_paths = [getattr(r, "path", "") for router in versioned for r in router.routes]
    old_paths.append("/openapi.json")
    app.add_middleware(Deprecated, old=legacy_prefixes(old_paths), prefix=API_PREFIX)
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)
    app.add_middleware(SecurityHeaders)
    install_problem_handlers(app)
    app.add_exception_handler(RequestValidationError, _invalid)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        # on the event loop, touching neither the lock nor the database: it answers
        # while every worker thread waits for a pass or a commit
        return {"status": "ok", "policy": service.policy_name, "backend": service.backend.name}

    for router in versioned:
        app.include_router(router, prefix=API_PREFIX)
    app.include_router(routes_admin.metrics_router)  # /metrics, where scrapers look
    # the old paths for one release: the three that changed first, then the rest as they were
    app.include_router(routes_legacy.router)
    for router in versioned:
        app.include_router(router, include_in_schema=False)
    # the dashboard's own views: internal, out of the public schema
    app.include_router(routes_views.router, include_in_schema=False)
    app.add_api_route(
        "/", _dashboard, methods=["GET"], response_class=HTMLResponse, include_in_schema=False
    )
    app.add_api_route(
        "/openapi.json", lambda: app.openapi(), methods=["GET"], include_in_schema=False
    )
    app.mount("/static", static_files(), name="static")  # the dashboard's scripts, uPlot

    def _schema() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = contract_schema(app, metrics_public=metrics_public)
        return app.openapi_schema

    app.openapi = _schema  # type: ignore[method-assign]
    return app
