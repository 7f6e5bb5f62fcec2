"""Every reason a replay builds, under every registered profile, carries a
:class:`ReasonCode` member, and so does every wait code (issue 31: codes are an enum).

The replay runs a small synthetic trace built to exercise the reasons: jobs that
wait behind others, gangs too large for one node, jobs a filter keeps off some
nodes (GPU type, GPU memory, CPUs), a burst of inference services, a job that
waits long enough to be drained for, and profiled jobs that pack. After each pass
every pending job is asked why it waits, so the reasons written only on demand are
built too.
"""

from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator

import pytest
from pure_python import pure_env, runs_compiled

from ilucid.core import (
    Cluster,
    Decision,
    JobClass,
    JobSpec,
    Node,
    ProfileReport,
    Reason,
    ReasonCode,
    Scheduler,
    make_policy,
)
from ilucid.core.decision import Words
from ilucid.core.policies import PROFILES
from ilucid.sim.engine import simulate
from ilucid.sim.replay_types import World

#: every registered profile, as a name make_policy builds (static-partition needs :N)
PROFILE_NAMES = [f"{n}:1" if n == "static-partition" else n for n in PROFILES]


class Built:
    """The codes of every Reason constructed, and every wait code given, per profile."""

    def __init__(self) -> None:
        self.profile = ""
        self.reasons: dict[str, Counter[object]] = {}
        self.waits: dict[str, Counter[object]] = {}


@pytest.fixture
def built(
    monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[Built | None]:
    """Record the code of every Reason built and every wait code asked for.

    A compiled core's classes cannot be patched: there the test runs again on the
    Python sources (the same code; tests/test_native.py checks that a replay
    is the same either way) and yields None."""
    if runs_compiled():
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", request.node.nodeid],
            cwd=request.config.rootpath,
            env=pure_env(),
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        yield None
        return
    record = Built()
    init = Reason.__init__

    def recording(
        self: Reason, code: ReasonCode, message: Words, numbers: dict[str, float] | None = None
    ) -> None:
        record.reasons.setdefault(record.profile, Counter())[code] += 1
        init(self, code, message, numbers)

    schedule = Scheduler.schedule

    def asking(self: Scheduler, now: float) -> list[Decision]:
        decisions = schedule(self, now)
        waits = record.waits.setdefault(record.profile, Counter())
        for job in list(self.pending()):
            self.why_pending(job.spec.id, now)  # builds the reasons written on demand
            waits[self.wait_code(job.spec.id)] += 1
        return decisions

    monkeypatch.setattr(Reason, "__init__", recording)
    monkeypatch.setattr(Scheduler, "schedule", asking)
    yield record


class ProfilingWorld(World):
    """Deterministic measurements, so the profiling profiles profile and pack."""

    def measure(self, spec: JobSpec, ran_s: float, now: float) -> ProfileReport:
        return ProfileReport(
            sharing_score=len(spec.id) % 2, gpu_memory_gb=4.0, estimate=spec.duration
        )

    def pair_speed(self, a: JobSpec, b: JobSpec) -> tuple[float, float]:
        return 0.75, 0.5


def mixed_cluster() -> Cluster:
    """Three 4-GPU A100 nodes with room for 24 CPUs, two 8-GPU V100 nodes without."""
    a100 = [Node(f"a{i}", 4, "A100", 80.0, cpus=32.0, memory_gb=256.0) for i in range(3)]
    v100 = [Node(f"v{i}", 8, "V100", 16.0, cpus=16.0, memory_gb=64.0) for i in range(2)]
    return Cluster((*a100, *v100))


def synthetic_trace(seed: int = 3, count: int = 160) -> list[JobSpec]:
    """About a day of jobs arriving every 10 minutes on average, more than the cluster's
    28 GPUs can serve, with the special jobs the module docstring lists."""
    rng = random.Random(seed)
    now = 0.0
    jobs = []
    for index in range(count):
        now += rng.expovariate(1 / 600)
        gpus = rng.choice((1, 1, 2, 4, 4, 8))
        duration = rng.choice((120.0, 900.0, 3600.0, 4 * 3600.0, 20 * 3600.0))
        estimate = duration * rng.choice((0.5, 1.0, 2.0))
        kind = rng.random()
        job_class, gpu_type, memory_gb, cpus = JobClass.TRAINING, None, None, None
        if kind < 0.1:  # an inference service
            gpus, duration, estimate = 1, 6 * 3600.0, 6 * 3600.0
            job_class = JobClass.INFERENCE
        elif kind < 0.2:  # only the V100 nodes
            gpu_type = "V100"
        elif kind < 0.3:  # only the A100 nodes (GPU memory)
            gpus, memory_gb = min(gpus, 4), 40.0
        elif kind < 0.4:  # only the A100 nodes (CPUs)
            gpus, cpus = min(gpus, 4), 24.0
        jobs.append(
            JobSpec(
                f"j{index}",
                now,
                gpus,
                duration,
                job_class,
                tenant=rng.choice("ab"),
                gpu_type=gpu_type,
                gpu_memory_gb=memory_gb,
                estimate=estimate,
                cpus=cpus,
            )
        )
    jobs.append(JobSpec("big", now / 4, 16, 3600.0, estimate=3600.0))
    jobs.append(JobSpec("hog", 0.0, 8, 40 * 3600.0, estimate=400 * 3600.0))
    jobs += [
        JobSpec(f"s{k}", now / 2 + k, 2, 4 * 3600.0, JobClass.INFERENCE, estimate=4 * 3600.0)
        for k in range(14)
    ]
    return sorted(jobs, key=lambda job: job.submit_time)


def test_every_reason_a_replay_builds_has_a_reason_code(built: Built | None) -> None:
    if built is None:
        return  # it ran in pure Python (the fixture)
    jobs = synthetic_trace()
    for name in PROFILE_NAMES:
        built.profile = name
        result = simulate(jobs, mixed_cluster(), make_policy(name), world=ProfilingWorld())
        assert len(result.records) == len(jobs)
        reasons, waits = built.reasons.get(name, Counter()), built.waits.get(name, Counter())
        assert reasons[ReasonCode.SCHEDULED] > 0 and waits, f"{name}: nothing was recorded"
        strays = [c for c in (*reasons, *waits) if not isinstance(c, ReasonCode)]
        assert not strays, f"{name}: codes that are not ReasonCode members: {strays}"
    # the trace reaches most of the codes (so the test is not vacuous): starts, packing,
    # preemption, every kind of wait it was built for
    seen = {c for counts in (*built.reasons.values(), *built.waits.values()) for c in counts}
    assert {
        ReasonCode.SCHEDULED,
        ReasonCode.PACKED,
        ReasonCode.PREEMPTED,
        ReasonCode.DISPLACED,
        ReasonCode.BEHIND_IN_ORDER,
        ReasonCode.INSUFFICIENT_GPUS,
        ReasonCode.FRAGMENTED,
        ReasonCode.GPU_TYPE_MISMATCH,
        ReasonCode.INSUFFICIENT_GPU_MEMORY,
        ReasonCode.INSUFFICIENT_HOST,
        ReasonCode.WAITING_FOR_PROFILER,
        ReasonCode.DRAINING_FOR_STARVING_JOB,
        ReasonCode.TRAINING_RESERVE,
        ReasonCode.INFERENCE_POOL_FULL,
    } <= seen, sorted(seen)
