"""Routes on the service itself: the policy, the duration model, the history export
and the metrics. Changing anything, and reading every tenant's figures, is an admin's."""

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import PlainTextResponse

from ilucid.core.policies import live_profiles
from ilucid.service.access import Live, Who, identity
from ilucid.service.duration_keeper import RefitRefused
from ilucid.service.edge import PolicyBody, query_number
from ilucid.service.history import export_history
from ilucid.service.metrics_export import render_metrics

__all__ = ["REFIT_MAX_WAIT_S", "router"]

#: Longest a ``POST /model/refit?wait=`` holds its answer, seconds
REFIT_MAX_WAIT_S = 600.0

router = APIRouter()


@router.get("/policy")
def get_policy(who: Who, service: Live) -> dict[str, Any]:
    return {"policy": service.policy_name, "allowed": list(live_profiles())}


@router.put("/policy")
def set_policy(body: PolicyBody, who: Who, service: Live) -> dict[str, str]:
    if not who.admin:
        raise HTTPException(403, "only an admin may change the policy")
    allowed = live_profiles()
    if body.policy not in allowed:
        raise HTTPException(422, f"policy must be one of {', '.join(allowed)}")
    service.set_policy(body.policy)
    return {"policy": body.policy}


@router.get("/model")
def model(who: Who, service: Live) -> dict[str, Any]:
    """The live duration model: its version, what it was fitted on, refit state."""
    return service.durations.status()


@router.post("/model/refit")
def refit(
    who: Who, service: Live, wait: Annotated[float, query_number(ge=0, le=REFIT_MAX_WAIT_S)] = 0.0
) -> dict[str, Any]:
    """Refit the duration model now in the background worker (admin); with ``wait``
    (seconds), answer once it is done: ``status`` is done, started, running or failed."""
    if not who.admin:
        raise HTTPException(403, "only an admin may refit the model")
    try:
        return service.durations.refit(wait)
    except RefitRefused as exc:
        raise HTTPException(409, str(exc)) from None


@router.get("/history.csv", response_class=PlainTextResponse)
def history(who: Who, service: Live) -> str:
    """Ended jobs as ilucid's generic trace (``ilucid whatif`` replays it)."""
    if not who.admin:
        raise HTTPException(403, "only an admin may export the history")
    return export_history(service)


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(request: Request, service: Live) -> str:
    """Prometheus text: jobs by state, pending by class and tenant, GPUs, preemptions,
    decisions by reason, and the scheduling-pass latency histogram. Needs an admin
    token unless the service serves it publicly (``--metrics-public``)."""
    if not request.app.state.metrics_public:
        who = identity(service, request.headers.get("authorization"))
        if not who.admin:
            raise HTTPException(403, "only an admin may read /metrics (or serve --metrics-public)")
    return render_metrics(service)
