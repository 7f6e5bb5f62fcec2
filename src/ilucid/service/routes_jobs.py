"""Routes on one job: submit, list, show, cancel, logs, explain, profile.

Users reach only their own jobs (another user's job answers 404, so its id is not
revealed); admins reach every job.
"""

import json
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Response
from fastapi.responses import PlainTextResponse
from sqlalchemy import Select, and_, or_, select
from sqlalchemy.orm import Session

from ilucid.service.access import Live, Who, own_job
from ilucid.service.api_models import (
    CancelAnswer,
    ExplainAnswer,
    JobDetail,
    JobPage,
    JobView,
    SubmitAnswer,
)
from ilucid.service.auth import Identity
from ilucid.service.db import DecisionRow, JobRow, TransitionRow
from ilucid.service.edge import query_int, query_text
from ilucid.service.job_model import ServiceError
from ilucid.service.job_store import JobRequest, spec_of
from ilucid.service.problems import problem_statuses
from ilucid.service.progress_models import ProgressAnswer
from ilucid.service.progress_view import history_json, progress_json
from ilucid.service.request_models import SubmitBody
from ilucid.service.retries import attempts_of
from ilucid.service.running_sentence import estimate_sentence
from ilucid.service.scheduler_service import SchedulerService

__all__ = [
    "API_PREFIX",
    "JOB_PAGE_MAX",
    "JobId",
    "cancel_job",
    "estimate_json",
    "job_json",
    "router",
    "submit_job",
    "visible_jobs",
]

#: Where the versioned REST API lives
API_PREFIX = "/api/v1"
#: Most jobs one page of ``GET /api/v1/jobs`` holds
JOB_PAGE_MAX = 1000

#: A job's id in a path (ids are at most 64 characters: ``jobs.id``)
JobId = Annotated[str, Path(max_length=64, description="the job's id, e.g. j000042")]

router = APIRouter()


def job_json(row: JobRow) -> dict[str, Any]:
    """A job as the API shows it to whoever may see it."""
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
        "name": row.name,
        "priority": row.priority,
        "gpu_type": row.gpu_type,
        "preferred_gpu_types": json.loads(row.preferred_gpu_types or "[]"),
        "gpu_memory_gb": row.gpu_memory_gb,
        "nodes": row.nodes,
        "gpus_per_node": row.gpus_per_node,
        "gpu_milli": row.gpu_milli or 1000,
        "cpus": row.cpus,
        "memory_gb": row.memory_gb,
        "max_retries": row.max_retries,  # None: the service's default
        "attempts": row.attempts,  # failed attempts retried so far
        "retry_at": row.retry_at,  # held back for a retry until then (None: not held)
        # its own last progress report: {step, total, fraction, rate_per_s, left_s, at}
        "progress": progress_json(row),
    }


def estimate_json(row: JobRow) -> dict[str, Any]:
    """The estimate the scheduler ranks the job by and where it came from: a stated
    estimate counts by its user's measured accuracy, against the model's."""
    note = row.estimate_note or "no model estimate recorded for this job"
    seconds: float | None
    if row.estimate_s is not None:
        source, seconds = "user", spec_of(row).expected_duration
        said = estimate_sentence(row, 0.0) or f"estimate {seconds:,.0f} s"
        text = f"{said}; the model's: {note}"  # the note has parentheses of its own
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


def submit_job(body: SubmitBody, who: Identity, service: SchedulerService) -> SubmitAnswer:
    """Submit ``body`` for ``who``: 403, 409, 422 or 503 (a :class:`ServiceError`'s
    status) name what is at fault."""
    if body.priority > 0 and not who.admin:
        raise HTTPException(403, "priority: only an admin may raise a job's priority above 0")
    try:
        job_id = service.submit(
            JobRequest(
                command=body.command,
                gpus=body.gpu_count(),
                job_class=body.job_class,
                user=who.user,
                tenant=who.tenant,
                cwd=body.cwd,
                estimate_s=body.estimate_s,
                checkpoint_s=body.checkpoint_s,
                cloud=body.cloud,
                priority=body.priority,
                run_as=who.unix_user,
                name=body.name,
                gpu_type=body.gpu_type,
                preferred_gpu_types=tuple(body.preferred_gpu_types),
                gpu_memory_gb=body.gpu_memory_gb,
                nodes=body.nodes,
                gpus_per_node=body.gpus_per_node,
                gpu_milli=body.gpu_milli,
                cpus=body.cpus,
                memory_gb=body.memory_gb,
                max_retries=body.max_retries,
            )
        )
    except ServiceError as exc:
        raise HTTPException(exc.status, str(exc)) from None
    return SubmitAnswer(id=job_id)


