"""A job whose own progress is trusted is placed by what it has left, not what it attained."""

from __future__ import annotations

import pytest

from ilucid.core import Cluster, JobSpec, Scheduler
from ilucid.core.policies import make_policy


def _running_reporter(left_s: float) -> Scheduler:
    """One GPU; job ``a`` has run 2,400 s (past the first level's 1,800 GPU-s) and says,
    in reports a minute apart over 9 minutes, that it has ``left_s`` s to go."""
    scheduler = Scheduler(Cluster.homogeneous(1, 1), make_policy("ilucid"))
    scheduler.submit(JobSpec("a", 0, 1, 2_400 + left_s, estimate=3_600), 0)
    scheduler.schedule(0)
    total = 2_400 + left_s
    for t in range(1_860, 2_460, 60):  # 1 step a second
        scheduler.progress("a", float(t), float(t), total)
    return scheduler


def test_a_known_job_with_little_left_outranks_one_that_only_attained_less() -> None:
    """Two GPUs: ``a`` has run 20,000 s (level 2 by what it attained) and says it ends in
    1,000 s; ``b`` has run 4,000 s (level 1) and nobody knows how long it needs. A new
    job takes one of their GPUs: before, ``a`` was stopped for attaining more; now it
    stands ahead of level 1 and ``b`` yields. Level 0 (the new job) still goes first."""
    scheduler = Scheduler(Cluster.homogeneous(1, 2), make_policy("ilucid"))
    scheduler.submit(JobSpec("a", 0, 1, 21_000, estimate=3_600), 0)
    scheduler.schedule(0)
    scheduler.submit(JobSpec("b", 16_000, 1, 90_000, estimate=100_000), 16_000)
    scheduler.schedule(16_020)
    for t in range(19_440, 20_040, 60):  # 1 step a second, reports over 9 minutes
        scheduler.progress("a", float(t), float(t), 21_000)
    scheduler.submit(JobSpec("new", 20_040, 1, 5_000, estimate=3_600), 20_040)
    preempt = [d for d in scheduler.schedule(20_040) if d.action.value == "preempt"]
    assert [d.job_id for d in preempt] == ["b"]
    assert scheduler.jobs["a"].status.value == "running"
    plan = scheduler.policy.training  # type: ignore[attr-defined]
    said = plan.leveled.describe(scheduler.jobs["a"], 20_040)
    assert said.startswith("placed by its own progress: 960 GPU-s left, within 18,000:")


def test_a_job_with_much_left_yields_to_a_new_one_and_says_why() -> None:
    scheduler = _running_reporter(50_000)
    scheduler.submit(JobSpec("new", 2_400, 1, 5_000, estimate=3_600), 2_400)
    preempt = [d for d in scheduler.schedule(2_400) if d.action.value == "preempt"]
    assert [d.job_id for d in preempt] == ["a"]
    assert "placed by its own progress: 50,000 GPU-s left, within 180,000: ahead of level 2" in (
        preempt[0].explain()
    )


def test_known_jobs_go_by_what_they_have_left_whatever_they_attained() -> None:
    """The less a known job has left, the further ahead it stands; its level follows
    what it has left (1.75: ahead of level 2, behind level 1), not the 2,400 GPU-s it
    attained (level 1)."""
    scheduler = _running_reporter(20_000)
    plan = scheduler.policy.training  # type: ignore[attr-defined]
    leveled = plan.leveled
    a = scheduler.jobs["a"]
    assert leveled.known_level(1_000) < leveled.known_level(20_000) < leveled.known_level(10**9)
    assert leveled.level(a, a.attained_at(2_400)) == leveled.known_level(20_000)
    assert leveled.known_level(20_000) == pytest.approx(1.75)  # ahead of level 2, behind 1
    assert leveled.known_level(1) == pytest.approx(0.75)  # never ahead of level 0


def test_a_known_job_past_its_estimate_is_near_its_end() -> None:
    """Its last report erred a little: it is expected to need 5 % of its run more (at
    least a minute), not the median of longer jobs, which stopped it just before the end."""
    scheduler = _running_reporter(1_000)
    plan = scheduler.policy.training  # type: ignore[attr-defined]
    a = scheduler.jobs["a"]
    estimate = plan.leveled.estimate(a)
    assert estimate == pytest.approx(3_400, rel=0.01)
    past = estimate + 10
    plan.leveled.refresh(a, past)
    assert plan.leveled.estimate(a) == pytest.approx(past + 0.05 * past)


def test_a_short_known_job_keeps_its_place_in_level_0() -> None:
    """A job still in level 0 that says it ends in 300 s is not stopped for a newcomer
    when its rate becomes trusted: it keeps level 0, where what it has left is least.
    Moving it out at once put it behind every newcomer, so reporting made it slower."""
    scheduler = Scheduler(Cluster.homogeneous(1, 1), make_policy("ilucid"))
    scheduler.submit(JobSpec("s", 0, 1, 900, estimate=3_600), 0)
    scheduler.schedule(0)
    for t in range(60, 660, 60):  # 1 step a second: trusted by 600 s
        scheduler.progress("s", float(t), float(t), 900)
    plan = scheduler.policy.training  # type: ignore[attr-defined]
    assert scheduler.jobs["s"].seq in plan.leveled.known
    scheduler.submit(JobSpec("new", 600, 1, 5_000, estimate=3_600), 600)
    assert not [d for d in scheduler.schedule(600) if d.action.value == "preempt"]
    assert plan.leveled.describe(scheduler.jobs["s"], 600).startswith("level 0 of 3")


def test_without_reports_no_job_is_known() -> None:
    """``--progress-share 0`` reproduces the replays before progress: nothing changes
    a job's place unless its rate is trusted."""
    scheduler = Scheduler(Cluster.homogeneous(1, 1), make_policy("ilucid"))
    scheduler.submit(JobSpec("a", 0, 1, 10_000, estimate=3_600), 0)
    scheduler.schedule(0)
    scheduler.progress("a", 60.0, 60.0, 10_000)  # one report: no rate yet
    plan = scheduler.policy.training  # type: ignore[attr-defined]
    assert not plan.leveled.known
    assert plan.leveled.level(scheduler.jobs["a"], 60.0) == 0
