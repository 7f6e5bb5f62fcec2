"""Who is asking, and which service they ask: the dependencies every route shares.

The service lives on ``app.state`` (set once by :func:`ilucid.service.api.build_app`),
so route modules are plain ``APIRouter``\\ s without closures. Every token check asks
the database, so a revoked token stops working at once.
"""

from typing import Annotated, cast

from fastapi import Depends, Header, HTTPException, Request
from sqlalchemy.orm import Session

from ilucid.service.auth import Identity, authenticate
from ilucid.service.db import JobRow
from ilucid.service.scheduler_service import SchedulerService

__all__ = ["Live", "Who", "current_service", "identity", "own_job"]


def current_service(request: Request) -> SchedulerService:
    """The service this app serves."""
    return cast(SchedulerService, request.app.state.service)


Live = Annotated[SchedulerService, Depends(current_service)]


# sync, so in a worker thread: every check asks the database (revocation is immediate)
def identity(service: Live, authorization: Annotated[str | None, Header()] = None) -> Identity:
    """The token's owner; 401 without a known bearer token."""
    if not authorization or not authorization.startswith("Bearer "):
        raise HTTPException(401, "missing bearer token (Authorization: Bearer <token>)")
    who = authenticate(service.engine, authorization.removeprefix("Bearer ").strip())
    if who is None:
        raise HTTPException(401, "unknown token")
    return who


Who = Annotated[Identity, Depends(identity)]


def own_job(session: Session, job_id: str, who: Identity) -> JobRow:
    """The job if ``who`` may see it; 404 otherwise (another user's job is not revealed)."""
    row = session.get(JobRow, job_id)
    if row is None or (not who.admin and row.user != who.user):
        raise HTTPException(404, f"no job {job_id} of yours")
    return row