@router.post(
    "/jobs",
    status_code=201,
    responses=problem_statuses([403, 409, 503]),
    response_description="the job is stored: it will run once, as its user",
)
def submit(body: SubmitBody, who: Who, service: Live, response: Response) -> SubmitAnswer:
    # in a worker thread, as every route that touches the database: the event loop
    # keeps answering (/healthz among others) while the submission waits for its commit
    answer = submit_job(body, who, service)
    response.headers["Location"] = f"{API_PREFIX}/jobs/{answer.id}"
    return answer


def visible_jobs(who: Identity, state: str | None) -> Select[JobRow]:
    """The jobs ``who`` may see (with ``state``, only those), oldest submission first."""
    query = select(JobRow).order_by(JobRow.submit_time, JobRow.id)
    if not who.admin:
        query = query.where(JobRow.user == who.user)
    if state:
        query = query.where(JobRow.state == state)
    return query


@router.get("/jobs", responses=problem_statuses([404]))
def list_jobs(
    who: Who,
    service: Live,
    state: Annotated[str | None, query_text(description="only jobs in this state")] = None,
    limit: Annotated[int, query_int(ge=1, le=JOB_PAGE_MAX, description="jobs a page")] = 100,
    cursor: Annotated[
        str | None,
        query_text(max_length=64, description="next_cursor of the page before (opaque)"),
    ] = None,
) -> JobPage:
    """Your jobs (an admin's: everyone's), a page at a time: pass ``next_cursor`` back
    as ``cursor`` until it is null. Pages hold whatever was submitted meanwhile, never
    a job twice; a cursor that names no job of yours answers 404."""
    query = visible_jobs(who, state)
    with Session(service.engine) as session:
        if cursor is not None:
            after = own_job(session, cursor, who, what="cursor: ")
            query = query.where(
                or_(
                    JobRow.submit_time > after.submit_time,
                    and_(JobRow.submit_time == after.submit_time, JobRow.id > after.id),
                )
            )
        rows = session.scalars(query.limit(limit + 1)).all()
        jobs = [JobView.model_validate(job_json(r)) for r in rows[:limit]]
    more = len(rows) > limit
    return JobPage(jobs=jobs, next_cursor=jobs[-1].id if more else None)


@router.get("/jobs/{job_id}")
def show(job_id: JobId, who: Who, service: Live) -> JobDetail:
    with Session(service.engine) as session:
        row = own_job(session, job_id, who)
        result = job_json(row)
        result["transitions"] = [
            {
                "time": t.time,
                "from": t.from_state,
                "to": t.to_state,
                "stimulus": t.stimulus,
                "stimulus_id": t.stimulus_id,
                "reason": t.reason,
            }
            for t in session.scalars(
                select(TransitionRow)
                .where(TransitionRow.job_id == job_id)
                .order_by(TransitionRow.id)
            )
        ]
        return JobDetail.model_validate(result)


def cancel_job(job_id: str, who: Identity, service: SchedulerService) -> CancelAnswer:
    """Cancel ``job_id`` for ``who`` (404 unless ``who`` may see it)."""
    with Session(service.engine) as session:
        own_job(session, job_id, who)
    try:
        return CancelAnswer(id=job_id, state=service.cancel(job_id))
    except ServiceError as exc:  # gone between the look-up and the cancel
        raise HTTPException(404, str(exc)) from None


