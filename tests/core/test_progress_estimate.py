"""A job's own progress becomes its estimate (core/progress_book.py, Scheduler.progress)."""

from __future__ import annotations

import pytest

from ilucid.core import Cluster, JobSpec, Scheduler
from ilucid.core.policies import make_policy
from ilucid.core.progress_book import TRUSTED_AFTER_S, ProgressBook


def test_the_rate_is_measured_between_reports_and_trusted_after_its_span() -> None:
    book = ProgressBook()
    book.report("a", 0, 50_000, 0.0, "a100")
    assert book.estimate("a", 9_999.0) is None  # one report: no rate yet
    book.report("a", 1_430, 50_000, 100.0, "a100")
    young = book.estimate("a", 9_999.0)
    assert young is not None and young.rate == pytest.approx(14.3)
    assert young.weight == pytest.approx(100.0 / TRUSTED_AFTER_S)
    book.report("a", 4_290, 50_000, 300.0, "a100")
    trusted = book.estimate("a", 9_999.0)
    assert trusted is not None and trusted.weight == 1.0
    assert trusted.left_s == pytest.approx((50_000 - 4_290) / 14.3)
    assert trusted.words().endswith("on a100 (from the job's own progress)")
    assert "steps to go at 14.3 steps/s" in trusted.words()


def test_lost_work_starts_a_new_span_and_a_new_type_its_own_rate() -> None:
    book = ProgressBook()
    book.report("a", 0, 1_000, 0.0, "v100")
    book.report("a", 100, 1_000, 100.0, "v100")  # 1 step/s
    book.report("a", 50, 1_000, 150.0, "v100")  # preempted: back to its checkpoint
    seen = book.report("a", 250, 1_000, 250.0, "v100")  # 2 steps/s since
    assert seen.rates["v100"] == pytest.approx(2.0)
    book.report("a", 250, 1_000, 250.0, "k80")
    seen = book.report("a", 300, 1_000, 350.0, "k80")
    assert seen.rates == pytest.approx({"v100": 2.0, "k80": 0.5})


@pytest.mark.parametrize("step,total", [(-1, 10), (11, 10), (1, 0), (1, float("inf"))])
def test_a_report_no_job_can_make_is_refused(step: float, total: float) -> None:
    with pytest.raises(ValueError, match="progress step"):
        ProgressBook().report("a", step, total, 1.0, "a100")


def test_the_default_profile_orders_by_the_progress_estimate() -> None:
    """Two running jobs: the model says a is short and b long; their progress says the
    opposite, and the re-plan keys follow the progress."""
    scheduler = Scheduler(Cluster.homogeneous(1, 2), make_policy("ilucid"))
    scheduler.submit(JobSpec("a", 0, 1, 50_000, estimate=1_000), 0)
    scheduler.submit(JobSpec("b", 0, 1, 2_000, estimate=90_000), 0)
    scheduler.schedule(0)
    plan = scheduler.policy.training  # type: ignore[attr-defined]
    for t in range(0, 1_000, 100):
        scheduler.progress("a", 400.0 + t, t, 50_000)  # 1 step/s: 49,000 s left
        scheduler.progress("b", 400.0 + t, t, 2_000)  # 1,000 s left
    a, b = scheduler.jobs["a"], scheduler.jobs["b"]
    assert plan.leveled.estimate(a) > plan.leveled.estimate(b)
    assert plan._entry[a.seq][1] > plan._entry[b.seq][1]  # a's key: more GPU-seconds left
    words = scheduler.progress_words("b")
    assert words is not None and words.startswith("1,100 s left: 1,100 of 2,000 steps")


def test_a_report_for_a_job_not_running_is_ignored() -> None:
    scheduler = Scheduler(Cluster.homogeneous(1, 1), make_policy("ilucid"))
    scheduler.submit(JobSpec("a", 0, 1, 100), 0)
    scheduler.progress("a", 1.0, 5, 10)  # pending: nothing to measure
    assert scheduler.progress_words("a") is None
    scheduler.progress("nobody", 1.0, 5, 10)


def test_a_job_that_reports_often_keeps_one_crossing() -> None:
    """Each report re-keys the job; its level crossing stays one entry (a Philly replay
    with reporting jobs once spent minutes sweeping thousands of duplicates)."""
    scheduler = Scheduler(Cluster.homogeneous(1, 1), make_policy("ilucid"))
    scheduler.submit(JobSpec("a", 0, 1, 100_000, estimate=50_000), 0)
    scheduler.schedule(0)
    plan = scheduler.policy.training  # type: ignore[attr-defined]
    before = len(plan._crossings)
    for t in range(1, 2_000):
        scheduler.progress("a", float(t), t, 100_000)
    assert len(plan._crossings) <= before + 2
