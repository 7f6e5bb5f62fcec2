"""REST API of the live scheduler (FastAPI; its OpenAPI schema at /openapi.json).

Every route but /healthz, /openapi.json and the dashboard page at / needs
``Authorization: Bearer <token>``. Users see, explain and cancel their own
jobs; admins see everything and may change the policy. The queue, the GPU map
(/nodes) and the /timeline counts are visible to every user, with owners and
job ids but never another user's command. /metrics shows every tenant's counts,
so it needs an admin token unless the service was started with
``metrics_public`` (``ilucid serve --metrics-public``, for a scraper on a trusted
network). Errors are JSON ``{"detail": "..."}`` with a status code that says
whose fault it is.

There is no /docs or /redoc: FastAPI's pages load Swagger UI and ReDoc from a
CDN, and would run that script on the origin where the dashboard keeps its
token. Any OpenAPI viewer can read /openapi.json instead. Every response carries
``X-Content-Type-Options: nosniff`` and a Content-Security-Policy (the
dashboard's own, else one that allows nothing and no framing).
"""

import json
from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse
from sqlalchemy import select
from sqlalchemy.orm import Session

from ilucid.service.auth import Identity, authenticate
from ilucid.service.dashboard import CONTENT_SECURITY_POLICY, DASHBOARD_HTML
from ilucid.service.db import DecisionRow, JobRow, TransitionRow
from ilucid.service.duration_keeper import RefitRefused
from ilucid.service.edge import (
    MAX_BODY_BYTES,
    BodyLimit,
    PolicyBody,
    SecurityHeaders,
    SubmitBody,
    json_safe,
)
from ilucid.service.history import export_history, gpu_holders, timeline
from ilucid.service.latency import BUCKETS as PASS_BUCKETS
from ilucid.service.live_policies import LIVE_POLICIES
from ilucid.service.scheduler_service import JobRequest, SchedulerService, ServiceError

__all__ = ["build_app", "gpu_holders", "timeline"]

#: /queue explains only this many jobs from its head: each explanation asks the placer
QUEUE_REASONS = 200
#: Longest window /timeline serves, minutes (a week)
TIMELINE_MAX_MINUTES = 7 * 24 * 60
#: Longest a ``POST /model/refit?wait=`` holds its answer, seconds
REFIT_MAX_WAIT_S = 600.0


def _histogram(name: str, counts: Sequence[int], total: float, count: int) -> list[str]:
    """A histogram over ``PASS_BUCKETS`` in the exposition format (cumulative buckets)."""
    lines = [f"# TYPE {name} histogram"]
    cumulative = 0
    for bound, n in zip(PASS_BUCKETS, counts, strict=False):
        cumulative += n
        lines.append(f'{name}_bucket{{le="{bound:g}"}} {cumulative}')
    lines.append(f'{name}_bucket{{le="+Inf"}} {count}')
    return [*lines, f"{name}_sum {total:.6f}", f"{name}_count {count}"]


def _label(value: object) -> str:
    """A Prometheus label value, escaped as the exposition format requires (backslash,
    double quote, newline): a tenant name cannot end its label and add a line."""
    text = str(value)
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _job_json(row: JobRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "user": row.user,
        "tenant": row.tenant,
        "class": row.job_class,
        "gpus": row.gpus,
        "command": json.loads(row.command),
        "state": row.state,
        "submit_time": row.submit_time,
        "first_start": row.first_start,
        "end_time": row.end_time,
        "exit_code": row.exit_code,
        "gpu_indices": row.gpu_indices,
        "preemptions": row.preemptions,
        "estimate_s": row.estimate_s,
        "model_estimate_s": row.model_estimate_s,
        "estimate_version": row.estimate_version,
    }


def estimate_json(row: JobRow) -> dict[str, Any]:
    """The estimate the scheduler used and where it came from; both the user's and the
    model's are shown (the user's wins when given)."""
    note = row.estimate_note or "no model estimate recorded for this job"
    seconds: float | None
    if row.estimate_s is not None:
        source, seconds = "user", row.estimate_s
        text = f"estimate {row.estimate_s:,.0f} s given by the user (the model's: {note})"
    else:
        source, seconds, text = row.estimate_version or "none", row.model_estimate_s, note
    return {
        "seconds": seconds,
        "source": source,
        "user_s": row.estimate_s,
        "model_s": row.model_estimate_s,
        "version": row.estimate_version,
        "text": text,
    }