@router.post("/jobs/{job_id}/cancel")
def cancel(job_id: JobId, who: Who, service: Live) -> CancelAnswer:
    """Cancel the job: a pending one at once, a running one once its processes are
    gone. Its record stays (GET shows it cancelled); cancelling an ended job is a no-op
    that answers its state."""
    return cancel_job(job_id, who, service)


@router.get("/jobs/{job_id}/logs", response_class=PlainTextResponse)
def logs(
    job_id: JobId,
    who: Who,
    service: Live,
    stream: Annotated[str, query_text(pattern="^(stdout|stderr)$")] = "stdout",
) -> str:
    with Session(service.engine) as session:
        own_job(session, job_id, who)
    return service.backend.logs(job_id, stream)


@router.get("/jobs/{job_id}/explain")
def explain(job_id: JobId, who: Who, service: Live) -> ExplainAnswer:
    with Session(service.engine) as session:
        row = own_job(session, job_id, who)
        estimate = estimate_json(row)
        decisions = [
            {
                "time": d.time,
                "action": d.action,
                "code": d.code,
                "message": d.message,
                "stimulus_id": d.stimulus_id,
            }
            for d in session.scalars(
                select(DecisionRow).where(DecisionRow.job_id == job_id).order_by(DecisionRow.id)
            )
        ]
        state = row.state
        retries = {
            "attempts": row.attempts,
            "max_retries": service.reconciler.retries.limit(row),
            "retry_at": row.retry_at,
            "failed": [{"time": a.time, "cause": a.cause} for a in attempts_of(session, job_id)],
        }
    now_why = service.explain(job_id) if state in ("pending", "running") else state
    outlook = service.start_outlook(job_id) if state == "pending" else None
    progress_words = service.progress_words(job_id)
    capped = service.capabilities.caps_logs
    cuts = capped.log_cuts(job_id) if capped is not None else {}
    return ExplainAnswer.model_validate(
        {
            # what the log cap (serve --max-log-mb) cut from each stream, as sentences
            "logs": [
                f"{stream}: {count:,} bytes cut by the log cap; the log keeps its head and its"
                " newest output"
                for stream, count in cuts.items()
            ],
            "id": job_id,
            "state": state,
            "why": now_why,
            "estimate": estimate,
            # how far the job says it is, and how that counts in its estimate (None: no report)
            "progress": progress_words,
            "expected_start": None
            if outlook is None
            else {
                "expected_start": outlook[0].median,
                "expected_start_p10": outlook[0].low,
                "expected_start_p90": outlook[0].high,
                "assumes": outlook[1],
            },
            "decisions": decisions,
            # failed launches and vanishes: how many were retried, each cause, the next retry
            "retries": retries,
            # every move with what caused it: the job's story, oldest first
            "story": [
                {
                    "time": line.time,
                    "from": line.from_state,
                    "to": line.to_state,
                    "stimulus": line.stimulus,
                    # the one request, pass or observation that caused it (a story groups by it)
                    "stimulus_id": line.stimulus_id,
                    "from_phase": line.from_phase,
                    "to_phase": line.to_phase,
                    "reason": line.reason,
                    # the move and its reason as a user reads them ("started": "on GPUs 0")
                    "move": line.move(),
                    "detail": line.detail(),
                    "text": line.sentence(),
                }
                for line in service.story(job_id)
            ],
        }
    )


@router.get("/jobs/{job_id}/progress", response_model=ProgressAnswer)
def progress(job_id: JobId, who: Who, service: Live) -> dict[str, Any]:
    """The job's own progress: its last report, in words, and its reports over time."""
    with Session(service.engine) as session:
        row = own_job(session, job_id, who)
        answer = {
            "id": row.id,
            "state": row.state,
            "progress": progress_json(row),
            "history": history_json(session, job_id),
        }
    answer["words"] = service.progress_words(job_id)
    return answer


@router.get("/jobs/{job_id}/profile")
def profile(job_id: JobId, who: Who, service: Live) -> dict[str, float]:
    """GPU utilisation and memory the live profiler measured for the job."""
    with Session(service.engine) as session:
        own_job(session, job_id, who)
    return service.profile(job_id)
