"""A stated run time: blended by its weight, and dropped by the order once outlived.

Hand-computed, as ``test_default_profile.py`` (restore overhead 40 s; a running
job's key is its estimated GPU-seconds left less 40 s x its GPUs). ``stated 1 @ 50%``
is a job whose user stated 1 s, counted 50% against the model's ``estimate``.
"""

from __future__ import annotations

import math

import pytest

from ilucid.core import Cluster, JobSpec, JobState, Placement
from ilucid.core.policies.default import DefaultConfig, DefaultPolicy
from ilucid.core.policies.leveled_order import LeveledEstimateOrder
from ilucid.core.policies.preemptive import estimate_srtf
from ilucid.core.policies.replan_orders import EstimateOrder
from ilucid.core.stated_estimate import blend, claim_ends, standing
from ilucid.sim.engine import simulate

EVERY_EVENT = DefaultConfig(replan_interval_s=0.0, profile_limit_s=None)


def outcome(result: object) -> dict[str, tuple[float, float, int]]:
    records = result.records  # type: ignore[attr-defined]
    return {r.id: (r.end - r.submit, r.first_start, r.preemptions) for r in records}


def test_the_blend_is_geometric_and_bounded_by_one_second() -> None:
    assert blend(1, 3600, 0.5) == pytest.approx(60.0)
    assert blend(600, 3600, 0.5) == pytest.approx(math.sqrt(600 * 3600))
    assert blend(10, 1000, 0.0) == 1000 and blend(10, 1000, 1.0) == 10
    assert blend(10, 0.0, 0.5) == pytest.approx(math.sqrt(10))  # a 0 s model reads as 1 s
    # the claim ends at the statement when it is the shorter, else at the blend
    assert claim_ends(1, 3600, 0.5) == 1
    assert claim_ends(400, 100, 0.5) == pytest.approx(200.0)
    # then the longer one stands while not outlived
    assert standing(1, 3600, 1.0) == 3600
    assert standing(400, 100, 200.0) == 400
    assert standing(400, 100, 400.0) is None


def test_a_spec_blends_its_statement_and_refuses_nonsense() -> None:
    spec = JobSpec("a", 0, 4, 90, estimate=None, stated_estimate=1, stated_weight=0.5)
    assert spec.model_duration == 3600  # no model estimate: the default stands in
    assert spec.expected_duration == pytest.approx(60.0)
    assert spec.claim_ends() == 1
    assert JobSpec("b", 0, 1, 9, estimate=50).claim_ends() is None
    with pytest.raises(ValueError, match="stated_estimate must be > 0"):
        JobSpec("c", 0, 1, 9, stated_estimate=0.0)
    with pytest.raises(ValueError, match=r"stated_weight must be in \[0, 1\]"):
        JobSpec("d", 0, 1, 9, stated_estimate=5, stated_weight=1.5)


def test_default_profile_a_one_second_statement_preempts_once_then_yields() -> None:
    # 1 node x 4 GPUs. b0-b3(t=0, 1g, 600s, model 3600, stated 600 @ 50%): each ranks by
    # sqrt(600 x 3600) = 1,470 s. a(t=10, 4g, 90s, model 3600, stated 1 @ 50%) ranks by
    # sqrt(1 x 3600) = 60 s: 240 GPU-s < the b's 1,470 - 40, so at 10 all four b are
    # preempted (590 + 40 s left each). a's claim ends 1 s into its run: at 11 it ranks by
    # the model's 3,600 s, (3600 - 1) x 4 - 160 GPU-s, behind the b's 1,460: it is
    # preempted (89 + 40 s left) and they run 11-641. At 601 the b's outlive their own
    # claim (600 s): they rank by 3,600 s then, 3,000 - 40 left, still ahead of a's
    # 14,396. a runs 641-770.
    jobs = [
        JobSpec(f"b{i}", 0, 1, 600, estimate=3600, stated_estimate=600, stated_weight=0.5)
        for i in range(4)
    ]
    jobs.append(JobSpec("a", 10, 4, 90, estimate=3600, stated_estimate=1, stated_weight=0.5))
    result = outcome(simulate(jobs, Cluster.homogeneous(1, 4), DefaultPolicy(EVERY_EVENT)))
    assert result["a"] == pytest.approx((760, 10, 1))
    for i in range(4):
        assert result[f"b{i}"] == pytest.approx((641, 0, 1))


