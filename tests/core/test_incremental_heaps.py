"""The re-planning policies' heaps of due times: bounded by the live entries, and a
pass that finds thousands of crossings due takes them in bulk with the same result."""

from __future__ import annotations

import pytest

from ilucid.core import Cluster, JobSpec, Scheduler
from ilucid.core.policies import preemptive
from ilucid.core.policies.default import DefaultConfig, DefaultPolicy
from ilucid.core.policies.preemptive import tiresias

#: stale entries the heaps tolerate beyond twice the live ones (the policies' ``SLACK``)
SLACK = 1024


def test_stale_starvation_deadlines_do_not_pile_up() -> None:
    """A wide job waits (its deadline heads the heap) while thousands of small ones are
    submitted, start and end: each leaves a stale deadline behind the wide one's, and
    the heap keeps at most twice the live ones plus the slack."""
    config = DefaultConfig(profile_limit_s=None, replan_interval_s=0.0)
    policy = DefaultPolicy(config)
    scheduler = Scheduler(Cluster.homogeneous(2, 8), policy)
    plan = policy.training
    scheduler.submit(JobSpec("blocker", 0.0, 1, 1e7, estimate=1e6), 0.0)
    scheduler.submit(JobSpec("wide", 0.0, 16, 1e5, estimate=1e6), 0.0)
    now = 1.0
    for n in range(3 * SLACK):
        scheduler.submit(JobSpec(f"j{n}", now, 1, 30.0, estimate=30.0), now)
        for decision in scheduler.schedule(now):
            if decision.job_id.startswith("j"):
                scheduler.finish(decision.job_id, now + 1.0)
        now += 20.0
    assert now < config.starve_after_s and scheduler.jobs["wide"].status.value == "pending"
    assert len(plan._due) <= 2 * plan._pending_count + SLACK + 1


def _replay(monkeypatch: pytest.MonkeyPatch, bulk: int) -> list[tuple[str, str, float]]:
    """Jobs of many sizes on Tiresias with three thresholds, passes far apart: each pass
    finds many crossings due at once (some crossing again before it)."""
    monkeypatch.setattr(preemptive, "_BULK", bulk)
    scheduler = Scheduler(Cluster.homogeneous(8, 8), tiresias((100.0, 1000.0, 5000.0), 60.0))
    sizes = (1, 2, 4, 1, 8, 2, 1, 4)
    for n in range(200):
        gpus = sizes[n % len(sizes)]
        scheduler.submit(JobSpec(f"j{n}", float(n), gpus, 200.0 + 97.0 * (n % 41)), float(n))
    seen: list[tuple[str, str, float]] = []
    now = 240.0
    while scheduler.jobs and now < 200_000.0:
        for decision in scheduler.schedule(now):
            seen.append((decision.action.value, decision.job_id, now))
        for job in list(scheduler.jobs.values()):
            if job.status.value == "running" and job.remaining_at(now) <= 0:
                scheduler.finish(job.spec.id, now)
        now += 420.0
    return seen


def test_crossings_taken_in_bulk_decide_as_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    one_by_one = _replay(monkeypatch, 1_000_000)
    assert any(action == "preempt" for action, _, _ in one_by_one)  # crossings mattered
    assert _replay(monkeypatch, 2) == one_by_one
