"""Hand-computed schedules for the default profile, ``ilucid``.

Same conventions as ``test_policies_hand.py``: ``x(t=10, 1g, 100s, est 50)`` is
job ``x`` submitted at t=10 asking for 1 GPU, true duration 100 s, estimated
50 s. Levels are 1,800 / 18,000 / 180,000 attained GPU-seconds; inside a level
the job with the fewest estimated GPU-seconds left goes first (a running job's as
of its last re-key, less its 40 s restore overhead). A preempted job keeps its work (no
checkpoint interval) and pays 40 s to restore.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ilucid.core import Cluster, JobClass, JobSpec, ProfileReport, Scheduler, make_policy
from ilucid.core.policies.default import DefaultConfig, DefaultPlan, DefaultPolicy
from ilucid.core.policies.router import InferenceRouter
from ilucid.sim.engine import simulate
from ilucid.sim.replay_types import JobRecord

#: re-plan at every event, so the times below are the events' own (the default waits
#: for the next 60 s boundary: see test_training_is_replanned_on_60_s_boundaries), and
#: no profiling run (see test_profiling_then_packing)
EVERY_EVENT = DefaultConfig(replan_interval_s=0.0, profile_limit_s=None)


def job(
    job_id: str,
    submit: float,
    gpus: int,
    duration: float,
    estimate: float,
    job_class: JobClass = JobClass.TRAINING,
) -> JobSpec:
    return JobSpec(job_id, submit, gpus, duration, job_class=job_class, estimate=estimate)


def run(
    jobs: Sequence[JobSpec], cluster: Cluster, config: DefaultConfig | None = None
) -> dict[str, tuple[float, float, int]]:
    result = simulate(jobs, cluster, DefaultPolicy(config or EVERY_EVENT))
    records: dict[str, JobRecord] = {r.id: r for r in result.records}
    assert len(records) == len(jobs)
    return {i: (r.end - r.submit, r.first_start, r.preemptions) for i, r in records.items()}


def test_a_shorter_newcomer_in_the_same_level_preempts() -> None:
    # a(t=0, 1g, 4000s, est 4000) starts at 0. b(t=100, 1g, 500s, est 500): both in level 0;
    # a's key is 4000 - 40 = 3960 GPU-s, b's 500, so b goes first: a is
    # preempted at 100 (3900 s left + 40 s restore = 3940 s), b runs 100-600, a 600-4540.
    jobs = [job("a", 0, 1, 4000, 4000), job("b", 100, 1, 500, 500)]
    assert run(jobs, Cluster.homogeneous(1, 1)) == {
        "a": (4540, 0, 1),
        "b": (500, 100, 0),
    }


def test_a_job_past_its_level_yields_to_a_new_one_whatever_their_estimates() -> None:
    # a(t=0, 1g, 3000s, est 1000) passes 1,800 GPU-s at t=1800 and drops to level 1.
    # b(t=2000, 1g, 600s, est 5000) is in level 0, so it goes first although its estimate
    # is longer than what a is expected to have left (re-keyed at 1000 s when it outlived
    # its estimate, to twice its run time): a is preempted at 2000 (1000 s left
    # + 40 s restore), b runs 2000-2600, a 2600-3640.
    jobs = [job("a", 0, 1, 3000, 1000), job("b", 2000, 1, 600, 5000)]
    assert run(jobs, Cluster.homogeneous(1, 1)) == {
        "a": (3640, 0, 1),
        "b": (600, 2000, 0),
    }


def test_the_starvation_guard_serves_a_job_that_waited_too_long() -> None:
    # guard after 1000 s. x(t=0, 600s, est 600) runs 0-600. L(t=10, 2000s, est 10000) waits
    # behind it and behind y(t=500, 600s, est 600), which runs from 600. At t=1010 L has
    # waited 1000 s for its first start: it goes ahead of every level, so y is preempted
    # (190 s left by its estimate, 190 + 40 = 230 s of real work), and L runs 1010-3010,
    # stopped by no training job. z(t=1100, 600s, est 600) waits behind L; at 2100 it has
    # waited 1000 s too and goes ahead of y (a preempted job is guarded only after
    # rewait_after_s, 7 days). Starving jobs are served in the order they began to starve,
    # so z waits for L to end: z 3010-3610, then y 3610-3840.
    jobs = [
        job("x", 0, 1, 600, 600),
        job("L", 10, 1, 2000, 10000),
        job("y", 500, 1, 600, 600),
        job("z", 1100, 1, 600, 600),
    ]
    config = DefaultConfig(starve_after_s=1000.0, replan_interval_s=0.0, profile_limit_s=None)
    assert run(jobs, Cluster.homogeneous(1, 1), config) == {
        "x": (600, 0, 0),
        "L": (3000, 1010, 0),
        "y": (3340, 600, 1),
        "z": (2510, 3010, 0),
    }


def test_inference_preempts_training_and_training_keeps_the_reserve() -> None:
    # 1 node x 2 GPUs; inference may hold floor(0.8 x 2) = 1 GPU. t(t=0, 2g, 1000s) runs;
    # i(t=100, inference, 1g, 500s) finds no free GPU and preempts t (900 s left + 40 s).
    # The 1 GPU inference leaves is too few for t, which waits until i ends at 600 and
    # then runs 600-1540.
    jobs = [
        job("t", 0, 2, 1000, 1000),
        job("i", 100, 1, 500, 500, JobClass.INFERENCE),
    ]
    assert run(jobs, Cluster.homogeneous(1, 2)) == {
        "t": (1540, 0, 1),
        "i": (500, 100, 0),
    }


def test_why_pending_names_the_starvation_guard_and_the_start_reason_names_the_level() -> None:
    scheduler = Scheduler(
        Cluster.homogeneous(1, 1),
        DefaultPolicy(
            DefaultConfig(starve_after_s=50, replan_interval_s=0.0, profile_limit_s=None)
        ),
    )
    scheduler.submit(job("a", 0, 1, 1000, 1000), 0)
    first = scheduler.schedule(0)
    assert first[0].reasons[0].message == (
        "ilucid: level 0 of 3 (attained 0 GPU-s < 1,800), estimated 1,000 s x 1 GPU(s) left;"
        " within the GPUs in its order"
    )
    scheduler.submit(job("b", 10, 1, 5000, 5000), 10)
    scheduler.schedule(10)
    assert scheduler.why_pending("b", 10) == (
        "pending (position 1 in ilucid order): the only GPU is busy (1 training)"
    )
    decisions = scheduler.schedule(60)
    assert [d.action.value for d in decisions] == ["preempt", "start"]
    assert (
        decisions[1]
        .reasons[0]
        .message.startswith(
            "ilucid: served first by the starvation guard, estimated 5,000 s x 1 GPU(s) left"
        )
    )


def test_training_is_replanned_on_60_s_boundaries_and_inference_at_once() -> None:
    # default replan_interval_s = 60. a(t=10, 1g, 100s) waits for t=60 and ends at 160.
    # i(t=70, inference, 1g, 50s) starts at once on the free GPU and ends at 120.
    # b(t=130, 1g, 100s) waits for t=180: 1 GPU is free then (a still runs), ends at 280.
    jobs = [
        job("a", 10, 1, 100, 100),
        job("i", 70, 1, 50, 50, JobClass.INFERENCE),
        job("b", 130, 1, 100, 100),
    ]
    assert run(jobs, Cluster.homogeneous(1, 2), DefaultConfig(profile_limit_s=None)) == {
        "a": (150, 60, 0),
        "i": (50, 70, 0),
        "b": (150, 180, 0),
    }


def test_the_registry_builds_the_default_profile_by_name() -> None:
    policy = make_policy("ilucid")
    assert isinstance(policy, InferenceRouter) and isinstance(policy.training, DefaultPlan)
    assert policy.training.config == DefaultConfig()  # the plugins' arguments are its config


@pytest.mark.parametrize("levels", [(100.0, 50.0), (0.0,), (-1.0, 5.0)])
def test_levels_must_be_positive_and_increasing(levels: tuple[float, ...]) -> None:
    with pytest.raises(ValueError, match="levels must"):
        DefaultConfig(levels=levels)


def test_profiling_then_packing() -> None:
    # 1 node x 1 GPU, profiling runs of 100 s. b(t=0, est 5000) profiles 0-100 and reports
    # a sharing score of 1. a(t=100, est 1000) goes first (1000 < 4900 GPU-s left) and
    # profiles 100-200: score 0. At 200 a runs on (900 < 4900), and b, waiting with a
    # profile, shares a's GPU: scores 1 + 0 <= 2 and 4 + 4 GB fit in the assumed 32 GB.
    config = DefaultConfig(replan_interval_s=0.0, profile_limit_s=100.0)
    scheduler = Scheduler(Cluster.homogeneous(1, 1), DefaultPolicy(config))
    scheduler.submit(job("b", 0, 1, 5000, 5000), 0)
    first = scheduler.schedule(0)
    assert [(d.job_id, d.limit_s) for d in first] == [("b", 100.0)]
    assert first[0].reasons[0].message.endswith("profiling for up to 100 s first")
    scheduler.profiled("b", 100, ProfileReport(sharing_score=1, gpu_memory_gb=4.0, estimate=None))
    scheduler.submit(job("a", 100, 1, 1000, 1000), 100)
    second = scheduler.schedule(100)
    assert [(d.job_id, d.limit_s) for d in second] == [("a", 100.0)]
    scheduler.profiled("a", 200, ProfileReport(sharing_score=0, gpu_memory_gb=4.0, estimate=None))
    third = scheduler.schedule(200)
    assert [(d.job_id, d.limit_s, d.shares_with) for d in third] == [
        ("a", None, None),
        ("b", None, "a"),
    ]
    assert third[1].reasons[0].message == (
        "ilucid: packed with a: sharing scores 1+0 <= 2, GPU memory 4.0+4.0 GB fits"
    )
    assert scheduler.partners == {"a": "b", "b": "a"}


def test_profiling_stops_when_nothing_measures_sharing() -> None:
    # profile_probe reports without a sharing score: later jobs start without a profiling run
    config = DefaultConfig(replan_interval_s=0.0, profile_limit_s=100.0, profile_probe=2)
    scheduler = Scheduler(Cluster.homogeneous(1, 4), DefaultPolicy(config))
    for name in ("a", "b"):
        scheduler.submit(job(name, 0, 1, 5000, 5000), 0)
    assert [d.limit_s for d in scheduler.schedule(0)] == [100.0, 100.0]
    empty = ProfileReport(sharing_score=None, gpu_memory_gb=None, estimate=None)
    scheduler.profiled("a", 100, empty)
    scheduler.profiled("b", 100, empty)
    scheduler.submit(job("c", 100, 1, 5000, 5000), 100)
    assert sorted((d.job_id, d.limit_s) for d in scheduler.schedule(100)) == [
        ("a", None),
        ("b", None),
        ("c", None),
    ]


def test_a_preemption_says_where_the_victim_stood() -> None:
    scheduler = Scheduler(Cluster.homogeneous(1, 1), DefaultPolicy(EVERY_EVENT))
    scheduler.submit(job("a", 0, 1, 4000, 4000), 0)
    scheduler.schedule(0)
    scheduler.submit(job("b", 100, 1, 500, 500), 100)
    preempt, start = scheduler.schedule(100)
    assert preempt.explain() == (
        "preempt a: ilucid: level 0 of 3 (attained 100 GPU-s < 1,800), estimated 3,900 s x 1"
        " GPU(s) left; jobs ahead of it in the order need its GPUs: b; restore costs 40 s"
    )
    assert start.job_id == "b"
