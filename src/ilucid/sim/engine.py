"""Event-driven trace replay through the scheduling core.

The simulator is the "world": it owns the virtual clock and the truth about
how much work each job has left, feeds arrivals and completions to the core
and applies its decisions. Time jumps from event to event (a heap, never a
fixed tick), so cost grows with the number of events, not simulated seconds.
"""

from __future__ import annotations

import heapq
import math
import re
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ilucid.core import (
    Action,
    Cluster,
    Forecast,
    JobSpec,
    Placement,
    Policy,
    ProfileReport,
    Scheduler,
    SchedulerConfig,
)

__all__ = [
    "Annotator",
    "ClusterSeries",
    "JobRecord",
    "Observer",
    "SimResult",
    "World",
    "simulate",
]

ProgressFn = Callable[[float], None]

#: Most samples a :class:`ClusterSeries` holds (6 MB; 347 days at one a minute). Past it
#: the interval doubles, so a huge makespan costs memory and time by events, not by
#: simulated minutes.
MAX_SAMPLES = 500_000


class World:
    """What only reality knows. This default measures nothing and ignores interference."""

    def measure(self, spec: JobSpec, ran_s: float, now: float) -> ProfileReport:
        return ProfileReport(sharing_score=None, gpu_memory_gb=None, estimate=None)

    def pair_speed(self, a: JobSpec, b: JobSpec) -> tuple[float, float]:
        return 1.0, 1.0

    def speed(self, spec: JobSpec, gpu_type: str) -> float:
        """Progress per second on ``gpu_type`` relative to the trace's recorded speed."""
        return 1.0


class Annotator(Protocol):
    """Adds what a driver knows at submission (e.g. a duration estimate) to a job."""

    def on_submit(self, spec: JobSpec, now: float) -> JobSpec: ...

    def on_finish(self, spec: JobSpec, end: float) -> None: ...


#: Called as ``observer(time, event, job_id, placement)`` for "start", "pack" (start on
#: GPUs another running job holds), "preempt", "profiled" (a profiling run ended) and
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
    busy_gpu_seconds: float = 0.0  # GPUs held x time held
    work_done: float = 0.0  # solo-seconds of progress (less than held time when packed)
    restores: int = 0  # restore overheads paid (preemptions and leaving the profiler)
    profiled_s: float = 0.0
    packed: int = 0  # times this job started on GPUs it shares
    wait_reason: str = ""  # why it did not start at once (a countable code)
    lost_work_s: float = 0.0  # solo-seconds of work redone after preemptions
    startup_s: float = 0.0  # provisioning delays paid in paid pools
    predicted_start: float = -1.0  # expected start the core gave while it waited (sampled)

    @property
    def jct(self) -> float:
        return self.end - self.submit

    main_start: float = -1.0  # first start outside the profiling pool

    @property
    def queueing_delay(self) -> float:
        """First start minus submission; for a profiled job, its first start after
        profiling (profiling counts as waiting for the cluster, as in Lucid)."""
        start = self.main_start if self.main_start >= 0 else self.first_start
        return start - self.submit


@dataclass(slots=True)
class ClusterSeries:
    """Cluster state sampled every ``step`` seconds from ``start``."""

    start: float
    step: float
    busy_gpus: array = field(default_factory=lambda: array("i"))  # type: ignore[type-arg]
    pending_jobs: array = field(default_factory=lambda: array("i"))  # type: ignore[type-arg]
    fragmented_gpus: array = field(default_factory=lambda: array("i"))  # type: ignore[type-arg]

    def due(self, now: float) -> bool:
        """Whether a sample time falls before ``now``."""
        return self.start + len(self.busy_gpus) * self.step < now

    def fill(self, now: float, busy: int, pending: int, fragmented: int) -> None:
        """Record the state held until ``now`` at every sample time before it.

        At :data:`MAX_SAMPLES` every other sample is dropped and the step doubles: the
        series is then what sampling at the coarser step from the start would give.
        """
        while True:
            count = len(self.busy_gpus)
            missing = math.ceil((now - self.start) / self.step) - count
            if missing <= 0:
                return
            if count >= MAX_SAMPLES:
                self.busy_gpus = self.busy_gpus[::2]
                self.pending_jobs = self.pending_jobs[::2]
                self.fragmented_gpus = self.fragmented_gpus[::2]
                self.step *= 2
                continue
            n = min(missing, MAX_SAMPLES - count)
            self.busy_gpus.extend(array("i", [busy]) * n)
            self.pending_jobs.extend(array("i", [pending]) * n)
            self.fragmented_gpus.extend(array("i", [fragmented]) * n)


