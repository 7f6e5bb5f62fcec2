"""Routes on the whole cluster, visible to every user: the queue, the GPU map and the
timeline. They show owners, sizes and job ids but never another user's command."""

from typing import Annotated, Any

from fastapi import APIRouter
from sqlalchemy import select
from sqlalchemy.orm import Session

from ilucid.service.access import Live, Who
from ilucid.service.api_models import NodeView, QueueEntry
from ilucid.service.db import JobRow
from ilucid.service.edge import query_number
from ilucid.service.history import gpu_holders, gpu_shares, timeline

__all__ = ["QUEUE_REASONS", "TIMELINE_MAX_MINUTES", "router"]

#: /queue explains only this many jobs from its head: each explanation asks the placer
QUEUE_REASONS = 200
#: Longest window /timeline serves, minutes (a week)
TIMELINE_MAX_MINUTES = 7 * 24 * 60

router = APIRouter()


@router.get("/queue")
def queue(who: Who, service: Live) -> list[QueueEntry]:
    """Pending jobs in policy order; the first :data:`QUEUE_REASONS` say why they wait.

    Every pending job is listed (positions make sense only for the whole queue),
    with its owner and size but never its command."""
    entries = service.queue()
    columns = (JobRow.id, JobRow.user, JobRow.tenant, JobRow.job_class, JobRow.gpus, JobRow.name)
    with Session(service.engine) as session:
        rows = {r.id: r for r in session.execute(select(*columns).where(JobRow.state == "pending"))}
        missing = [job_id for job_id, _, _ in entries if job_id not in rows]
        if missing:  # started or ended since service.queue(): still show who and what
            rows.update(
                (r.id, r) for r in session.execute(select(*columns).where(JobRow.id.in_(missing)))
            )
    result = []
    for index, (job_id, position, start) in enumerate(entries):
        row = rows.get(job_id)
        median, low, high = (start.median, start.low, start.high) if start else (None,) * 3
        result.append(
            QueueEntry.model_validate(
                {
                    "id": job_id,
                    "position": position,
                    "expected_start": median,
                    "expected_start_p10": low,
                    "expected_start_p90": high,
                    "user": row.user if row is not None else None,
                    "tenant": row.tenant if row is not None else None,
                    "class": row.job_class if row is not None else None,
                    "gpus": row.gpus if row is not None else None,
                    "name": row.name if row is not None else None,  # what its user named it
                    "reason": (service.explain(job_id) or None) if index < QUEUE_REASONS else None,
                }
            )
        )
    return result


@router.get("/nodes")
def nodes(who: Who, service: Live) -> list[NodeView]:
    """Nodes with their free GPUs and, per GPU, the running job holding it (or null);
    a node the cluster manager took out of service says why (``excluded``)."""
    with Session(service.engine) as session:
        held = session.execute(
            select(JobRow.id, JobRow.gpu_indices, JobRow.gpu_milli).where(JobRow.state == "running")
        ).all()
    with service.lock:
        free = service.scheduler.free
        cluster_nodes = service.cluster.nodes
        excluded = service.reconciler.excluded
        sizes = [node.num_gpus for node in cluster_nodes]
        holders = gpu_holders(sizes, [(job_id, indices) for job_id, indices, _ in held])
        shares = gpu_shares(sizes, [(job_id, indices, milli) for job_id, indices, milli in held])
        return [
            NodeView.model_validate(
                {
                    "name": node.name,
                    "gpus": node.num_gpus,
                    "gpu_type": node.gpu_type,
                    "gpu_memory_gb": node.gpu_memory_gb,
                    "free_gpus": free.free[index],
                    # CPUs and memory jobs may book here (null: the cluster manager does not say)
                    "cpus": node.cpus or None,
                    "free_cpus": round(free.cpus_free[index], 3) if node.cpus else None,
                    "memory_gb": node.memory_gb or None,
                    "free_memory_gb": round(free.memory_free[index], 3) if node.memory_gb else None,
                    "gpu_jobs": holders[index],
                    # per GPU, the thousandths each of its holders holds (a share: < 1000)
                    "gpu_milli": shares[index],
                    "excluded": excluded.get(node.name),
                }
            )
            for index, node in enumerate(cluster_nodes)
        ]


@router.get("/timeline")
def get_timeline(
    who: Who,
    service: Live,
    minutes: Annotated[float, query_number(gt=0, le=TIMELINE_MAX_MINUTES)] = 60,
) -> dict[str, Any]:
    """Busy GPUs, pending and running jobs over the last ``minutes`` as step series."""
    now = service.clock()
    result = timeline(service.engine, now - minutes * 60, now)
    with service.lock:
        result["total_gpus"] = service.cluster.total_gpus
    return result
