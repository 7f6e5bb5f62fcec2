"""What a replay records, and the world it replays against.

:mod:`ilucid.sim.engine` runs the replay; these are its inputs from reality
(:class:`World`, :class:`Annotator`, :class:`Observer`) and its outputs
(:class:`JobRecord`, :class:`ClusterSeries`, :class:`SimResult`).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from mypy_extensions import mypyc_attr

from ilucid.core import JobSpec, Placement, ProfileReport
from ilucid.core.picklable import picklable

__all__ = [
    "MAX_SAMPLES",
    "Annotator",
    "ClusterSeries",
    "JobRecord",
    "Observer",
    "ProgressFn",
    "SimResult",
    "World",
]

ProgressFn = Callable[[float], None]

#: Most samples a :class:`ClusterSeries` holds (6 MB; 347 days at one a minute). Past it
#: the interval doubles, so a huge makespan costs memory and time by events, not by
#: simulated minutes.
MAX_SAMPLES = 500_000


@mypyc_attr(
    allow_interpreted_subclasses=True
)  # worlds outside the compiled core (Lucid's, Gavel's, a test's) subclass it
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
    main_start: float = -1.0  # first start outside the profiling pool
    predicted_low: float = -1.0  # that prediction's 80% interval (p10 to p90)
    predicted_high: float = -1.0
    projected_start: float = -1.0  # the queue's projection it calibrated

    def __init__(
        self,
        id: str,
        submit: float,
        num_gpus: int,
        duration: float,
        job_class: str,
        tenant: str,
        first_start: float = -1.0,
        end: float = -1.0,
        preemptions: int = 0,
        nodes: str = "",
        busy_gpu_seconds: float = 0.0,
        work_done: float = 0.0,
        restores: int = 0,
        profiled_s: float = 0.0,
        packed: int = 0,
        wait_reason: str = "",
        lost_work_s: float = 0.0,
        startup_s: float = 0.0,
        predicted_start: float = -1.0,
        main_start: float = -1.0,
        predicted_low: float = -1.0,
        predicted_high: float = -1.0,
        projected_start: float = -1.0,
    ) -> None:  # written out: one per job (see ilucid.core.model.JobSpec.__init__)
        self.id = id
        self.submit = submit
        self.num_gpus = num_gpus
        self.duration = duration
        self.job_class = job_class
        self.tenant = tenant
        self.first_start = first_start
        self.end = end
        self.preemptions = preemptions
        self.nodes = nodes
        self.busy_gpu_seconds = busy_gpu_seconds
        self.work_done = work_done
        self.restores = restores
        self.profiled_s = profiled_s
        self.packed = packed
        self.wait_reason = wait_reason
        self.lost_work_s = lost_work_s
        self.startup_s = startup_s
        self.predicted_start = predicted_start
        self.main_start = main_start
        self.predicted_low = predicted_low
        self.predicted_high = predicted_high
        self.projected_start = projected_start

    @property
    def jct(self) -> float:
        return self.end - self.submit

    @property
    def queueing_delay(self) -> float:
        """First start minus submission; for a profiled job, its first start after
        profiling (profiling counts as waiting for the cluster, as in Lucid)."""
        start = self.main_start if self.main_start >= 0 else self.first_start
        return start - self.submit


picklable(JobRecord)  # its own __init__ (see ilucid.core.picklable)


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
    #: paid pools' bill for node time (up until released), by pool: (cost, GPU-hours)
    cloud_bill: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: what each tenant's runs in paid pools cost (the budgets' measure)
    tenant_cloud_cost: dict[str, float] = field(default_factory=dict)
    power_ups: int = 0  # paid-pool nodes brought up