@dataclass(slots=True)
class SimResult:
    policy: str
    cluster_gpus: int
    cluster_nodes: int
    records: list[JobRecord]
    series: ClusterSeries
    events: int
    wall_s: float
    busy_gpu_seconds: float = 0.0  # physical: GPUs held by at least one job, over time
    tuner_log: list[Any] = field(default_factory=list)  # tuner actions, when the policy has one
    story: list[tuple[float, str]] = field(default_factory=list)  # decisions on the explained job
    waits: dict[str, float] = field(default_factory=dict)  # its reasons for waiting -> seconds
    pool_gpu_seconds: dict[str, float] = field(default_factory=dict)  # GPUs held x time, by pool


def simulate(
    jobs: Sequence[JobSpec],
    cluster: Cluster,
    policy: Policy,
    config: SchedulerConfig | None = None,
    progress: ProgressFn | None = None,
    sample_every: float = 60.0,
    observer: Observer | None = None,
    annotator: Annotator | None = None,
    world: World | None = None,
    forecasts: Sequence[tuple[float, Forecast]] = (),
    explain: str | None = None,
    predict_every: int = 0,
) -> SimResult:
    """Replay ``jobs`` (sorted by submit time) on ``cluster`` under ``policy``.

    ``world`` supplies what only reality knows: profiling measurements and how
    fast two packed jobs run (without one, profiling reports nothing and
    packed jobs run at full speed). ``forecasts`` are ``(time, Forecast)``
    pairs delivered to the policy's tuner as the clock passes them. With
    ``predict_every = n``, every n-th arrival that has to wait records the
    start time the core expected for it (to measure that forecast's accuracy).
    """
    wall_start = time.perf_counter()
    config = config or SchedulerConfig()
    world = world or World()
    scheduler = Scheduler(cluster, policy, config=config)
    free = scheduler.free
    total_gpus = cluster.total_gpus
    nodes = cluster.nodes
    partners = scheduler.partners

    records: dict[str, JobRecord] = {}
    specs: dict[str, JobSpec] = {}
    work: dict[str, float] = {}  # solo-seconds of work left as of since[job] (the truth)
    since: dict[str, float] = {}
    rate: dict[str, float] = {}  # progress per second: 1 alone, less when packed
    base_rate: dict[str, float] = {}  # progress per second alone on its GPU type
    cut_at: dict[str, float] = {}  # end of a bounded (profiling) run
    version: dict[str, int] = {}
    events_heap: list[tuple[float, int, str, int, int]] = []  # time, tiebreak, id, version, kind
    tiebreak = 0
    busy_total = 0.0

    pool_of_node = [n.labels.get("pool", "main") for n in nodes]
    pool_gpu_s: dict[str, float] = {}
    pool_of_job: dict[str, str] = {}

    def settle(job_id: str, now: float) -> None:
        ran = now - since[job_id]
        if ran > 0:
            rec = records[job_id]
            rec.busy_gpu_seconds += ran * rec.num_gpus
            pool = pool_of_job.get(job_id, "main")
            pool_gpu_s[pool] = pool_gpu_s.get(pool, 0.0) + ran * rec.num_gpus
            done_work = ran * rate[job_id]
            rec.work_done += done_work
            work[job_id] = max(0.0, work[job_id] - done_work)
        since[job_id] = now

    def plan(job_id: str, now: float) -> None:
        nonlocal tiebreak
        ver = version.get(job_id, 0) + 1
        version[job_id] = ver
        end = now + work[job_id] / rate[job_id]
        kind = 0
        cut = cut_at.get(job_id)
        if cut is not None and cut < end:
            end, kind = cut, 1
        tiebreak += 1
        heapq.heappush(events_heap, (end, tiebreak, job_id, ver, kind))

    start_time = jobs[0].submit_time if jobs else 0.0
    series = ClusterSeries(start=start_time, step=sample_every)
    last_time = start_time
    n_jobs = len(jobs)
    next_job = 0
    next_forecast = 0
    wake: float | None = None
    events = 0
    done = 0
    report_every = max(1, n_jobs // 200)
    arrived: list[str] = []
    waited = 0  # arrivals that could not start at once
    story: list[tuple[float, str]] = []  # what happened to the explained job
    waits: dict[str, float] = {}  # why it waited -> seconds
    last_reason: tuple[float, str] | None = None

    while done < n_jobs:
        # 1. the next moment anything happens
        now = float("inf")
        if next_job < n_jobs:
            now = jobs[next_job].submit_time
        if events_heap and events_heap[0][0] < now:
            now = events_heap[0][0]
        if wake is not None and wake < now:
            now = wake
        if now == float("inf"):
            stuck = n_jobs - done
            raise RuntimeError(
                f"{policy.name}: {stuck} job(s) can never start on this cluster"
                f" ({total_gpus} GPUs); the first pending is {_first_pending(scheduler)}"
            )
        if next_forecast < len(forecasts) and forecasts[next_forecast][0] < now:
            now = max(forecasts[next_forecast][0], last_time)

        # 2. account the cluster state up to (not including) this moment
        busy = total_gpus - free.free_total
        busy_total += busy * (now - last_time)
        last_time = now
        if series.due(now):
            series.fill(now, busy, scheduler.pending_count, free.fragmented_free())

        # 3. completions, then arrivals, then one scheduling pass (the artifact's order)
        while events_heap and events_heap[0][0] <= now:
            _, _, job_id, ver, kind = heapq.heappop(events_heap)
            if version.get(job_id) != ver:
                continue  # stale: preempted or re-planned after this event was planned
            settle(job_id, now)
            rec = records[job_id]
            if kind == 1:  # a profiling run reached its limit
                del cut_at[job_id]
                report = world.measure(specs[job_id], now - rec.first_start, now)
                rec.profiled_s += now - rec.first_start
                rec.restores += 1
                if observer is not None:
                    observer(now, "profiled", job_id, scheduler.jobs[job_id].placement)
                work[job_id] += config.overhead.for_job(specs[job_id])
                version[job_id] += 1
                scheduler.profiled(job_id, now, report)
                if job_id == explain:
                    story.append(
                        (
                            now,
                            f"left the profiler: sharing score {report.sharing_score},"
                            f" {report.gpu_memory_gb or 0:.1f} GB; {report.note}",
                        )
                    )
                events += 1
                continue
            rec.end = now
            if observer is not None:
                observer(now, "finish", job_id, scheduler.jobs[job_id].placement)
            partner = partners.get(job_id)
            finished = scheduler.finish(job_id, now)
            if partner is not None:  # the partner runs alone again, at full speed
                settle(partner, now)
                rate[partner] = base_rate[partner]
                plan(partner, now)
            if annotator is not None:
                annotator.on_finish(finished.spec, now)
            cut_at.pop(job_id, None)
            del work[job_id], since[job_id], version[job_id], rate[job_id], specs[job_id]
            pool_of_job.pop(job_id, None)
            base_rate.pop(job_id, None)
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
            work[spec.id] = spec.duration
            if annotator is not None:
                spec = annotator.on_submit(spec, now)
            specs[spec.id] = spec
            scheduler.submit(spec, now)
            arrived.append(spec.id)
            events += 1
            if progress is not None and next_job % report_every == 0:
                progress(next_job / n_jobs)
        while next_forecast < len(forecasts) and forecasts[next_forecast][0] <= now:
            scheduler.forecast(forecasts[next_forecast][1], now)
            next_forecast += 1

        decisions = scheduler.schedule(now)
        for job_id in arrived:
            job_state = scheduler.jobs.get(job_id)
            if job_state is not None and job_state.status.value == "pending":
                records[job_id].wait_reason = scheduler.wait_code(job_id)
                waited += 1
                if job_id == explain or (predict_every and waited % predict_every == 0):
                    expected = scheduler.expected_starts(now, until=job_id).get(job_id)
                    if expected is not None:
                        records[job_id].predicted_start = expected
                        if job_id == explain:
                            position = scheduler.policy.queue_position(job_state, now)
                            story.append(
                                (
                                    now,
                                    f"queued at position {position}; expected to start at"
                                    f" t={expected:,.0f} (in {expected - now:,.0f} s)",
                                )
                            )
        arrived.clear()
        if explain is not None:
            if last_reason is not None:
                waits[last_reason[1]] = waits.get(last_reason[1], 0.0) + now - last_reason[0]
                last_reason = None
            for decision in decisions:
                if decision.job_id == explain:
                    story.append((now, decision.explain()))
                    if decision.action is Action.START and decision.placement is not None:
                        parts = scheduler.placer.explain(
                            specs[explain], decision.placement, scheduler.free
                        )
                        story.append(
                            (
                                now,
                                "why these nodes: "
                                + "; ".join(f"{p.plugin} {p.value:+g} ({p.detail})" for p in parts),
                            )
                        )
            state = scheduler.jobs.get(explain)
            if state is not None and state.status.value == "pending":
                # aggregate over time without the queue position, which changes every pass
                sentence = scheduler.why_pending(explain, now)
                last_reason = (now, re.sub(r" \(position \d+ in [\w-]+ order\)", "", sentence))
        for decision in decisions:
            job_id = decision.job_id
            rec = records[job_id]
            if observer is not None:
                event = "pack" if decision.shares_with is not None else decision.action.value
                observer(now, event, job_id, decision.placement)
            if decision.action is Action.START:
                assert decision.placement is not None
                if rec.first_start < 0:
                    rec.first_start = now
                    rec.nodes = "+".join(
                        f"{nodes[i].name}:{c}" for i, c in decision.placement.parts
                    )
                if decision.limit_s is None and rec.main_start < 0 and rec.profiled_s > 0:
                    rec.main_start = now
                since[job_id] = now
                rate[job_id] = 1.0
                if decision.placement.parts:
                    first_node = decision.placement.parts[0][0]
                    pool_of_job[job_id] = pool_of_node[first_node]
                    # a gang runs at the pace of its slowest GPU type
                    rate[job_id] = min(
                        world.speed(specs[job_id], nodes[i].gpu_type)
                        for i, _ in decision.placement.parts
                    )
                base_rate[job_id] = rate[job_id]
                startup = decision.reasons[0].numbers.get("startup_s", 0.0)
                if startup:  # a paid pool's provisioning: held, no progress yet
                    work[job_id] += startup
                    rec.startup_s += startup
                if decision.limit_s is not None:
                    cut_at[job_id] = now + decision.limit_s
                if decision.shares_with is not None:
                    other = decision.shares_with
                    mine, theirs = world.pair_speed(specs[job_id], specs[other])
                    settle(other, now)
                    rate[job_id], rate[other] = mine * base_rate[job_id], theirs * base_rate[other]
                    rec.packed += 1
                    plan(other, now)
                plan(job_id, now)
            elif decision.action is Action.PREEMPT:
                settle(job_id, now)
                cut_at.pop(job_id, None)
                rec.preemptions += 1
                rec.restores += 1
                numbers = decision.reasons[0].numbers
                # the core counts lost run time; the work it stands for ran at this rate
                lost_work = numbers.get("lost_s", 0.0) * rate[job_id]
                rec.lost_work_s += lost_work
                work[job_id] += lost_work + numbers.get(
                    "overhead_s", config.overhead.for_job(specs[job_id])
                )
                version[job_id] = version.get(job_id, 0) + 1
                if decision.shares_with is not None:  # its partner runs alone, at full speed
                    other = decision.shares_with
                    settle(other, now)
                    rate[other] = base_rate[other]
                    plan(other, now)
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
        busy_gpu_seconds=busy_total,
        tuner_log=list(policy.tuner_log),
        story=story,
        waits=waits,
        pool_gpu_seconds=pool_gpu_s,
    )


def _first_pending(scheduler: Scheduler) -> str:
    for job in scheduler.pending():
        return f"{job.spec.id} ({job.spec.num_gpus} GPUs)"
    return "none"
