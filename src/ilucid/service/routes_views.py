"""What the dashboard shows beyond the job routes: the history of ended jobs, the
tenants' quotas, and a job's outlook (expected start, the estimate's terms).

Users see only their own jobs in the history (admins every job), as with /jobs, and
only their own tenant's quota row (admins every tenant's), as /metrics keeps every
tenant's counts from non-admins. The router's lifespan records when the service
is up (:func:`ilucid.service.uptime.keep_uptime`), which /timeline reads back.
"""

import dataclasses
import re
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException
from sqlalchemy import ColumnElement, Select, and_, func, or_, select
from sqlalchemy.orm import Session

from ilucid.core.policies.default import DefaultPlan
from ilucid.core.policies.router import InferenceRouter
from ilucid.core.policies.tiered import TieredPlan
from ilucid.core.quota import QuotaBook
from ilucid.service.access import Live, Who, own_job
from ilucid.service.auth import Identity
from ilucid.service.cloud_view import cloud_view
from ilucid.service.db import JobRow
from ilucid.service.edge import query_int, query_text
from ilucid.service.lifecycle import Phase
from ilucid.service.routes_jobs import estimate_json
from ilucid.service.uptime import keep_uptime

__all__ = ["ENDED_STATES", "HISTORY_PAGE_MAX", "estimate_terms", "router"]

#: The states of an ended job, as stored.
ENDED_STATES = (Phase.SUCCEEDED.value, Phase.FAILED.value, Phase.CANCELLED.value)
#: Most ended jobs one history page holds.
HISTORY_PAGE_MAX = 200

router = APIRouter(prefix="/views", lifespan=keep_uptime)

_TERM = re.compile(r"([+-]\d+(?:\.\d+)?)(?: \[([^\]]*)\])?")
_MODEL = re.compile(r"by duration model (v\d+) = exp\((.*?)\) - 1")


def estimate_terms(note: str) -> dict[str, Any] | None:
    """The terms of a model estimate's note (``ilucid.estimators.live.format_estimate``:
    ``estimate 2,310 s by duration model v3 = exp(+7.10 +0.32 [num_gpus=4] ...) - 1``):
    the intercept and each named term's contribution in log space; None for a note
    without a model's terms (a median, no estimate)."""
    match = _MODEL.search(note)
    if match is None:
        return None
    terms = _TERM.findall(match.group(2))
    if not terms or terms[0][1]:
        return None
    return {
        "version": match.group(1),
        "intercept": float(terms[0][0]),
        "terms": [{"term": name, "value": float(value)} for value, name in terms[1:]],
    }


def _visible(who: Identity, user: str | None, tenant: str | None) -> list[ColumnElement[bool]]:
    """Conditions that keep jobs to what ``who`` may see, and to the user and tenant asked."""
    conditions = []
    if not who.admin:
        conditions.append(JobRow.user == who.user)
    elif user:
        conditions.append(JobRow.user == user)
    if tenant:
        conditions.append(JobRow.tenant == tenant)
    return conditions


@router.get("/history")
def history(
    who: Who,
    service: Live,
    state: Literal["succeeded", "failed", "cancelled"] | None = None,
    user: Annotated[str | None, query_text()] = None,
    tenant: Annotated[str | None, query_text()] = None,
    limit: Annotated[int, query_int(ge=1, le=HISTORY_PAGE_MAX)] = 25,
    cursor: Annotated[str | None, query_text(max_length=64)] = None,
) -> dict[str, Any]:
    """Ended jobs, newest end first, a page at a time, paged as ``GET /api/v1/jobs``
    is: pass ``next_cursor`` back as ``cursor`` (``prev_cursor`` goes a page back; null
    with ``start`` above 0 is the first page). A cursor marks a place in the order, so
    a job that ends meanwhile never moves one already shown onto the next page."""
    states = [state] if state else list(ENDED_STATES)
    ended = select(JobRow).where(JobRow.state.in_(states), *_visible(who, user, tenant))
    with Session(service.engine) as session:
        total = session.scalar(select(func.count()).select_from(ended.subquery())) or 0
        after = None if cursor is None else _history_place(session, cursor, who)
        rows = session.scalars(
            _newest_first(ended if after is None else ended.where(_older_than(after))).limit(
                limit + 1
            )
        ).all()
        start, prev_cursor = 0, None
        if after is not None:
            before = ended.where(~_older_than(after))
            start = session.scalar(select(func.count()).select_from(before.subquery())) or 0
            back = session.scalars(
                _newest_first(before, reverse=True).offset(limit).limit(1)
            ).first()
            prev_cursor = None if back is None else back.id
        mine = select(JobRow.user, JobRow.tenant).where(
            JobRow.state.in_(ENDED_STATES), *_visible(who, None, None)
        )
        pairs = session.execute(mine.distinct()).all()
    jobs = [
        {
            "id": r.id,
            "name": r.name,
            "user": r.user,
            "tenant": r.tenant,
            "class": r.job_class,
            "gpus": r.gpus,
            "state": r.state,
            "submit_time": r.submit_time,
            "first_start": r.first_start,
            "end_time": r.end_time,
            "exit_code": r.exit_code,
            "preemptions": r.preemptions,
        }
        for r in rows[:limit]
    ]
    return {
        "jobs": jobs,
        "total": total,
        "start": start,
        "limit": limit,
        "next_cursor": jobs[-1]["id"] if len(rows) > limit else None,
        "prev_cursor": prev_cursor,
        "users": sorted({u for u, _ in pairs}),
        "tenants": sorted({t for _, t in pairs}),
    }


