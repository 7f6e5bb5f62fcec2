"""The unversioned paths of the API before ``/api/v1``, kept for one release.

Only what changed lives here: ``POST /jobs`` still takes a gang's ``gpus`` when it equals
nodes x gpus_per_node, ``GET /jobs`` still answers every job as one list, and
``DELETE /jobs/{id}`` still cancels. Every other old path is the versioned route served
at its old place (see :func:`ilucid.service.api.build_app`); each answer on an old
path carries a ``Deprecation`` header (:class:`ilucid.service.api_contract.Deprecated`).
"""

from typing import Annotated, Any

from fastapi import APIRouter
from sqlalchemy.orm import Session

from ilucid.service.access import Live, Who
from ilucid.service.edge import query_text
from ilucid.service.request_models import LegacySubmitBody
from ilucid.service.routes_jobs import JobId, cancel_job, job_json, submit_job, visible_jobs

__all__ = ["router"]

router = APIRouter(include_in_schema=False)


@router.post("/jobs", status_code=201)
def submit(body: LegacySubmitBody, who: Who, service: Live) -> dict[str, str]:
    return {"id": submit_job(body, who, service).id}


@router.get("/jobs")
def list_jobs(
    who: Who, service: Live, state: Annotated[str | None, query_text()] = None
) -> list[dict[str, Any]]:
    with Session(service.engine) as session:
        return [job_json(r) for r in session.scalars(visible_jobs(who, state))]


@router.delete("/jobs/{job_id}")
def cancel(job_id: JobId, who: Who, service: Live) -> dict[str, str]:
    answer = cancel_job(job_id, who, service)
    return {"id": answer.id, "state": answer.state}
