"""Who is asking, and which service they ask: the dependencies every route shares.

The service lives on ``app.state`` (set once by :func:`ilucid.service.api.build_app`),
so route modules are plain ``APIRouter``\\ s without closures. A token's owner is
remembered for a second at most (:mod:`ilucid.service.auth`), so a revoked token
stops working within that.
"""

from typing import Annotated, cast

from fastapi import Depends, Header, HTTPException, Request
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from ilucid.service.auth import Identity, authenticate, remembered
from ilucid.service.db import JobRow
from ilucid.service.scheduler_service import SchedulerService

__all__ = ["Live", "Who", "current_service", "identity", "own_job"]


# async, as it neither waits nor asks the database: a sync dependency would cost
# every request a hop to a worker thread
async def current_service(request: Request) -> SchedulerService:
    """The service this app serves."""
    return cast(SchedulerService, request.app.state.service)


Live = Annotated[SchedulerService, Depends(current_service)]


def _bearer(authorization: str | None) -> str:
    if not authorization or not authorization.startswith("Bearer "):
        raise HTTPException(401, "missing bearer token (Authorization: Bearer <token>)")
    return authorization.removeprefix("Bearer ").strip()


def identity(service: SchedulerService, authorization: str | None) -> Identity:
    """The token's owner; 401 without a known bearer token (may ask the database: call
    it from a worker thread)."""
    who = authenticate(service.engine, _bearer(authorization))
    if who is None:
        raise HTTPException(401, "unknown token")
    return who


async def _who(
    service: Live, authorization: Annotated[str | None, Header(include_in_schema=False)] = None
) -> Identity:
    """:func:`identity` for a route: on the event loop while the token's owner is
    remembered, else the database look-up in a worker thread."""
    known = remembered(service.engine, _bearer(authorization))
    if known is not None:
        return known
    return await run_in_threadpool(identity, service, authorization)


Who = Annotated[Identity, Depends(_who)]


def own_job(session: Session, job_id: str, who: Identity, what: str = "") -> JobRow:
    """The job if ``who`` may see it; 404 otherwise (another user's job is not revealed).
    ``what`` starts the 404's sentence, e.g. ``cursor: ``."""
    row = session.get(JobRow, job_id)
    if row is None or (not who.admin and row.user != who.user):
        # an admin sees every job: "of yours" would suggest someone else's might exist
        mine = "" if who.admin else " of yours"
        raise HTTPException(404, f"{what}no job {job_id}{mine}")
    return row