#: The end time the history orders by (a row without one sorts as ended at 0).
_ENDED_AT = func.coalesce(JobRow.end_time, 0.0)


def _newest_first(query: Select[JobRow], reverse: bool = False) -> Select[JobRow]:
    if reverse:
        return query.order_by(_ENDED_AT.asc(), JobRow.id.asc())
    return query.order_by(_ENDED_AT.desc(), JobRow.id.desc())


def _older_than(place: JobRow) -> ColumnElement[bool]:
    """Jobs after ``place`` in the history's order (newest end first, then id)."""
    ended = place.end_time or 0.0
    return or_(_ENDED_AT < ended, and_(_ENDED_AT == ended, JobRow.id < place.id))  # noqa: SIM300


def _history_place(session: Session, cursor: str, who: Identity) -> JobRow:
    """The ended job a history cursor names; 404 for one ``who`` may not see, 422 for
    a job that has not ended (it has no place in the history yet)."""
    row = own_job(session, cursor, who, what="cursor: ")
    if row.state not in ENDED_STATES:
        raise HTTPException(422, f"cursor: job {cursor} has not ended")
    return row


def _quota_book(service: Live) -> QuotaBook | None:
    """The live policy's quota book (the policies that keep quotas: tiered, ilucid)."""
    policy = service.scheduler.policy
    plan = policy.training if isinstance(policy, InferenceRouter) else policy
    return plan.quotas if isinstance(plan, TieredPlan | DefaultPlan) else None


@router.get("/quotas")
def quotas(who: Who, service: Live) -> dict[str, Any]:
    """Each tenant's guaranteed GPUs, the GPUs its training and best-effort jobs use
    (what quotas count), how many of them are borrowed beyond the guarantee, and the
    GPUs all its running jobs hold (inference too). With paid pools, each tenant's
    ``cloud`` bill this month (:mod:`~ilucid.service.cloud_view`: spent, budget, left,
    forecast; null without paid pools) and the ``pools`` with their nodes up and
    node-time bill; the tenants with a cloud budget or spending are listed too."""
    with Session(service.engine) as session:
        holding = dict(
            session.execute(
                select(JobRow.tenant, func.sum(JobRow.gpus))
                .where(JobRow.state == Phase.RUNNING.value)
                .group_by(JobRow.tenant)
            ).all()
        )
    with service.lock:
        book = _quota_book(service)
        configured = dict(book.quotas) if book is not None else {}
        used = {t: n for t, n in book.used.items() if n} if book is not None else {}
        borrowed = {t: book.borrowing(t) for t in used} if book is not None else {}
        policy = service.policy_name
        known = set(configured) | set(used) | {t for t, n in holding.items() if n}
        cloud = cloud_view(service.scheduler, service.clock(), known)
    tenants = sorted(known | (set(cloud.tenants) if cloud is not None else set()))
    if not who.admin:
        tenants = [t for t in tenants if t == who.tenant]
    rows = []
    for tenant in tenants:
        quota = configured.get(tenant)
        rows.append(
            {
                "tenant": tenant,
                "configured": quota is not None,
                "guaranteed": quota.guaranteed if quota is not None else 0,
                "borrow_limit": quota.borrow_limit if quota is not None else None,
                "weight": quota.weight if quota is not None else 1.0,
                "used": used.get(tenant, 0) if book is not None else None,
                # without any quota nothing is reclaimed: nothing counts as borrowed
                "borrowed": borrowed.get(tenant, 0) if configured else None,
                "holding": int(holding.get(tenant) or 0),
                "cloud": None if cloud is None else dataclasses.asdict(cloud.tenants[tenant]),
            }
        )
    if book is None:
        note = f"The policy {policy} keeps no tenant quotas: tenants are not limited."
    elif not configured:
        note = (
            f"No tenant quota is configured (policy {policy}): nothing is guaranteed and"
            " every tenant may borrow every idle GPU (serve --tiers FILE sets quotas)."
        )
    else:
        note = ""
    pools = [dataclasses.asdict(p) for p in cloud.pools] if cloud is not None else []
    return {
        "policy": policy,
        "quotas": bool(configured),
        "note": note,
        "tenants": rows,
        "pools": pools,
    }


@router.get("/jobs/{job_id}")
def outlook(job_id: str, who: Who, service: Live) -> dict[str, Any]:
    """A job's expected start and position (while it waits) and its estimate's terms."""
    with Session(service.engine) as session:
        row = own_job(session, job_id, who)
        state, estimate = row.state, estimate_json(row)
        terms = estimate_terms(row.estimate_note or "")
    position = expected = None
    if state == Phase.PENDING.value:
        for queued, place, start in service.queue():
            if queued == job_id:
                position, expected = place, start
                break
    outlook = service.start_outlook(job_id) if expected is not None else None
    return {
        "id": job_id,
        "state": state,
        "position": position,
        "expected_start": expected.median if expected else None,
        "expected_start_p10": expected.low if expected else None,
        "expected_start_p90": expected.high if expected else None,
        "assumes": outlook[1] if outlook is not None else None,
        "now": service.clock(),
        "estimate": {**estimate, "model": terms},
    }
