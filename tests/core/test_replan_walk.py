"""The re-planning walk's shortcuts against the plain computations they replace.

The walk merges the per-GPU-count pending buckets with a heap instead of
bisecting every bucket for each candidate, and an outlived estimate takes the
median of the longer run times by index instead of copying them; both must
pick exactly what the plain computation picks.
"""

from __future__ import annotations

import bisect

from hypothesis import given, settings
from hypothesis import strategies as st

from ilucid.core import JobSpec
from ilucid.core.jobs import JobState
from ilucid.core.model import Placement
from ilucid.core.policies.preemptive import ReplanningPolicy
from ilucid.core.policies.replan_orders import EstimateOrder, SrtfOrder
from ilucid.core.sorted_sums import Entry


def finished(seq: int, ran: float) -> JobState:
    job = JobState(JobSpec(f"f{seq}", 0.0, 1, ran), seq)
    job.attained = ran  # one GPU: attained GPU-seconds are its run time
    return job


def outliving(ran: float, estimate: float, seq: int = 1000) -> JobState:
    """A 1-GPU job running since t=0 that has run ``ran`` s of an ``estimate``."""
    job = JobState(JobSpec(f"x{seq}", 0.0, 1, 10 * ran + 10, estimate=estimate), seq)
    job.start(Placement(((0, 1),)), now=0.0)
    return job


def test_an_outlived_estimate_becomes_the_median_of_longer_run_times() -> None:
    order = EstimateOrder()
    for seq, ran in enumerate([10.0, 20.0, 30.0, 40.0, 50.0]):
        order.observe_finished(finished(seq, ran))
    cases = {
        # ran -> longer run times -> their median (the upper one of an even count)
        25.0: 40.0,  # 30, 40, 50
        15.0: 40.0,  # 20, 30, 40, 50
        45.0: 50.0,  # 50
        49.5: 50.5,  # 50, but at least 1 s more than it ran
        60.0: 120.0,  # none longer: twice what it ran
    }
    for seq, (ran, expected) in enumerate(cases.items(), start=1000):
        job = outliving(ran, estimate=5.0, seq=seq)
        order.refresh(job, now=ran)
        assert order.estimate(job) == expected, ran


@settings(max_examples=100, deadline=None)
@given(
    run_times=st.lists(st.integers(1, 40), max_size=30),
    ran=st.integers(1, 45),
)
def test_the_median_matches_a_copied_slice(run_times: list[int], ran: int) -> None:
    order = EstimateOrder()
    for seq, value in enumerate(run_times):
        order.observe_finished(finished(seq, float(value)))
    job = outliving(float(ran), estimate=0.5)
    order.refresh(job, now=float(ran))
    ordered = sorted(float(v) for v in run_times)
    longer = ordered[bisect.bisect_right(ordered, float(ran)) :]
    guess = longer[len(longer) // 2] if longer else 2.0 * ran
    assert order.estimate(job) == max(guess, ran + 1.0)


def scan(policy: ReplanningPolicy, after: Entry | None, quota: float) -> Entry | None:
    """The plain rule: the first pending entry after ``after`` that fits ``quota``."""
    best: Entry | None = None
    for gpus in policy._sizes:
        if gpus > quota:
            break
        bucket = policy._pending[gpus]
        index = 0 if after is None else bucket.bisect_right(after)
        if index < len(bucket) and (best is None or bucket.at(index) < best):
            best = bucket.at(index)
    return best


@settings(max_examples=150, deadline=None)
@given(
    pending=st.lists(st.tuples(st.integers(0, 20), st.sampled_from([1, 2, 4, 8, 16])), max_size=40),
    withdrawn=st.sets(st.integers(0, 39)),
    quotas=st.lists(st.integers(0, 40), min_size=1, max_size=40),
)
def test_the_merged_buckets_give_the_scans_candidates(
    pending: list[tuple[int, int]], withdrawn: set[int], quotas: list[int]
) -> None:
    policy = ReplanningPolicy("srtf", SrtfOrder())
    jobs = [JobState(JobSpec(f"j{i}", 0.0, g, float(r)), i) for i, (r, g) in enumerate(pending)]
    for job in jobs:
        policy.on_submitted(job, 0.0)
    for job in jobs:
        if job.seq in withdrawn:  # leaves empty buckets behind, as the live walk sees them
            policy.on_withdrawn(job, 0.0)
    # candidate after candidate, as a walk asks for them
    quota = float(max(quotas))
    heads = policy._candidate_heads(quota)
    last: Entry | None = None
    for step in sorted(quotas, reverse=True):
        quota = float(step)
        got = policy._next_candidate(heads, quota)
        assert got == scan(policy, last, quota)
        if got is None:
            break
        last = got
