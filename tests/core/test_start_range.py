"""Expected starts as calibrated ranges (issue 37): walk-forward quantiles of the
projection's past misses, each tail's level adapted so one start in ten falls
below the range and one in ten above, and the words a person reads."""

from __future__ import annotations

import math
import random

import pytest

from ilucid.core import Cluster, JobSpec, Scheduler
from ilucid.core.policies import make_policy
from ilucid.core.start_range import (
    MIN_OUTCOMES,
    PAD_S,
    StartRanges,
    range_words,
    span_words,
)


def _outcome(ranges: StartRanges, job: str, now: float, projected: float, actual: float) -> None:
    ranges.range_for(job, projected, now)
    ranges.started(job, actual)


def test_before_any_outcome_the_range_is_a_threefold_margin() -> None:
    answer = StartRanges().range_for("a", 1000.0 + 1200.0, 1000.0)
    # ratios 1/3, 1 and 3 of (wait + pad): the median is the projection itself
    assert answer.median == answer.projected == 2200.0
    assert answer.low == pytest.approx(1000.0)  # (1200 + 600) / 3 - 600 = 0 s from now
    assert answer.high == pytest.approx(1000.0 + 3 * (1200 + PAD_S) - PAD_S)
    assert answer.basis.startswith("no past predictions yet")


def test_the_median_learns_a_steady_miss_from_outcomes_only() -> None:
    ranges = StartRanges()
    for index in range(MIN_OUTCOMES):  # every wait came out twice as long, padded
        _outcome(ranges, f"j{index}", 0.0, 1800.0, 2 * (1800.0 + PAD_S) - PAD_S)
    answer = ranges.range_for("new", 5000.0 + 1800.0, 5000.0)
    assert answer.median == pytest.approx(5000.0 + 2 * (1800.0 + PAD_S) - PAD_S)
    assert answer.basis == f"{MIN_OUTCOMES} past predictions of a similar wait"
    # a projection nobody has started yet teaches nothing: the same answer again
    ranges.range_for("pending", 9000.0, 0.0)
    assert ranges.range_for("new", 6800.0, 5000.0).median == pytest.approx(answer.median)
    # a cancelled job's projection never becomes an outcome
    ranges.forget("pending")
    ranges.started("pending", 1.0)
    assert ranges.outcomes == MIN_OUTCOMES


def test_only_the_first_range_of_a_job_is_graded() -> None:
    ranges = StartRanges()
    ranges.range_for("a", 600.0, 0.0)
    ranges.range_for("a", 60_000.0, 500.0)  # asked again later: not what is graded
    ranges.started("a", 600.0)
    assert ranges.outcomes == 1
    # its first range, [0, 3000] s, held the start at 600: both ends move in (narrower)
    assert ranges.low_level > 0.1 and ranges.high_level < 0.9


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_coverage_settles_near_80_percent_when_the_queue_shifts(seed: int) -> None:
    """Lognormal misses whose spread and bias change halfway (a burst): the adapted
    levels keep the share of starts inside the range near 80%, each tail near 10%."""
    rng = random.Random(seed)
    ranges = StartRanges()
    held = below = above = 0
    count = 3000
    for index in range(count):
        now = index * 100.0
        wait = rng.choice([0.0, 300.0, 2000.0, 20_000.0])
        bias, spread = (0.0, 0.5) if index < count // 2 else (0.8, 1.2)
        actual = math.exp(bias + rng.gauss(0.0, spread)) * (wait + PAD_S) - PAD_S
        answer = ranges.range_for(f"j{index}", now + wait, now)
        start = now + max(0.0, actual)
        ranges.started(f"j{index}", start)
        if index >= 300:  # after the first outcomes
            held += answer.low <= start <= answer.high
            below += start < answer.low
            above += start > answer.high
    graded = count - 300
    assert 0.75 <= held / graded <= 0.85
    assert below / graded <= 0.13 and above / graded <= 0.13


def test_words() -> None:
    assert range_words(540.0, 240.0, 1500.0, 0.0) == "in 9 min (likely 4-25 min)"
    assert range_words(60.0, 0.0, 600.0, 0.0) == "in 60 s (likely within 10 min)"
    assert range_words(3000.0, 600.0, 20_000.0, 0.0) == "in 50 min (likely 10 min to 5.6 h)"
    assert range_words(0.2, 0.0, 0.5, 0.0) == "at the next pass"
    assert [span_words(s) for s in (45, 5399, 7200, 200_000)] == [
        "45 s",
        "90 min",
        "2.0 h",
        "2.3 d",
    ]


def test_the_scheduler_grades_its_ranges_at_each_start_and_says_what_they_assume() -> None:
    scheduler = Scheduler(Cluster.homogeneous(1, 4), make_policy("fifo"))
    scheduler.submit(JobSpec("r1", 0, 2, 10_000, estimate=300), 0)
    scheduler.submit(JobSpec("r2", 0, 2, 10_000, estimate=900), 0)
    scheduler.schedule(0)
    scheduler.submit(JobSpec("w1", 10, 2, 100, estimate=100), 10)
    scheduler.submit(JobSpec("w2", 10, 2, 100, estimate=100), 10)
    scheduler.schedule(10)
    outlook = scheduler.start_range("w2", 10)
    assert outlook is not None and outlook.projected == 400.0  # behind w1, after r1 ends
    said = scheduler.start_assumptions("w2", outlook, 10)
    assert said.startswith(range_words(outlook.median, outlook.low, outlook.high, 10))
    assert ", if the running job it waits for ends when estimated (r1 in 5 min)" in said
    assert " and the job ahead of it runs as estimated; an inference burst" in said
    assert said.endswith("(range from no past predictions yet: a 3x margin either way)")
    # r1 ends at 300: w1 starts (never asked, so nothing graded); then w2 at r2's end
    scheduler.finish("r1", 300)
    scheduler.schedule(300)
    assert scheduler.start_ranges.outcomes == 0
    scheduler.finish("r2", 900)
    scheduler.schedule(900)
    assert scheduler.jobs["w2"].first_start == 900
    assert scheduler.start_ranges.outcomes == 1
    assert outlook.low <= 900 <= outlook.high  # within its range: the levels move in
    assert scheduler.start_ranges.high_level < 0.9
