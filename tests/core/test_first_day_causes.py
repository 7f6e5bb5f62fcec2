"""Issue 34, first-day point 1: a waiting job's sentence names what really keeps it
waiting, and the default profile's re-planning walk starts what fits.

Found live on 2 virtual GPUs: a second half-GPU job and a 0-GPU job both read "fits now
but ilucid runs jobs ahead of it first" with nothing ahead of them (the walk counted a
half GPU as a whole one, and stopped looking once the GPU quota was spent, so jobs that
need no GPU were never chosen); a preemption did not say which jobs took its GPUs."""

from __future__ import annotations

from ilucid.core import Cluster, JobClass, JobSpec, Node, Scheduler, make_policy
from ilucid.core.decision import Action

# the live service's host: one node, 2 GPUs, 2 CPUs
HOST = Cluster((Node("vm", 2, cpus=2, memory_gb=16),))


def training(job_id: str, gpus: int, estimate: float = 3600.0, **kw: object) -> JobSpec:
    return JobSpec(job_id, 0, gpus, 10 * estimate, estimate=estimate, **kw)  # type: ignore[arg-type]


def ilucid() -> Scheduler:
    return Scheduler(HOST, make_policy("ilucid"))


def started(scheduler: Scheduler, now: float) -> list[str]:
    return [d.job_id for d in scheduler.schedule(now) if d.action is Action.START]


def test_a_second_half_gpu_job_shares_the_half_used_gpu() -> None:
    scheduler = ilucid()
    scheduler.submit(training("whole", 1), 0)
    scheduler.submit(training("half1", 1, gpu_milli=500), 0)
    assert started(scheduler, 0) == ["whole", "half1"]
    scheduler.submit(training("half2", 1, gpu_milli=500), 10)
    assert started(scheduler, 60) == ["half2"], scheduler.why_pending("half2", 60)
    half1, half2 = scheduler.jobs["half1"].placement, scheduler.jobs["half2"].placement
    assert half1 is not None and half2 is not None
    assert (half2.parts, half2.share) == (half1.parts, half1.share)
    assert scheduler.free.free_total == 0


def test_jobs_without_gpus_start_after_the_gpu_quota_is_spent() -> None:
    scheduler = ilucid()
    scheduler.submit(training("cpu-bound", 1, cpus=2), 0)
    assert started(scheduler, 0) == ["cpu-bound"]
    # ahead in the order: it takes the last GPU of the quota but finds no free CPU
    scheduler.submit(training("blocked", 1, estimate=100, cpus=1), 10)
    scheduler.submit(training("no-gpu-1", 0), 10)
    scheduler.submit(training("no-gpu-2", 0), 10)
    assert sorted(started(scheduler, 60)) == ["no-gpu-1", "no-gpu-2"]
    why = scheduler.why_pending("blocked", 60)
    assert "lacks the free CPUs or memory" in why, why


def test_a_job_without_gpus_is_never_preempted_for_gpus() -> None:
    scheduler = ilucid()
    scheduler.submit(training("no-gpu", 0), 0)
    assert started(scheduler, 0) == ["no-gpu"]
    scheduler.submit(training("short-wide", 2, estimate=60), 10)
    decisions = scheduler.schedule(60)
    assert [(d.action, d.job_id) for d in decisions] == [(Action.START, "short-wide")]


def test_a_job_without_gpus_that_states_cpus_waits_for_them_and_says_so() -> None:
    scheduler = ilucid()
    scheduler.submit(training("holder", 1, cpus=2), 0)
    assert started(scheduler, 0) == ["holder"]
    scheduler.submit(training("no-gpu", 0, cpus=1), 10)
    assert started(scheduler, 60) == []
    why = scheduler.why_pending("no-gpu", 60)
    assert "position 1" in why and "ahead of it" not in why, why
    assert "CPUs" in why and "vm" in why, why
    scheduler.finish("holder", 100)
    assert started(scheduler, 120) == ["no-gpu"]
    assert scheduler.free.cpus_free[0] == 1


def test_fits_now_names_the_jobs_ahead_and_what_holds_them() -> None:
    scheduler = ilucid()
    scheduler.submit(training("holder", 1, estimate=100, cpus=2), 0)
    assert started(scheduler, 0) == ["holder"]
    # ahead of "next" in the order, they take the GPU quota left but find no free CPU
    for job_id in ("blocked", "b2", "b3", "b4"):
        scheduler.submit(training(job_id, 1, cpus=1), 10)
    scheduler.submit(training("next", 1), 10)
    assert started(scheduler, 60) == []
    why = scheduler.why_pending("next", 60)
    # the jobs ahead that hold the GPU quota, named, and why the first of them waits
    assert "serves 4 jobs ahead of it in its order first: blocked, b2, b3 and 1 more" in why
    assert "; blocked waits: 1 of 1 node with free GPUs lacks the free CPUs or memory (vm;" in why


def test_a_preemption_names_the_jobs_that_need_its_gpus() -> None:
    scheduler = ilucid()
    scheduler.submit(training("long", 2, estimate=36000), 0)
    assert started(scheduler, 0) == ["long"]
    scheduler.submit(training("short", 2, estimate=60), 10)
    decisions = scheduler.schedule(60)
    preempted = [d for d in decisions if d.action is Action.PREEMPT]
    assert [d.job_id for d in preempted] == ["long"]
    assert "need its GPUs: short" in preempted[0].explain(), preempted[0].explain()


def test_inference_class_is_unchanged_by_the_walk_weights() -> None:
    """Inference shares are counted by the tier as their fraction already."""
    scheduler = ilucid()
    scheduler.submit(JobSpec("i1", 0, 1, 100, job_class=JobClass.INFERENCE, gpu_milli=500), 0)
    scheduler.submit(JobSpec("i2", 0, 1, 100, job_class=JobClass.INFERENCE, gpu_milli=500), 0)
    assert started(scheduler, 0) == ["i1", "i2"]


def test_fits_now_with_nothing_ahead_says_it_waits_only_for_the_next_pass() -> None:
    scheduler = ilucid()  # re-plans every 60 s of absolute time
    scheduler.submit(training("first", 1), 10)
    why = scheduler.why_pending("first", 10)
    assert "nothing is ahead of it" in why and "runs jobs ahead" not in why, why
    assert started(scheduler, 60) == ["first"]