def build_app(service: SchedulerService, *, metrics_public: bool = False) -> FastAPI:
    """The API of ``service``. /metrics needs an admin token unless ``metrics_public``."""
    app = FastAPI(
        title="ilucid",
        description="Interpretable GPU scheduler: live service API",
        docs_url=None,  # Swagger UI and ReDoc would load script from a CDN: /openapi.json only
        redoc_url=None,
    )
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)
    app.add_middleware(SecurityHeaders)
    engine = service.engine

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = []
        for error in exc.errors():
            kept = {k: v for k, v in error.items() if k in ("type", "loc", "msg")}
            if "input" in error and len(repr(error["input"])) <= 200:
                kept["input"] = error["input"]
            errors.append(json_safe(kept))
        return JSONResponse({"detail": errors}, status_code=422)

    # sync, so in a worker thread: every check asks the database (revocation is immediate)
    def identity(authorization: Annotated[str | None, Header()] = None) -> Identity:
        if not authorization or not authorization.startswith("Bearer "):
            raise HTTPException(401, "missing bearer token (Authorization: Bearer <token>)")
        who = authenticate(engine, authorization.removeprefix("Bearer ").strip())
        if who is None:
            raise HTTPException(401, "unknown token")
        return who

    Who = Annotated[Identity, Depends(identity)]

    def metrics_reader(who: Who) -> None:
        if not who.admin:
            raise HTTPException(403, "only an admin may read /metrics (or serve --metrics-public)")

    def own_job(session: Session, job_id: str, who: Identity) -> JobRow:
        row = session.get(JobRow, job_id)
        if row is None or (not who.admin and row.user != who.user):
            raise HTTPException(404, f"no job {job_id} of yours")
        return row

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok", "policy": service.policy_name, "backend": service.backend.name}

    @app.post("/jobs", status_code=201)
    async def submit(body: SubmitBody, who: Who) -> dict[str, str]:
        # on the event loop: one short commit costs less than the hop to a worker thread
        try:
            job_id = service.submit(
                JobRequest(
                    command=body.command,
                    gpus=body.gpus,
                    job_class=body.job_class,
                    user=who.user,
                    tenant=who.tenant,
                    cwd=body.cwd,
                    estimate_s=body.estimate_s,
                    checkpoint_s=body.checkpoint_s,
                    run_as=who.unix_user,
                )
            )
        except ServiceError as exc:
            raise HTTPException(422, str(exc)) from None
        return {"id": job_id}

    @app.get("/jobs")
    def list_jobs(who: Who, state: str | None = None) -> list[dict[str, Any]]:
        with Session(engine) as session:
            query = select(JobRow).order_by(JobRow.submit_time, JobRow.id)
            if not who.admin:
                query = query.where(JobRow.user == who.user)
            if state:
                query = query.where(JobRow.state == state)
            return [_job_json(r) for r in session.scalars(query)]

    @app.get("/jobs/{job_id}")
    def show(job_id: str, who: Who) -> dict[str, Any]:
        with Session(engine) as session:
            row = own_job(session, job_id, who)
            result = _job_json(row)
            result["transitions"] = [
                {"time": t.time, "from": t.from_state, "to": t.to_state, "reason": t.reason}
                for t in session.scalars(
                    select(TransitionRow)
                    .where(TransitionRow.job_id == job_id)
                    .order_by(TransitionRow.id)
                )
            ]
            return result

    @app.delete("/jobs/{job_id}")
    def cancel(job_id: str, who: Who) -> dict[str, str]:
        with Session(engine) as session:
            own_job(session, job_id, who)
        return {"id": job_id, "state": service.cancel(job_id)}

    @app.get("/jobs/{job_id}/logs", response_class=PlainTextResponse)
    def logs(
        job_id: str, who: Who, stream: Annotated[str, Query(pattern="^(stdout|stderr)$")] = "stdout"
    ) -> str:
        with Session(engine) as session:
            own_job(session, job_id, who)
        return service.backend.logs(job_id, stream)

    @app.get("/jobs/{job_id}/explain")
    def explain(job_id: str, who: Who) -> dict[str, Any]:
        with Session(engine) as session:
            row = own_job(session, job_id, who)
            estimate = estimate_json(row)
            decisions = [
                {"time": d.time, "action": d.action, "code": d.code, "message": d.message}
                for d in session.scalars(
                    select(DecisionRow).where(DecisionRow.job_id == job_id).order_by(DecisionRow.id)
                )
            ]
            state = row.state
        now_why = service.explain(job_id) if state in ("pending", "running") else state
        return {
            "id": job_id,
            "state": state,
            "why": now_why,
            "estimate": estimate,
            "decisions": decisions,
        }

    @app.get("/jobs/{job_id}/profile")
    def profile(job_id: str, who: Who) -> dict[str, float]:
        """GPU utilisation and memory the live profiler measured for the job."""
        with Session(engine) as session:
            own_job(session, job_id, who)
        return service.profile(job_id)

    @app.get("/queue")
    def queue(who: Who) -> list[dict[str, Any]]:
        """Pending jobs in policy order; the first :data:`QUEUE_REASONS` say why they wait.

        Every pending job is listed (positions make sense only for the whole queue),
        with its owner and size but never its command."""
        entries = service.queue()
        columns = (JobRow.id, JobRow.user, JobRow.tenant, JobRow.job_class, JobRow.gpus)
        with Session(engine) as session:
            rows = {
                r.id: r for r in session.execute(select(*columns).where(JobRow.state == "pending"))
            }
            missing = [job_id for job_id, _, _ in entries if job_id not in rows]
            if missing:  # started or ended since service.queue(): still show who and what
                rows.update(
                    (r.id, r)
                    for r in session.execute(select(*columns).where(JobRow.id.in_(missing)))
                )
        result = []
        for index, (job_id, position, start) in enumerate(entries):
            row = rows.get(job_id)
            result.append(
                {
                    "id": job_id,
                    "position": position,
                    "expected_start": start,
                    "user": row.user if row is not None else None,
                    "tenant": row.tenant if row is not None else None,
                    "class": row.job_class if row is not None else None,
                    "gpus": row.gpus if row is not None else None,
                    "reason": (service.explain(job_id) or None) if index < QUEUE_REASONS else None,
                }
            )
        return result

    @app.get("/nodes")
    def nodes(who: Who) -> list[dict[str, Any]]:
        """Nodes with their free GPUs and, per GPU, the running job holding it (or null)."""
        with Session(engine) as session:
            held = session.execute(
                select(JobRow.id, JobRow.gpu_indices).where(JobRow.state == "running")
            ).all()
        with service.lock:
            free = service.scheduler.free
            cluster_nodes = service.cluster.nodes
            holders = gpu_holders([node.num_gpus for node in cluster_nodes], held)
            return [
                {
                    "name": node.name,
                    "gpus": node.num_gpus,
                    "gpu_type": node.gpu_type,
                    "gpu_memory_gb": node.gpu_memory_gb,
                    "free_gpus": free.free[index],
                    "gpu_jobs": holders[index],
                }
                for index, node in enumerate(cluster_nodes)
            ]

    @app.get("/timeline")
    def get_timeline(
        who: Who,
        minutes: Annotated[float, Query(gt=0, le=TIMELINE_MAX_MINUTES)] = 60,
    ) -> dict[str, Any]:
        """Busy GPUs, pending and running jobs over the last ``minutes`` as step series."""
        now = service.clock()
        result = timeline(engine, now - minutes * 60, now)
        with service.lock:
            result["total_gpus"] = service.cluster.total_gpus
        return result

    @app.get("/policy")
    def get_policy(who: Who) -> dict[str, Any]:
        return {"policy": service.policy_name, "allowed": list(LIVE_POLICIES)}

    @app.put("/policy")
    def set_policy(body: PolicyBody, who: Who) -> dict[str, str]:
        if not who.admin:
            raise HTTPException(403, "only an admin may change the policy")
        if body.policy not in LIVE_POLICIES:
            raise HTTPException(422, f"policy must be one of {', '.join(LIVE_POLICIES)}")
        service.set_policy(body.policy)
        return {"policy": body.policy}

    @app.get("/model")
    def model(who: Who) -> dict[str, Any]:
        """The live duration model: its version, what it was fitted on, refit state."""
        return service.durations.status()

    @app.post("/model/refit")
    def refit(
        who: Who, wait: Annotated[float, Query(ge=0, le=REFIT_MAX_WAIT_S)] = 0.0
    ) -> dict[str, Any]:
        """Refit the duration model now in the background worker (admin); with ``wait``
        (seconds), answer once it is done: ``status`` is done, started, running or failed."""
        if not who.admin:
            raise HTTPException(403, "only an admin may refit the model")
        try:
            return service.durations.refit(wait)
        except RefitRefused as exc:
            raise HTTPException(409, str(exc)) from None

    @app.get("/history.csv", response_class=PlainTextResponse)
    def history(who: Who) -> str:
        """Ended jobs as ilucid's generic trace (``ilucid whatif`` replays it)."""
        if not who.admin:
            raise HTTPException(403, "only an admin may export the history")
        return export_history(service)

    @app.get(
        "/metrics",
        response_class=PlainTextResponse,
        dependencies=[] if metrics_public else [Depends(metrics_reader)],
    )
    def metrics() -> str:
        """Prometheus text: jobs by state, pending by class and tenant, GPUs, preemptions,
        decisions by reason, and the scheduling-pass latency histogram. Needs an admin
        token unless the service serves it publicly (``--metrics-public``)."""
        from sqlalchemy import func

        with Session(engine) as session:
            states = session.execute(
                select(JobRow.state, func.count()).group_by(JobRow.state)
            ).all()
            pending = session.execute(
                select(JobRow.job_class, JobRow.tenant, func.count())
                .where(JobRow.state == "pending")
                .group_by(JobRow.job_class, JobRow.tenant)
            ).all()
            preemptions = session.scalar(select(func.coalesce(func.sum(JobRow.preemptions), 0)))
            reasons = session.execute(
                select(DecisionRow.action, DecisionRow.code, func.count()).group_by(
                    DecisionRow.action, DecisionRow.code
                )
            ).all()
        with service.lock:
            free = service.scheduler.free.free_total
            total = service.cluster.total_gpus
            passes, reconciles = service.pass_latency, service.reconcile_latency
            buckets = list(passes.histogram)
            pass_sum, pass_count = passes.seconds, passes.count
            whole = list(reconciles.histogram)
            whole_sum, whole_count = reconciles.seconds, reconciles.count
        model = service.durations.status()
        lines = ["# TYPE ilucid_jobs gauge"]
        lines += [f'ilucid_jobs{{state="{_label(s)}"}} {n}' for s, n in sorted(states)]
        lines += ["# TYPE ilucid_pending_jobs gauge"]
        lines += [
            f'ilucid_pending_jobs{{class="{_label(c)}",tenant="{_label(t)}"}} {n}'
            for c, t, n in sorted(pending)
        ]
        lines += ["# TYPE ilucid_gpus_busy gauge", f"ilucid_gpus_busy {total - free}"]
        lines += ["# TYPE ilucid_gpus_total gauge", f"ilucid_gpus_total {total}"]
        lines += [
            "# TYPE ilucid_gpu_utilisation gauge",
            f"ilucid_gpu_utilisation {(total - free) / total if total else 0:.4f}",
        ]
        lines += [
            "# TYPE ilucid_preemptions_total counter",
            f"ilucid_preemptions_total {preemptions}",
        ]
        lines += ["# TYPE ilucid_decisions_total counter"]
        lines += [
            f'ilucid_decisions_total{{action="{_label(a)}",reason="{_label(c)}"}} {n}'
            for a, c, n in sorted(reasons)
        ]
        lines += _histogram("ilucid_pass_seconds", buckets, pass_sum, pass_count)
        lines += _histogram("ilucid_reconcile_seconds", whole, whole_sum, whole_count)
        lines += [
            "# TYPE ilucid_duration_model_version gauge",
            f"ilucid_duration_model_version {model['version']}",
            "# TYPE ilucid_duration_model_refitting gauge",
            f"ilucid_duration_model_refitting {int(model['refitting'])}",
        ]
        return "\n".join(lines) + "\n"

    @app.get("/", response_class=HTMLResponse)
    def dashboard() -> HTMLResponse:
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

    return app
