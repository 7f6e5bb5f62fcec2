"""REST API of the live scheduler (FastAPI; its OpenAPI schema at /openapi.json).

Every route but /healthz, /openapi.json and the dashboard page at / needs
``Authorization: Bearer <token>``. Users see, explain and cancel their own
jobs; admins see everything and may change the policy. The queue, the GPU map
(/nodes) and the /timeline counts are visible to every user, with owners and
job ids but never another user's command. /metrics shows every tenant's counts,
so it needs an admin token unless the service was started with
``metrics_public`` (``ilucid serve --metrics-public``, for a scraper on a trusted
network). Errors are JSON ``{"detail": "..."}`` with a status code that says
whose fault it is; a 422 for a malformed request also lists its ``errors``.

There is no /docs or /redoc: FastAPI's pages load Swagger UI and ReDoc from a
CDN, and would run that script on the origin where the dashboard keeps its
token. Any OpenAPI viewer can read /openapi.json instead. Every response carries
``X-Content-Type-Options: nosniff`` and a Content-Security-Policy (the
dashboard's own, else one that allows nothing and no framing).
"""

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel

from ilucid.service import routes_admin, routes_cluster, routes_jobs, routes_views
from ilucid.service.dashboard import CONTENT_SECURITY_POLICY, DASHBOARD_HTML, static_files
from ilucid.service.edge import (
    MAX_BODY_BYTES,
    BodyLimit,
    SecurityHeaders,
    body_fields,
    validation_answer,
)
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
    """422 whose ``detail`` is one sentence naming each field at fault (what the CLI
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
        description="Interpretable GPU scheduler: live service API",
        docs_url=None,  # Swagger UI and ReDoc would load script from a CDN: /openapi.json only
        redoc_url=None,
    )
    app.state.service = service
    app.state.metrics_public = metrics_public
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)
    app.add_middleware(SecurityHeaders)
    app.add_exception_handler(RequestValidationError, _invalid)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        # on the event loop, touching neither the lock nor the database: it answers
        # while every worker thread waits for a pass or a commit
        return {"status": "ok", "policy": service.policy_name, "backend": service.backend.name}

    app.include_router(routes_jobs.router)
    app.include_router(routes_cluster.router)
    app.include_router(routes_admin.router)
    app.include_router(routes_views.router)  # history, quotas, job outlook; records uptime
    app.add_api_route("/", _dashboard, methods=["GET"], response_class=HTMLResponse)
    app.mount("/static", static_files(), name="static")  # the dashboard's scripts, uPlot
    return app
