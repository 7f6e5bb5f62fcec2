"""Hollow nodes: a backend for benchmarks only, in the spirit of Kubernetes' kubemark.

It lets ``ilucid serve`` (its real API, database and reconcile loop) be measured on a
cluster of thousands of nodes that do not exist. It keeps the backend contract:
``start`` takes the nodes the core chose and books their GPUs, ``observe`` reports
the jobs running on them, and each job ends on its own schedule, drawn from a
trace's job durations, without any process. ``stop`` ends a job at once, as a
signal would (exit code 143).

With ``found_running``, the jobs of the first pass that starts any (the pass that
fills an empty cluster) are taken as found mid-run, as on a cluster that has run for
hours: each one's run time is drawn in proportion to its length and it has a uniform
share of it left (the stationary state of a renewal process), so from the first
pass on the share of jobs ending per pass is the steady one instead of a wave of
short jobs ending at once (a job shorter than a pass counts as one pass long: it
ends at the next pass, whatever its length).

It never runs a command and holds nothing on disk: a restarted service finds its
jobs gone (lost) and requeues them. Never use it to run real work.
"""

from __future__ import annotations

import heapq
import itertools
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ilucid.backends.base import Observation, ObservedJob, ProcessState
from ilucid.core import Cluster

__all__ = ["HOLLOW_EXIT_STOPPED", "HollowBackend", "HollowDurations"]

#: the exit code of a job ``stop`` ended (128 + SIGTERM), as a job killed by it reports
HOLLOW_EXIT_STOPPED = 143


@dataclass(frozen=True, slots=True)
class HollowDurations:
    """Where each hollow job's run time comes from: a trace's job durations, drawn
    with replacement (seeded), scaled so that their mean is ``mean_s``."""

    samples: tuple[float, ...]
    mean_s: float
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.samples or any(s <= 0 for s in self.samples):
            raise ValueError("hollow durations need at least one positive duration")
        if not self.mean_s > 0:
            raise ValueError(f"hollow mean duration must be > 0 s, got {self.mean_s}")

    @classmethod
    def from_trace(cls, name_or_path: str, mean_s: float, seed: int = 0) -> HollowDurations:
        """The durations of a trace's jobs (a known trace name or a file)."""
        from ilucid.traces.resolve import load_trace

        trace = load_trace(name_or_path)
        samples = tuple(job.duration for job in trace.jobs if job.duration > 0)
        if not samples:
            raise ValueError(f"{name_or_path}: no job with a positive duration")
        return cls(samples, mean_s, seed)

    @classmethod
    def lognormal(cls, mean_s: float, seed: int = 0, count: int = 4096) -> HollowDurations:
        """Without a trace: log-normal run times (sigma 1.5, as DL job durations spread)."""
        draw = random.Random(seed)
        return cls(tuple(draw.lognormvariate(0.0, 1.5) for _ in range(count)), mean_s, seed)


@dataclass(slots=True)
class _HollowJob:
    job_id: str
    gpus: tuple[int, ...]
    parts: tuple[tuple[str, int], ...]
    #: (node name, GPU indices there) it holds until it ends
    holds: tuple[tuple[str, tuple[int, ...]], ...]
    ends_at: float
    seen: ObservedJob


