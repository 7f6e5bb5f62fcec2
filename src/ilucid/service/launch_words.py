"""What a start needs beyond its placement: the words for "why these GPUs", and for a
share of one GPU, the GPU the other jobs of its share run on.

Kept apart from the reconciler so that its pass reads as a sequence of steps.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from ilucid.core import Cluster, Decision, Placement, Scheduler
from ilucid.core.decision import Action
from ilucid.service.db import JobRow
from ilucid.service.lifecycle import NO_GPUS

__all__ = ["OPENER_FIRST", "launched_words", "share_gpus", "why_these_gpus"]

#: :func:`share_gpus`' answer when the share's first job has not launched yet
OPENER_FIRST = "opener-first"


def why_these_gpus(scheduler: Scheduler, cluster: Cluster, decision: Decision) -> str:
    """The placer's score parts for a start: why these nodes and GPUs."""
    state = scheduler.jobs.get(decision.job_id)
    if decision.action is not Action.START or decision.placement is None or state is None:
        return ""
    if state.spec.num_gpus <= 0:
        return _cpu_only(cluster, decision.placement)
    parts = scheduler.placer.explain(state.spec, decision.placement, scheduler.free)
    if not parts:
        return ""
    nodes = cluster.nodes
    where = ", ".join(f"{nodes[i].name} x{n}" for i, n in decision.placement.parts)
    # + 0.0: a score of -0.0 reads as +0
    terms = "; ".join(f"{p.plugin} {p.value + 0.0:+g} ({p.detail})" for p in parts)
    return f". Why these GPUs ({where}): {terms}"


def _cpu_only(cluster: Cluster, placement: Placement) -> str:
    """A job without GPUs: no GPU choice to explain ("Why these GPUs ()" said nothing),
    only what it books and where (``. CPU-only: 2 CPUs on node n0``)."""
    booked = []
    if placement.cpus > 0:
        booked.append(f"{placement.cpus:g} CPU{'' if placement.cpus == 1 else 's'}")
    if placement.memory_gb > 0:
        booked.append(f"{placement.memory_gb:g} GB of memory")
    names = [cluster.nodes[i].name for i in placement.node_indices]
    if not names:
        return ". CPU-only: it uses no GPUs"
    what = " and ".join(booked) if booked else "no GPUs"
    return f". CPU-only: {what} on node {', '.join(names)}"


def share_gpus(
    scheduler: Scheduler, session: Session, job_id: str, placement: Placement
) -> tuple[int, ...] | str | None:
    """The GPU indices the other jobs of ``placement``'s share were launched on; None
    when the job opens the share; :data:`OPENER_FIRST` when jobs that open a share in
    the same pass wait for the first of them by id to launch (then follow it)."""
    ((index, _),) = placement.parts
    peers = [
        job.spec.id
        for job in scheduler.jobs.values()  # (only running jobs keep a placement)
        if job.spec.id != job_id
        and job.placement is not None
        and job.placement.share == placement.share
        and job.placement.parts[0][0] == index
    ]
    for peer in peers:
        peer_row = session.get(JobRow, peer)
        if peer_row is not None and peer_row.gpu_indices not in ("", NO_GPUS):
            return tuple(int(g) for g in peer_row.gpu_indices.split(","))
    return OPENER_FIRST if peers and min(peers) < job_id else None


def launched_words(placement: Placement, cluster: Cluster, on: str) -> str | None:
    """For a share of one GPU: the physical GPU the backend launched it on, named where
    the story says it launched (the placer's words name no GPU index: which GPU holds
    a share is the backend's choice). None: a whole-GPU placement says it plainly."""
    if placement.share is None or not placement.parts:
        return None
    ((index, _),) = placement.parts
    return (
        f"launched on GPU {on} of {cluster.nodes[index].name}, shared:"
        f" {placement.milli} of its 1000 milli-GPUs"
    )