def test_default_profile_a_model_estimate_keeps_its_growth_rule() -> None:
    # the same jobs with estimates that are the model's (nothing stated), as a replay
    # gives them: a's 1 s estimate, once outlived, becomes twice its run time (no job
    # has finished), so it stays ahead of the b's 600 s until it ends at 100; the b's
    # run 100-730 (590 + 40 s left)
    jobs = [JobSpec(f"b{i}", 0, 1, 600, estimate=600) for i in range(4)]
    jobs.append(JobSpec("a", 10, 4, 90, estimate=1))
    result = outcome(simulate(jobs, Cluster.homogeneous(1, 4), DefaultPolicy(EVERY_EVENT)))
    assert result["a"] == (90, 10, 0)
    assert all(result[f"b{i}"] == (730, 0, 1) for i in range(4))


def test_estimate_srtf_drops_a_trusted_statement_once_outlived() -> None:
    # 1 GPU. x(t=0, 300s, model 300) runs: key 0 + 300 - 40 = 260. y(t=10, 100s, model 500,
    # stated 1 @ 100%) ranks by 1 s: 10 + 1 < 260, x is preempted (290 + 40 left). At 11
    # y has outlived its claim: it ranks by 500 s, 10 + 499 - 40 = 469 > x's 11 + 330:
    # y is preempted (99 + 40 left), x runs 11-341, y 341-480.
    jobs = [
        JobSpec("x", 0, 1, 300, estimate=300),
        JobSpec("y", 10, 1, 100, estimate=500, stated_estimate=1, stated_weight=1.0),
    ]
    result = outcome(simulate(jobs, Cluster.homogeneous(1, 1), estimate_srtf(aging=0.0)))
    assert result["x"] == pytest.approx((341, 0, 1))
    assert result["y"] == pytest.approx((470, 10, 1))


def _running(spec: JobSpec, since: float = 0.0) -> JobState:
    job = JobState(spec, seq=1)
    job.start(Placement(((0, max(1, spec.num_gpus)),)), since)
    return job


def test_a_statement_longer_than_the_model_stands_until_outlived() -> None:
    # stated 400 @ 50% against a model's 100: ranked by 200 s until 200 s of run (the
    # model, the shorter, is outlived by then), then by the statement until 400 s,
    # then by the order's growth rule (twice the run, no job having finished)
    order = EstimateOrder()
    job = _running(JobSpec("s", 0, 1, 1000, estimate=100, stated_estimate=400, stated_weight=0.5))
    assert order.estimate(job) == pytest.approx(200.0)
    assert order.next_rekey(job, 0.0) == pytest.approx(200.0)
    order.refresh(job, 199.5)  # not yet: nothing changes
    assert order.estimate(job) == pytest.approx(200.0) and not order.overran
    order.refresh(job, 200.5)  # (the policy re-keys just after the crossing)
    assert order.estimate(job) == 400 and order.overran[1] == pytest.approx(200.0)
    job.stop(200.5, 0.0)
    job.start(Placement(((0, 1),)), 200.5)
    assert order.next_rekey(job, 200.5) == pytest.approx(400.0)
    order.refresh(job, 400.5)
    assert order.estimate(job) == pytest.approx(801.0)


def test_a_job_preempted_past_its_claim_is_settled_when_it_queues() -> None:
    # preempted (by inference, say) after 5 s of a 1 s claim, before its re-key came:
    # its pending key is that of the model's 3,600 s, not of a claim it has outlived
    order = LeveledEstimateOrder((1800.0,))
    job = _running(JobSpec("a", 0, 4, 90, estimate=3600, stated_estimate=1, stated_weight=0.5))
    job.stop(5.0, 0.0)
    level, left, _, _ = order.pending_entry(job)
    assert (level, left) == (0, pytest.approx((3600 - 5) * 4))
    assert order.overran[1] == 1


def test_profiling_may_raise_a_stated_estimate_but_not_lower_it() -> None:
    # the live profiler refines the user's own statement: taken as is, it would bypass
    # its weight; a raise (past jobs that outlived the profile ran longer) is kept
    order = LeveledEstimateOrder((1800.0,))
    job = JobState(JobSpec("a", 0, 1, 90, estimate=3600, stated_estimate=1, stated_weight=0.5), 1)
    order.set_estimate(job, 1.0)
    assert order.estimate(job) == pytest.approx(60.0)
    order.set_estimate(job, 900.0)
    assert order.estimate(job) == 900.0
