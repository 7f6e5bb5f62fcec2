"""Routes on the service itself: the policy, the duration model, the history export
and the metrics. Changing anything, and reading every tenant's figures, is an admin's."""

import asyncio
from typing import Annotated

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import PlainTextResponse
from starlette.concurrency import run_in_threadpool

from ilucid.core.policies import live_profiles
from ilucid.service.access import Live, Who, identity
from ilucid.service.api_models import ModelStatus, PolicySet, PolicyView, RefitAnswer
from ilucid.service.duration_keeper import RefitRefused
from ilucid.service.edge import query_number
from ilucid.service.history import export_history
from ilucid.service.metrics_export import render_metrics
from ilucid.service.problems import problem_statuses
from ilucid.service.request_models import PolicyBody

__all__ = ["REFIT_MAX_WAIT_S", "metrics_router", "router"]

#: Longest a ``POST /model/refit?wait=`` holds its answer, seconds
REFIT_MAX_WAIT_S = 600.0
#: How often a waiting refit request looks again, seconds
REFIT_POLL_S = 0.2

router = APIRouter()
#: /metrics stays where Prometheus scrapers look for it, unversioned
metrics_router = APIRouter()


@router.get("/policy")
def get_policy(who: Who, service: Live) -> PolicyView:
    return PolicyView(policy=service.policy_name, allowed=list(live_profiles()))


@router.put("/policy", responses=problem_statuses([403]))
def set_policy(body: PolicyBody, who: Who, service: Live) -> PolicySet:
    if not who.admin:
        raise HTTPException(403, "only an admin may change the policy")
    service.set_policy(body.policy)
    return PolicySet(policy=body.policy)


@router.get("/model")
def model(who: Who, service: Live) -> ModelStatus:
    """The live duration model: its version, what it was fitted on, refit state."""
    return ModelStatus.model_validate(service.durations.status())


@router.post(
    "/model/refit", responses=problem_statuses([403, 409]), response_model_exclude_none=True
)
async def refit(
    who: Who, service: Live, wait: Annotated[float, query_number(ge=0, le=REFIT_MAX_WAIT_S)] = 0.0
) -> RefitAnswer:
    """Refit the duration model now in the background worker (admin); with ``wait``
    (seconds), answer once it is done: ``status`` is done, started, running or failed.

    The wait holds no worker thread: it polls on the event loop. Requests that each held
    a thread for minutes would take the pool every other route needs (40 of them)."""
    if not who.admin:
        raise HTTPException(403, "only an admin may refit the model")
    try:
        answer = await run_in_threadpool(service.durations.refit, 0.0)
    except RefitRefused as exc:
        raise HTTPException(409, str(exc)) from None
    target, started = int(answer["version"]), answer["status"] == "started"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while answer["status"] in ("started", "running") and loop.time() < deadline:
        await asyncio.sleep(min(REFIT_POLL_S, max(0.0, deadline - loop.time())))
        answer = service.durations.refit_outcome(target, started)
    return RefitAnswer.model_validate(answer)


@router.get("/history.csv", response_class=PlainTextResponse, responses=problem_statuses([403]))
def history(who: Who, service: Live) -> str:
    """Ended jobs as ilucid's generic trace (``ilucid whatif`` replays it)."""
    if not who.admin:
        raise HTTPException(403, "only an admin may export the history")
    return export_history(service)


@metrics_router.get("/metrics", response_class=PlainTextResponse, responses=problem_statuses([403]))
def metrics(request: Request, service: Live) -> str:
    """Prometheus text: jobs by state, pending by class and tenant, GPUs, preemptions,
    decisions by reason, and the scheduling-pass latency histogram. Needs an admin
    token unless the service serves it publicly (``--metrics-public``)."""
    if not request.app.state.metrics_public:
        who = identity(service, request.headers.get("authorization"))
        if not who.admin:
            raise HTTPException(403, "only an admin may read /metrics (or serve --metrics-public)")
    return render_metrics(service)
