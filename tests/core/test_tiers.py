"""Hand-computed cases for inference tiers, the training reserve, quotas and expected starts.

Notation as in test_policies_hand.py; restore overhead is 40 s (<= 8 GPUs).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ilucid.core import Cluster, JobClass, JobSpec, Scheduler, SchedulerConfig
from ilucid.core.expected_start import FreeProfile, project_starts
from ilucid.core.policies import make_policy
from ilucid.core.policies.tiered import TierConfig, TieredPolicy
from ilucid.core.quota import TenantQuota
from ilucid.sim.engine import simulate

INFERENCE = JobClass.INFERENCE


def training(job_id: str, submit: float, gpus: int, duration: float, **kw: object) -> JobSpec:
    return JobSpec(job_id, submit, gpus, duration, estimate=duration, **kw)  # type: ignore[arg-type]


def serving(job_id: str, submit: float, gpus: int, duration: float) -> JobSpec:
    return JobSpec(job_id, submit, gpus, duration, job_class=INFERENCE, tenant="serving")


def test_inference_preempts_the_job_that_loses_least_work() -> None:
    # 2 nodes x 2 GPUs. a(0, 2g, 1000 s, checkpoints every 100 s) on node0,
    # b(0, 2g, 1000 s, checkpoints every 1000 s) on node1. i(250, 1g, 100 s) finds
    # no free GPU. Stopping a loses 250 % 100 = 50 s -> cost 2 x (50 + 40) = 180 GPU-s;
    # stopping b loses 250 s -> 580. So a is preempted; i runs 250..350 on its node.
    # a restarts at 350 (needs both GPUs of a node) with 1000 - 250 + 50 + 40 = 840 s
    # left -> ends 1190.
    jobs = [
        training("a", 0, 2, 1000, checkpoint_s=100),
        training("b", 0, 2, 1000, checkpoint_s=1000),
        serving("i", 250, 1, 100),
    ]
    decisions: list[str] = []
    result = simulate(
        jobs,
        Cluster.homogeneous(2, 2),
        make_policy("tiered"),
        observer=lambda t, event, job_id, p: decisions.append(f"{t:g} {event} {job_id}"),
        explain="a",
    )
    ends = {r.id: (r.first_start, r.end, r.preemptions, r.lost_work_s) for r in result.records}
    assert ends["i"] == (250, 350, 0, 0.0)
    assert ends["a"] == (0, 1190, 1, 50.0)
    assert ends["b"] == (0, 1000, 0, 0.0)
    story = " | ".join(text for _, text in result.story)
    assert "preempted by inference job i to start it now" in story
    assert "lost 50 s of work" in story
    assert "20% reserve for training kept" in story


def test_inference_takes_a_free_gpu_elsewhere_before_preempting_next_to_services() -> None:
    # 2 nodes x 2 GPUs. s(0, 1g, service) starts node0's serving pool. a(1, 2g, 100 s)
    # takes main node1; t(2, 1g) finds main full and falls back to node0, next to s.
    # a ends at 101: node1 is free. j(150, 1g, service): node0 (serving) is full, with
    # training t there; node1 has free GPUs. j starts on node1 at once and t is not
    # preempted: no training work is lost while a GPU is free anywhere.
    jobs = [
        serving("s", 0, 1, 1000),
        training("a", 1, 2, 100),
        training("t", 2, 1, 1000),
        serving("j", 150, 1, 100),
    ]
    result = simulate(jobs, Cluster.homogeneous(2, 2), make_policy("tiered"))
    runs = {r.id: (r.first_start, r.end, r.preemptions) for r in result.records}
    assert runs["j"] == (150, 250, 0)
    assert runs["t"] == (2, 1002, 0)
    assert runs["a"] == (1, 101, 0)


def _spared_runs(
    limit: int | None, job_class: JobClass = JobClass.TRAINING
) -> tuple[dict[str, tuple[float, float, int]], str]:
    # 1 node x 2 GPUs. a(0, 2g, 1000 s, checkpoints every 100 s) runs. i1(250, 1g,
    # 100 s) preempts it (a loses 50 s); i1 runs 250..350. a restarts at 350 with
    # 1000 - 250 + 50 + 40 = 840 s left -> ends 1190 if left alone. i2(400, 1g, 100 s)
    # finds no free GPU: with a limit of 1 preemption, a is spared and i2 waits for
    # it (1190..1290); with a limit of 2, or none, a is preempted a second time at 400.
    jobs = [
        training("a", 0, 2, 1000, checkpoint_s=100, job_class=job_class),
        serving("i1", 250, 1, 100),
        serving("i2", 400, 1, 100),
    ]
    policy = TieredPolicy(TierConfig(preemption_limit=limit))
    result = simulate(jobs, Cluster.homogeneous(1, 2), policy, explain="i2")
    runs = {r.id: (r.first_start, r.end, r.preemptions) for r in result.records}
    return runs, " | ".join(result.waits)


def test_a_job_preempted_up_to_the_limit_is_spared_and_inference_waits_for_it() -> None:
    runs, waits = _spared_runs(limit=1)
    assert runs["a"] == (0, 1190, 1)
    assert runs["i2"] == (1190, 1290, 0)
    assert "(1 training job(s) spared: preempted 1 time(s) already)" in waits
    for limit in (2, None):
        again, waits = _spared_runs(limit)
        assert again["i2"][0] == 400 and again["a"][2] == 2
        assert "spared" not in waits


def test_the_preemption_limit_spares_training_not_best_effort() -> None:
    runs, _ = _spared_runs(limit=1, job_class=JobClass.BEST_EFFORT)
    assert runs["i2"][0] == 400 and runs["a"][2] == 2


def test_a_guarantee_reclaim_ignores_the_preemption_limit() -> None:
    # 1 node x 2 GPUs; with a limit of 0 inference may preempt no training job, but
    # tenant A's guarantee still takes its GPU back: b (tenant B, 2 GPUs) borrows
    # both from 0; a (A, 1 GPU, guaranteed 1) at 10 preempts b and starts at once.
    quotas = {"A": TenantQuota(guaranteed=1)}
    policy = TieredPolicy(TierConfig(quotas=quotas, preemption_limit=0))
    jobs = [training("b", 0, 2, 1000, tenant="B"), training("a", 10, 1, 100, tenant="A")]
    runs = {r.id: r for r in simulate(jobs, Cluster.homogeneous(1, 2), policy).records}
    assert runs["a"].first_start == 10
    assert runs["b"].preemptions == 1


def test_a_negative_preemption_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="preemption_limit must be >= 0"):
        TierConfig(preemption_limit=-1)


def test_inference_never_takes_the_training_reserve() -> None:
    # 1 node x 10 GPUs, reserve 20%: inference may hold at most 8 GPUs.
    # t(0, 10g) runs; i1(10, 6g, 100 s) preempts it (6 <= 8). i2(20, 4g, 50 s) would
    # make 10 > 8: it waits ("TrainingReserve") until i1 ends at 110, then runs to 160.
    # t restarts only when 10 GPUs are free: at 160, with 1000 - 10 + 60 = 1050 s left
    # (restoring more than 8 GPUs costs 60 s).
    jobs = [
        training("t", 0, 10, 1000),
        serving("i1", 10, 6, 100),
        serving("i2", 20, 4, 50),
    ]
    cluster = Cluster((Cluster.homogeneous(1, 10).nodes[0],))
    result = simulate(jobs, cluster, make_policy("tiered"))
    rec = {r.id: r for r in result.records}
    assert (rec["i1"].first_start, rec["i2"].first_start) == (10, 110)
    assert rec["i2"].wait_reason == "TrainingReserve"
    assert (rec["t"].end, rec["t"].preemptions) == (160 + 1050, 1)


def test_reserve_explained_in_why_pending() -> None:
    policy = TieredPolicy(TierConfig(reserve_training=0.5))
    scheduler = Scheduler(Cluster.homogeneous(1, 4), policy)
    scheduler.submit(serving("i1", 0, 2, 100), 0)
    scheduler.submit(serving("i2", 0, 1, 100), 0)
    scheduler.schedule(0)
    assert scheduler.jobs["i1"].status.value == "running"
    sentence = scheduler.why_pending("i2", 0)
    assert "inference holds 2/4 GPUs" in sentence and "50% reserve" in sentence


def test_guaranteed_quota_is_reclaimed_in_one_pass() -> None:
    # 2 x 4 GPUs; tenants a and b are each guaranteed 4. b fills all 8 GPUs at t=0
    # (borrowing 4). a submits two 1-GPU jobs at t=10: the same pass preempts two
    # of b's jobs and starts a's.
    quotas = {"a": TenantQuota(4), "b": TenantQuota(4)}
    policy = TieredPolicy(TierConfig(quotas=quotas))
    scheduler = Scheduler(Cluster.homogeneous(2, 4), policy)
    for k in range(8):
        scheduler.submit(training(f"b{k}", 0, 1, 1000, tenant="b"), 0)
    scheduler.schedule(0)
    assert policy.quotas.used == {"b": 8}
    scheduler.submit(training("a0", 10, 1, 100, tenant="a"), 10)
    scheduler.submit(training("a1", 10, 1, 100, tenant="a"), 10)
    decisions = scheduler.schedule(10)
    assert policy.quotas.used == {"a": 2, "b": 6}
    preempted = [d for d in decisions if d.action.value == "preempt"]
    assert len(preempted) == 2
    assert "tenant a uses 0/4 guaranteed GPUs" in preempted[0].explain()


def test_borrowing_limit_and_its_sentence() -> None:
    quotas = {"vision": TenantQuota(guaranteed=2, borrow_limit=0)}
    policy = TieredPolicy(TierConfig(quotas=quotas))
    scheduler = Scheduler(Cluster.homogeneous(1, 8), policy)
    for k in range(4):
        scheduler.submit(training(f"v{k}", 0, 1, 100, tenant="vision"), 0)
    scheduler.schedule(0)
    assert policy.quotas.used == {"vision": 2}
    assert scheduler.wait_code("v2") == "QuotaExceeded"
    assert "tenant vision uses 2/2 guaranteed GPUs and may borrow 0 more" in (
        scheduler.why_pending("v2", 0)
    )


def test_weighted_fair_share_splits_idle_gpus() -> None:
    # 6 GPUs, both tenants ask for 6 one-GPU jobs at once; weight 2 : 1 -> 4 : 2.
    quotas = {"a": TenantQuota(weight=2.0), "b": TenantQuota(weight=1.0)}
    policy = TieredPolicy(TierConfig(quotas=quotas))
    scheduler = Scheduler(Cluster.homogeneous(1, 6), policy)
    for k in range(6):
        scheduler.submit(training(f"a{k}", 0, 1, 100, tenant="a"), 0)
        scheduler.submit(training(f"b{k}", 0, 1, 100, tenant="b"), 0)
    scheduler.schedule(0)
    assert policy.quotas.used == {"a": 4, "b": 2}


def test_a_starving_job_gets_nodes_drained_and_backfilled_with_short_jobs() -> None:
    # 2 nodes x 4 GPUs, starvation after 100 s. Keys (estimated GPU-s): a, b 3,000 <
    # big 4,000. a(0, 3g, 1000) -> node0 (best fit, lowest index); b(0, 3g, 1000) ->
    # node1; big(0, 4g, 1000) waits. At the first pass after t=100 (x0's arrival),
    # node0 (1 free GPU, tie broken by index) is drained for big; it is expected to
    # empty when a's estimate runs out, at 1000.
    # x0 (1g, 50 s) at 200 takes node1's free GPU. x1 (1g, 50 s) at 201 finds no other
    # free GPU; it would end by 251 <= 1000, so it is backfilled on node0's idle GPU.
    # x2 (1g, 50 s) at 202 waits: node0's GPU is taken. long (1g, 2,000 s) at 203
    # would end after 1000, so it is never backfilled, even when node0's GPU frees
    # at 251. x0 ends at 250: x2 (key 50 < 2,000) starts on node1; x2 ends at 300:
    # long starts on node1. a ends at 1000: big starts on node0 on time.
    policy = TieredPolicy(TierConfig(starve_after_s=100.0))
    jobs = [training("a", 0, 3, 1000), training("b", 0, 3, 1000), training("big", 0, 4, 1000)]
    jobs += [training(f"x{k}", 200 + k, 1, 50) for k in range(3)]
    jobs.append(training("long", 203, 1, 2000))
    nodes: dict[str, tuple[int, ...]] = {}

    def observe(t: float, event: str, job_id: str, placement: object) -> None:
        if event == "start" and placement is not None:
            nodes[job_id] = placement.node_indices  # type: ignore[attr-defined]

    result = simulate(jobs, Cluster.homogeneous(2, 4), policy, observer=observe, explain="big")
    rec = {r.id: r for r in result.records}
    starts = {j: (rec[j].first_start, nodes[j]) for j in ("x0", "x1", "x2", "long", "big")}
    assert starts == {
        "x0": (200, (1,)),
        "x1": (201, (0,)),
        "x2": (250, (1,)),
        "long": (300, (1,)),
        "big": (1000, (0,)),
    }
    waits = " | ".join(result.waits)
    assert "node(s) node0 take no new training job until it fits there" in waits


def test_a_backfilled_job_says_whose_drained_nodes_it_uses() -> None:
    policy = TieredPolicy(TierConfig(starve_after_s=100.0))
    scheduler = Scheduler(Cluster.homogeneous(2, 4), policy)
    for job in (training("a", 0, 3, 1000), training("b", 0, 3, 1000)):
        scheduler.submit(job, 0)
    scheduler.submit(training("big", 0, 4, 1000), 0)
    scheduler.schedule(0)
    scheduler.submit(training("x0", 200, 1, 50), 200)
    scheduler.submit(training("x1", 200, 1, 50), 200)
    decisions = {d.job_id: d.explain() for d in scheduler.schedule(200)}
    assert decisions["x0"] == (
        "start x0: tiered: least estimated GPU-seconds (50) of the waiting jobs that fit"
    )
    assert decisions["x1"] == (
        "start x1: backfilled on nodes drained for job big: expected to end by t=1000,"
        " before they are expected to be empty"
    )


def test_static_partition_keeps_classes_apart() -> None:
    jobs = [training(f"t{k}", k, 4, 100) for k in range(4)]
    jobs += [serving(f"i{k}", k, 1, 100) for k in range(3)]
    placements: dict[str, set[int]] = {}

    def observe(t: float, event: str, job_id: str, placement: object) -> None:
        if event == "start" and placement is not None:
            placements[job_id] = set(placement.node_indices)  # type: ignore[attr-defined]

    simulate(jobs, Cluster.homogeneous(3, 4), make_policy("static-partition:1"), observer=observe)
    assert all(placements[f"i{k}"] == {2} for k in range(3))
    assert all(2 not in placements[f"t{k}"] for k in range(4))


def test_strict_fifo_makes_inference_wait_behind_training() -> None:
    jobs = [training("t", 0, 4, 1000), serving("i", 10, 1, 10)]
    result = simulate(jobs, Cluster.homogeneous(1, 4), make_policy("fifo"))
    assert {r.id: r.first_start for r in result.records}["i"] == 1000


def test_free_profile_backfills_a_short_job_into_a_gap() -> None:
    # 4 GPUs; a running 4-GPU job ends at 100. Pending in order: big (4g, 50 s) ->
    # 100..150; small (2g, 10 s) cannot use 0..100 (no free GPU) -> after big, 150.
    # With 2 GPUs free now, small fits at once instead.
    busy = FreeProfile.from_running(0.0, 4, [(100.0, 4)])
    assert project_starts(busy, [("big", 4, 50.0), ("small", 2, 10.0)]) == {
        "big": 100.0,
        "small": 150.0,
    }
    half = FreeProfile.from_running(0.0, 4, [(100.0, 2)])
    assert project_starts(half, [("big", 4, 50.0), ("small", 2, 10.0)]) == {
        "big": 100.0,
        "small": 0.0,
    }


def test_expected_starts_use_estimates_not_true_durations() -> None:
    # r runs (est 100 s, true 10,000 s); q waits behind it. At t=40 r is expected
    # to end at 100, so q is expected at 100; at t=150 r has outlived its
    # estimate and is expected to run as long again (150 s more): q at 300.
    scheduler = Scheduler(Cluster.homogeneous(1, 4), make_policy("tiered"))
    scheduler.submit(JobSpec("r", 0, 4, 10_000, estimate=100), 0)
    scheduler.schedule(0)
    scheduler.submit(JobSpec("q", 40, 4, 10, estimate=10), 40)
    scheduler.schedule(40)
    assert scheduler.expected_starts(40) == {"q": 100.0}
    assert scheduler.expected_starts(150) == {"q": 300.0}


def test_checkpoint_loss_is_charged_to_the_preempted_job() -> None:
    config = SchedulerConfig(checkpoint_s=300)
    jobs = [training("t", 0, 1, 1000), serving("i", 700, 1, 100)]
    # (a 1-GPU cluster: with any training reserve inference could never run)
    policy = TieredPolicy(TierConfig(reserve_training=0.0))
    result = simulate(jobs, Cluster.homogeneous(1, 1), policy, config)
    rec = {r.id: r for r in result.records}
    # stopped at 700: last checkpoint at 600 -> 100 s lost; resumes at 800 with
    # 1000 - 700 + 100 + 40 = 440 s left -> ends 1240
    assert (rec["t"].lost_work_s, rec["t"].end) == (100.0, 1240.0)


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 16),
    st.lists(st.tuples(st.integers(0, 500), st.integers(1, 4)), max_size=6),
    st.lists(st.tuples(st.integers(1, 16), st.integers(1, 300)), min_size=1, max_size=12),
)
def test_projected_starts_are_the_earliest_feasible_in_order(
    total: int, running: list[tuple[int, int]], pending: list[tuple[int, int]]
) -> None:
    # keep the running set within capacity
    ends, used = [], 0
    for end, gpus in running:
        if used + gpus <= total:
            ends.append((float(end), gpus))
            used += gpus
    requests = [(f"p{i}", min(g, total), float(d)) for i, (g, d) in enumerate(pending)]
    starts = project_starts(FreeProfile.from_running(0.0, total, ends), requests)

    # brute force: usage as a list of (start, end, gpus) intervals; each job takes the
    # earliest candidate time (0 or an interval end) at which it fits for its duration
    busy = [(0.0, end, gpus) for end, gpus in ends]

    def fits(at: float, gpus: int, duration: float) -> bool:
        points = {at} | {s for s, _, _ in busy if at < s < at + duration}
        return all(sum(g for s, e, g in busy if s <= t < e) + gpus <= total for t in points)

    for job_id, gpus, duration in requests:
        candidates = sorted({0.0} | {e for _, e, _ in busy})
        expected = next(t for t in candidates if fits(t, gpus, duration))
        assert starts[job_id] == expected
        busy.append((expected, expected + duration, gpus))


def test_a_small_job_behind_many_large_ones_still_gets_the_idle_gpus() -> None:
    # 1 node x 8 GPUs, scan_depth 2. r(0, 6g, 1000) runs; 2 GPUs stay free. Five 4-GPU
    # jobs (100 s, keys 400) sort before s(2g, 1000 s, key 2,000), and none fits. Only
    # the 4-GPU bucket's head is tried, so s starts at once instead of waiting behind
    # more large jobs than a pass looks at.
    policy = TieredPolicy(TierConfig(scan_depth=2))
    scheduler = Scheduler(Cluster.homogeneous(1, 8), policy)
    scheduler.submit(training("r", 0, 6, 1000), 0)
    scheduler.schedule(0)
    for k in range(5):
        scheduler.submit(training(f"b{k}", 1, 4, 100), 1)
    scheduler.submit(training("s", 1, 2, 1000), 1)
    started = [d.job_id for d in scheduler.schedule(1) if d.action.value == "start"]
    assert started == ["s"]
    positions = [policy.queue_position(scheduler.jobs[f"b{k}"], 1) for k in range(5)]
    assert positions == [1, 2, 3, 4, 5]
    assert policy.queue_position(scheduler.jobs["s"], 1) is None
