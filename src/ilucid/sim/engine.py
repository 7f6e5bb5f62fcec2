"""Event-driven trace replay through the scheduling core.

The simulator is the "world": it owns the virtual clock and the truth about
how much work each job has left, feeds arrivals and completions to the core
and applies its decisions. Time jumps from event to event (a heap, never a
fixed tick), so cost grows with the number of events, not simulated seconds.
"""

from __future__ import annotations

import heapq
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ilucid.core import Action, Cluster, JobSpec, Placement, Policy, Scheduler, SchedulerConfig

__all__ = ["Annotator", "ClusterSeries", "JobRecord", "Observer", "SimResult", "simulate"]

ProgressFn = Callable[[float], None]


class Annotator(Protocol):
    """Adds what a driver knows at submission (e.g. a duration estimate) to a job."""

    def on_submit(self, spec: JobSpec, now: float) -> JobSpec: ...

    def on_finish(self, spec: JobSpec, end: float) -> None: ...


#: Called as ``observer(time, event, job_id, placement)`` for "start", "preempt" and
#: "finish"; lets tests and tools check every allocation independently of the core.
Observer = Callable[[float, str, str, Placement | None], None]


@dataclass(slots=True)
class JobRecord:
    """What happened to one job; times in seconds of the trace's clock."""

    id: str
    submit: float
    num_gpus: int
    duration: float
    job_class: str
    tenant: str
    first_start: float = -1.0
    end: float = -1.0
    preemptions: int = 0
    nodes: str = ""
    busy_gpu_seconds: float = 0.0

    @property
    def jct(self) -> float:
        return self.end - self.submit

    @property
    def queueing_delay(self) -> float:
        return self.first_start - self.submit


@dataclass(slots=True)
class ClusterSeries:
    """Cluster state sampled every ``step`` seconds from ``start``."""

    start: float
    step: float
    busy_gpus: array = field(default_factory=lambda: array("i"))  # type: ignore[type-arg]
    pending_jobs: array = field(default_factory=lambda: array("i"))  # type: ignore[type-arg]
    fragmented_gpus: array = field(default_factory=lambda: array("i"))  # type: ignore[type-arg]


@dataclass(slots=True)
class SimResult:
    policy: str
    cluster_gpus: int
    cluster_nodes: int
    records: list[JobRecord]
    series: ClusterSeries
    events: int
    wall_s: float


def simulate(
    jobs: Sequence[JobSpec],
    cluster: Cluster,
    policy: Policy,
    config: SchedulerConfig | None = None,
    progress: ProgressFn | None = None,
    sample_every: float = 60.0,
    observer: Observer | None = None,
    annotator: Annotator | None = None,
) -> SimResult:
    """Replay ``jobs`` (sorted by submit time) on ``cluster`` under ``policy``."""
    wall_start = time.perf_counter()
    config = config or SchedulerConfig()
    scheduler = Scheduler(cluster, policy, config=config)
    free = scheduler.free
    total_gpus = cluster.total_gpus
    nodes = cluster.nodes

    records: dict[str, JobRecord] = {}
    remaining: dict[str, float] = {}  # true work left as of run_start (the world's view)
    run_start: dict[str, float] = {}
    version: dict[str, int] = {}
    ends: list[tuple[float, int, str, int]] = []  # (time, tiebreak, job id, version)
    tiebreak = 0

    start_time = jobs[0].submit_time if jobs else 0.0
    series = ClusterSeries(start=start_time, step=sample_every)
    next_sample = start_time
    n_jobs = len(jobs)
    next_job = 0
    wake: float | None = None
    events = 0
    done = 0
    report_every = max(1, n_jobs // 200)

    while done < n_jobs:
        # 1. the next moment anything happens
        now = float("inf")
        if next_job < n_jobs:
            now = jobs[next_job].submit_time
        if ends and ends[0][0] < now:
            now = ends[0][0]
        if wake is not None and wake < now:
            now = wake
        if now == float("inf"):
            stuck = n_jobs - done
            raise RuntimeError(
                f"{policy.name}: {stuck} job(s) can never start on this cluster"
                f" ({total_gpus} GPUs); the first pending is {_first_pending(scheduler)}"
            )

        # 2. sample the cluster state up to (not including) this moment
        if now >= next_sample:
            busy = total_gpus - free.free_total
            pending = scheduler.pending_count
            fragmented = free.fragmented_free()
            while next_sample < now:
                series.busy_gpus.append(busy)
                series.pending_jobs.append(pending)
                series.fragmented_gpus.append(fragmented)
                next_sample += sample_every

        # 3. completions, then arrivals, then one scheduling pass (the artifact's order)
        while ends and ends[0][0] <= now:
            _, _, job_id, ver = heapq.heappop(ends)
            if version.get(job_id) != ver:
                continue  # stale: the job was preempted after this end was planned
            rec = records[job_id]
            rec.end = now
            rec.busy_gpu_seconds += (now - run_start[job_id]) * rec.num_gpus
            if observer is not None:
                observer(now, "finish", job_id, scheduler.jobs[job_id].placement)
            finished = scheduler.finish(job_id, now)
            if annotator is not None:
                annotator.on_finish(finished.spec, now)
            del remaining[job_id], run_start[job_id], version[job_id]
            done += 1
            events += 1
        while next_job < n_jobs and jobs[next_job].submit_time <= now:
            spec = jobs[next_job]
            next_job += 1
            records[spec.id] = JobRecord(
                spec.id,
                spec.submit_time,
                spec.num_gpus,
                spec.duration,
                spec.job_class.value,
                spec.tenant,
            )
            remaining[spec.id] = spec.duration
            if annotator is not None:
                spec = annotator.on_submit(spec, now)
            scheduler.submit(spec, now)
            events += 1
            if progress is not None and next_job % report_every == 0:
                progress(next_job / n_jobs)

        for decision in scheduler.schedule(now):
            job_id = decision.job_id
            rec = records[job_id]
            if observer is not None:
                observer(now, decision.action.value, job_id, decision.placement)
            if decision.action is Action.START:
                assert decision.placement is not None
                if rec.first_start < 0:
                    rec.first_start = now
                    rec.nodes = "+".join(
                        f"{nodes[i].name}:{c}" for i, c in decision.placement.parts
                    )
                run_start[job_id] = now
                ver = version.get(job_id, 0) + 1
                version[job_id] = ver
                tiebreak += 1
                heapq.heappush(ends, (now + remaining[job_id], tiebreak, job_id, ver))
            elif decision.action is Action.PREEMPT:
                ran = now - run_start[job_id]
                rec.busy_gpu_seconds += ran * rec.num_gpus
                rec.preemptions += 1
                overhead = config.overhead.for_job(scheduler.jobs[job_id].spec)
                remaining[job_id] = max(0.0, remaining[job_id] - ran) + overhead
                version[job_id] = version.get(job_id, 0) + 1
        wake = scheduler.next_wakeup(now)
        if wake is not None and wake <= now:
            raise RuntimeError(f"{policy.name} asked to wake at {wake} <= now {now}")

    if progress is not None:
        progress(1.0)
    return SimResult(
        policy=policy.name,
        cluster_gpus=total_gpus,
        cluster_nodes=len(nodes),
        records=list(records.values()),
        series=series,
        events=events,
        wall_s=time.perf_counter() - wall_start,
    )


def _first_pending(scheduler: Scheduler) -> str:
    for job in scheduler.pending():
        return f"{job.spec.id} ({job.spec.num_gpus} GPUs)"
    return "none"