class HollowBackend:
    """``nodes`` x ``gpus_per_node`` GPUs that exist only in memory (benchmarks only)."""

    name = "hollow"

    def __init__(
        self,
        nodes: int,
        gpus_per_node: int,
        durations: HollowDurations,
        clock: Callable[[], float] = time.time,
        gpu_type: str = "generic",
        found_running: bool = False,
        pass_interval_s: float = 2.0,
    ) -> None:
        self.cluster = Cluster.homogeneous(nodes, gpus_per_node, gpu_type)
        self._clock = clock
        self._draw = random.Random(durations.seed)
        self._samples = durations.samples
        self._scale = durations.mean_s / (sum(durations.samples) / len(durations.samples))
        #: free GPU indices per node, lowest first
        self._free: dict[str, list[int]] = {
            node.name: list(range(node.num_gpus)) for node in self.cluster.nodes
        }
        self._jobs: dict[str, _HollowJob] = {}
        #: what observe reports: a running job's entry is made once, at its start
        self._seen: dict[str, ObservedJob] = {}
        self._ends: list[tuple[float, str]] = []  # (when, job id), a heap
        #: until an observe sees a job running, starts are the fill of a running cluster
        self._filling = found_running
        #: a job found mid-run is drawn in proportion to the passes it holds its GPUs for
        self._by_length = list(
            itertools.accumulate(max(x * self._scale, pass_interval_s) for x in self._samples)
        )
        self._pass_s = pass_interval_s

    def observe(self) -> Observation:
        now = self._clock()
        if self._filling and self._jobs:
            self._filling = False
        while self._ends and self._ends[0][0] <= now:
            _, job_id = heapq.heappop(self._ends)
            job = self._jobs.get(job_id)
            if job is not None and job.ends_at <= now and job.seen.state is ProcessState.RUNNING:
                self._exit(job, 0)
        return Observation(self.cluster, dict(self._seen))

    def start(
        self,
        job_id: str,
        command: Sequence[str],
        gpus: int,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        placement: Sequence[tuple[str, int]] | None = None,
        run_as: str | None = None,
        cpus: float | None = None,
        memory_gb: float | None = None,
    ) -> tuple[int, ...] | None:
        """Book the placement's GPUs and schedule the job's end; None while they are
        still held by a job that has not been seen to end (as a real backend)."""
        known = self._jobs.get(job_id)
        if known is not None and known.seen.state is ProcessState.RUNNING:
            raise ValueError(f"hollow backend: job {job_id} is already running")
        where = list(placement or [])
        if gpus > 0 and not where:
            raise ValueError("hollow backend: a GPU job needs the core's placement")
        for node, count in where:
            free = self._free.get(node)
            if free is None:
                raise ValueError(f"hollow backend: no node {node!r}")
            if len(free) < count:
                return None
        holds = []
        indices: list[int] = []
        for node, count in where:
            free = self._free[node]
            taken, self._free[node] = free[:count], free[count:]
            holds.append((node, tuple(taken)))
            indices += taken
        ends_at = self._clock() + self._run_time()
        parts = tuple((node, count) for node, count in where)
        seen = ObservedJob(job_id, ProcessState.RUNNING, tuple(indices), parts=parts)
        self._jobs[job_id] = _HollowJob(job_id, tuple(indices), parts, tuple(holds), ends_at, seen)
        self._seen[job_id] = seen
        heapq.heappush(self._ends, (ends_at, job_id))
        return tuple(indices)

    def stop(self, job_id: str) -> None:
        job = self._jobs.get(job_id)
        if job is not None and job.seen.state is ProcessState.RUNNING:
            self._exit(job, HOLLOW_EXIT_STOPPED)

    def forget(self, job_id: str) -> None:
        """The service committed the job's end: nothing of it is kept."""
        job = self._jobs.get(job_id)
        if job is not None and job.seen.state is ProcessState.EXITED:
            del self._jobs[job_id]
            self._seen.pop(job_id, None)

    def logs(self, job_id: str, stream: str = "stdout", tail_bytes: int = 65536) -> str:
        return ""  # a hollow job prints nothing

    def running(self) -> int:
        """Jobs holding GPUs now (for the benchmark's report)."""
        return sum(1 for job in self._jobs.values() if job.seen.state is ProcessState.RUNNING)

    def _run_time(self) -> float:
        """A fresh job's run time; while filling, what is left of a job found mid-run."""
        if not self._filling:
            return self._draw.choice(self._samples) * self._scale
        (length,) = self._draw.choices(self._samples, cum_weights=self._by_length)
        return self._draw.random() * max(length * self._scale, self._pass_s)

    def _exit(self, job: _HollowJob, code: int) -> None:
        """The job ends: its GPUs are free, and observe reports its exit."""
        for node, taken in job.holds:
            self._free[node] = sorted(self._free[node] + list(taken))
        job.seen = ObservedJob(
            job.job_id, ProcessState.EXITED, job.gpus, exit_code=code, parts=job.parts
        )
        self._seen[job.job_id] = job.seen
