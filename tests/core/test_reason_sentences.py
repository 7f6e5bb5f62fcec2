"""The exact sentences a user reads (issue 19): the binding constraint first, in plain words.

Each case sets the cluster up by hand (``adopt`` puts a job on exactly the GPUs
named), so the figures in every sentence can be counted from the test itself.
"""

from __future__ import annotations

import math

from ilucid.core import Cluster, JobClass, JobSpec, Node, Placement, Scheduler, make_policy
from ilucid.core.decision import ScorePart
from ilucid.core.free_gpus import UNAVAILABLE_POOL, FreeGpus
from ilucid.core.placement import ConsolidatingPlacer, explain_unplaceable
from ilucid.core.policies.default import DefaultConfig, DefaultPolicy
from ilucid.core.policies.draining import DRAINED_POOL_PREFIX
from ilucid.core.policies.inference_tier import INFERENCE_POOL, SERVING_POOL
from ilucid.core.policies.lucid import PROFILER_POOL, LucidConfig, LucidPolicy
from ilucid.core.policies.tiered import TierConfig, TieredPolicy
from ilucid.core.quota import TenantQuota
from ilucid.core.wait_words import (
    DRAINED_PREFIX,
    INFERENCE_PARTITION,
    PROFILER,
    SERVING,
    pool_words,
)


def job(
    job_id: str,
    gpus: int,
    estimate: float = 1000.0,
    job_class: JobClass = JobClass.TRAINING,
    tenant: str = "default",
    gpu_type: str | None = None,
    gpu_memory_gb: float | None = None,
) -> JobSpec:
    return JobSpec(
        job_id,
        0.0,
        gpus,
        estimate,
        job_class=job_class,
        tenant=tenant,
        gpu_type=gpu_type,
        gpu_memory_gb=gpu_memory_gb,
        estimate=estimate,
    )


def running(scheduler: Scheduler, spec: JobSpec, *parts: tuple[int, int]) -> None:
    """``spec`` runs on exactly ``parts`` ((node index, GPUs), ...)."""
    scheduler.submit(spec, 0.0)
    scheduler.adopt(spec.id, Placement(parts), 0.0)


def live_default() -> DefaultPolicy:
    """The live service's default profile, re-planning at every pass, without profiling."""
    return DefaultPolicy(DefaultConfig(replan_interval_s=0.0, profile_limit_s=None))


# -- 1. the aggregated wait sentence leads with the binding constraint ---------------------


def test_all_gpus_busy_names_who_holds_them_not_a_pool() -> None:
    # the case of issue 19: one 4-GPU node, 3 GPUs training and 1 inference (which put
    # the node in the serving pool), a new 2-GPU training job waits
    scheduler = Scheduler(Cluster.homogeneous(1, 4), live_default())
    scheduler.submit(job("t1", 3), 0.0)
    scheduler.schedule(0.0)
    scheduler.submit(job("i1", 1, job_class=JobClass.INFERENCE), 1.0)
    scheduler.schedule(1.0)
    scheduler.submit(job("t2", 2, 5000.0), 2.0)
    assert scheduler.schedule(2.0) == []
    assert scheduler.free.pool_of == [SERVING_POOL]  # the cause of the old sentence
    assert scheduler.why_pending("t2", 2.0) == (
        "pending (position 1 in ilucid order): all 4 GPUs are busy (3 training, 1 inference)"
    )


def test_some_gpus_free_but_too_few() -> None:
    scheduler = Scheduler(Cluster.homogeneous(1, 4), make_policy("fifo"))
    running(scheduler, job("t1", 2), (0, 2))
    running(scheduler, job("i1", 1, job_class=JobClass.INFERENCE), (0, 1))
    scheduler.submit(job("t2", 2), 1.0)
    assert scheduler.schedule(1.0) == []
    assert scheduler.why_pending("t2", 1.0) == (
        "pending (position 1 in fifo order): only 1 of 4 GPUs is free"
        " (3 busy: 2 training, 1 inference) and the job needs 2"
    )


def test_the_only_gpu_busy_with_best_effort() -> None:
    scheduler = Scheduler(Cluster.homogeneous(1, 1), make_policy("fifo"))
    running(scheduler, job("b", 1, job_class=JobClass.BEST_EFFORT), (0, 1))
    scheduler.submit(job("t", 1), 1.0)
    assert scheduler.why_pending("t", 1.0) == (
        "pending (position 1 in fifo order): the only GPU is busy (1 best-effort)"
    )


def test_fragmentation_says_where_the_free_gpus_are() -> None:
    scheduler = Scheduler(Cluster.homogeneous(2, 4), make_policy("fifo"))
    running(scheduler, job("a", 2), (0, 2))
    running(scheduler, job("b", 2), (1, 2))
    scheduler.submit(job("wide", 4), 1.0)
    assert scheduler.schedule(1.0) == []
    assert scheduler.why_pending("wide", 1.0) == (
        "pending (position 1 in fifo order): 4 GPUs are free but on 2 nodes"
        " (at most 2 on one); the job needs 4 on one node"
    )


def test_a_multi_node_job_needs_whole_nodes() -> None:
    scheduler = Scheduler(Cluster.homogeneous(4, 4), make_policy("fifo"))
    for k in range(3):
        running(scheduler, job(f"small{k}", 1), (k, 1))
    scheduler.submit(job("gang", 8), 1.0)
    assert scheduler.schedule(1.0) == []
    assert scheduler.why_pending("gang", 1.0) == (
        "pending (position 1 in fifo order): 13 GPUs are free but only 1 of 4 nodes is wholly"
        " free; the job needs 2 whole nodes"
    )


def test_gpu_type_counts_only_the_gpus_of_that_type() -> None:
    cluster = Cluster((Node("v0", 4, "V100", 16.0), Node("a0", 4, "A100", 80.0)))
    scheduler = Scheduler(cluster, make_policy("fifo"))
    running(scheduler, job("x", 4, gpu_type="A100"), (1, 4))
    scheduler.submit(job("y", 2, gpu_type="A100"), 1.0)
    assert scheduler.schedule(1.0) == []
    assert scheduler.why_pending("y", 1.0) == (
        "pending (position 1 in fifo order): all 4 A100 GPUs are busy (4 training);"
        " other nodes: 1 with GPU type V100 (needs A100)"
    )


def test_gpu_memory_counts_only_gpus_large_enough() -> None:
    cluster = Cluster(
        (
            Node("small", 8, "V100", 16.0),
            Node("big0", 4, "A100", 80.0),
            Node("big1", 4, "A100", 80.0),
        )
    )
    scheduler = Scheduler(cluster, make_policy("fifo"))
    running(scheduler, job("x", 4), (1, 4))
    running(scheduler, job("y", 3, job_class=JobClass.INFERENCE), (2, 3))
    scheduler.submit(job("llm", 2, gpu_memory_gb=40.0), 1.0)
    assert scheduler.schedule(1.0) == []  # 8 free GPUs on "small", 16 GB each
    assert scheduler.why_pending("llm", 1.0) == (
        "pending (position 1 in fifo order): only 1 of 8 GPUs of 40 GB or more is free"
        " (7 busy: 4 training, 3 inference) and the job needs 2;"
        " other nodes: 1 with 16 GB GPUs (needs 40 GB)"
    )


def test_the_training_reserve_leads() -> None:
    scheduler = Scheduler(Cluster.homogeneous(1, 4), TieredPolicy(TierConfig(reserve_training=0.5)))
    scheduler.submit(job("i1", 2, job_class=JobClass.INFERENCE), 0.0)
    scheduler.submit(job("i2", 1, job_class=JobClass.INFERENCE), 0.0)
    scheduler.schedule(0.0)
    assert scheduler.why_pending("i2", 0.0) == (
        "pending (position 1 in tiered order): inference holds 2/4 GPUs; starting it would"
        " break the 50% reserve kept for training"
    )


def test_the_tenant_quota_leads() -> None:
    quotas = {"vision": TenantQuota(guaranteed=2, borrow_limit=0)}
    scheduler = Scheduler(Cluster.homogeneous(1, 8), TieredPolicy(TierConfig(quotas=quotas)))
    for k in range(3):
        scheduler.submit(job(f"v{k}", 1, tenant="vision"), 0.0)
    scheduler.schedule(0.0)
    assert scheduler.why_pending("v2", 0.0) == (
        "pending (position 1 in tiered order): over its tenant's quota: tenant vision uses"
        " 2/2 guaranteed GPUs and may borrow 0 more (needs 1)"
    )


def test_a_new_job_waits_for_a_profiling_slot() -> None:
    # 4 nodes x 4: the profiler takes one (a quarter of the nodes); p2 (2 GPUs) profiles
    # first (smallest first), p4 (4 GPUs) then finds 2 of the profiler's 4 GPUs free
    policy = LucidPolicy(LucidConfig(profiler_nodes=1))
    scheduler = Scheduler(Cluster.homogeneous(4, 4), policy)
    scheduler.submit(job("p4", 4), 0.0)
    scheduler.submit(job("p2", 2), 0.0)
    assert [d.job_id for d in scheduler.schedule(0.0)] == ["p2"]
    assert scheduler.free.pool_of.count(PROFILER_POOL) == 1
    assert scheduler.wait_code("p4") == "WaitingForProfiler"
    assert scheduler.why_pending("p4", 0.0) == (
        "pending (position 1 in lucid order): waiting for a profiling slot: 2 of the"
        " profiler's 4 GPUs are free and the job needs 4 (smallest jobs first; each new job"
        " first runs there for up to 300 s)"
    )


def test_nodes_a_job_may_not_use_are_named_by_what_they_do() -> None:
    # the static partition's inference node and a node lent to the profiler do not count
    cluster = Cluster.homogeneous(3, 4)
    free = FreeGpus(cluster)
    free.set_pool(1, INFERENCE_POOL)
    free.set_pool(2, PROFILER_POOL)
    free.take(Placement(((0, 4),)))
    reason = explain_unplaceable(job("t", 2), free, held=lambda: {0: {"training": 4}})
    assert (reason.code, reason.message) == (
        "InsufficientGpus",
        "all 4 GPUs are busy (4 training); other nodes: 1 kept for inference (static"
        " partition), 1 lent to the profiler (new jobs' first short runs)",
    )


def test_a_node_out_of_service_is_named_so() -> None:
    scheduler = Scheduler(Cluster.homogeneous(2, 4), make_policy("fifo"))
    running(scheduler, job("a", 4), (0, 4))
    scheduler.free.set_unavailable([1])
    scheduler.submit(job("b", 1), 1.0)
    assert scheduler.schedule(1.0) == []
    assert scheduler.why_pending("b", 1.0) == (
        "pending (position 1 in fifo order): all 4 GPUs are busy (4 training); other nodes:"
        " 1 out of service (drained, cordoned or down in the cluster manager)"
    )


def test_gpus_no_job_accounts_for_are_other() -> None:
    free = FreeGpus(Cluster.homogeneous(1, 4))
    free.take(Placement(((0, 4),)))  # one GPU held by something the core runs no job for
    reason = explain_unplaceable(job("t", 1), free, held=lambda: {0: {"inference": 3}})
    assert reason.message == "all 4 GPUs are busy (3 inference, 1 other)"


def test_pool_words_never_show_internal_names() -> None:
    assert (SERVING, INFERENCE_PARTITION, PROFILER, DRAINED_PREFIX) == (
        SERVING_POOL,
        INFERENCE_POOL,
        PROFILER_POOL,
        DRAINED_POOL_PREFIX,
    )
    assert pool_words(DRAINED_POOL_PREFIX + "j000007") == (
        "kept empty for j000007, which has waited longest"
    )
    assert pool_words(UNAVAILABLE_POOL) == (
        "out of service (drained, cordoned or down in the cluster manager)"
    )
    assert pool_words("cloud") == "in pool cloud (nodes labelled pool=cloud)"


def test_a_job_larger_than_the_cluster() -> None:
    reason = explain_unplaceable(job("huge", 12), FreeGpus(Cluster.homogeneous(2, 4)))
    assert (reason.code, reason.message) == (
        "TooLarge",
        "the job needs 12 GPUs but the cluster has only 8",
    )


# -- 2. each rough explanation ------------------------------------------------------------


def test_a_start_by_preemption_names_its_victim() -> None:
    scheduler = Scheduler(Cluster.homogeneous(1, 4), live_default())
    scheduler.submit(job("t", 4), 0.0)
    scheduler.schedule(0.0)
    scheduler.submit(job("i", 1, job_class=JobClass.INFERENCE), 1.0)
    preempt, start = scheduler.schedule(1.0)
    assert (preempt.action.value, preempt.job_id) == ("preempt", "t")
    assert start.explain() == "start i: inference: started by preempting t (training, 4 GPUs)"


def test_a_start_by_preempting_two_names_both() -> None:
    scheduler = Scheduler(Cluster.homogeneous(1, 4), TieredPolicy())
    running(scheduler, job("a", 2), (0, 2))
    running(scheduler, job("b", 1, job_class=JobClass.BEST_EFFORT), (0, 1))
    running(scheduler, job("c", 1), (0, 1))
    scheduler.submit(job("i", 3, job_class=JobClass.INFERENCE), 1.0)
    decisions = scheduler.schedule(1.0)
    victims = sorted(d.job_id for d in decisions if d.action.value == "preempt")
    assert victims == ["a", "b"]
    start = decisions[-1].explain()
    assert start in {
        "start i: inference: started by preempting a (training, 2 GPUs) and b (best-effort, 1 GPU)",
        "start i: inference: started by preempting b (best-effort, 1 GPU) and a (training, 2 GPUs)",
    }


def test_one_tenant_hears_nothing_of_fair_share() -> None:
    scheduler = Scheduler(Cluster.homogeneous(1, 4), TieredPolicy())
    scheduler.submit(job("x", 2, 100.0, tenant="admin"), 0.0)
    [start] = scheduler.schedule(0.0)
    assert start.explain() == (
        "start x: tiered: least estimated GPU-seconds (200) of the waiting jobs that fit"
    )


def test_two_tenants_hear_the_fair_share_that_chose() -> None:
    scheduler = Scheduler(Cluster.homogeneous(1, 4), TieredPolicy())
    running(scheduler, job("held", 1, tenant="b"), (0, 1))
    scheduler.submit(job("a1", 1, 100.0, tenant="a"), 1.0)
    scheduler.submit(job("b1", 1, 50.0, tenant="b"), 1.0)
    decisions = {d.job_id: d.explain() for d in scheduler.schedule(1.0)}
    assert decisions["a1"] == (
        "start a1: fair share: of the 2 tenants with waiting jobs, a holds the fewest GPUs"
        " per unit of weight (0 GPUs, weight 1); least estimated GPU-seconds (100) of the"
        " waiting jobs that fit"
    )


def test_score_parts_never_read_minus_zero() -> None:
    scheduler = Scheduler(Cluster.homogeneous(2, 8), make_policy("fifo"))
    running(scheduler, job("a", 6), (0, 6))
    placement = Placement(((0, 2),))
    scheduler.free.take(placement)
    parts = ConsolidatingPlacer().explain(job("b", 2), placement, scheduler.free)
    assert [str(p) for p in parts] == [
        "consolidation -1 (spans 1 node: node0)",
        "best-fit +0 (leaves 0 GPUs free there)",
    ]
    assert math.copysign(1.0, ScorePart("best-fit", -0.0, "").value) == 1.0
    assert f"{ScorePart('x', -float(0), '').value:+g}" == "+0"


def test_a_start_on_gpus_a_preemption_freed_names_the_job_it_displaced() -> None:
    """The re-planning walk (srtf here; the default profile's too) preempts the longest
    job for a shorter one; the start says whose GPUs it took."""
    cluster = Cluster((Node("n0", 2), Node("n1", 2)))
    scheduler = Scheduler(cluster, make_policy("srtf"))
    scheduler.submit(JobSpec("long", 0.0, 2, 9000.0, estimate=9000.0), 0.0)
    scheduler.submit(JobSpec("other", 0.0, 2, 8000.0, estimate=8000.0), 0.0)
    scheduler.schedule(0.0)
    scheduler.submit(JobSpec("short", 10.0, 2, 100.0, estimate=100.0), 10.0)
    decisions = {d.job_id: d for d in scheduler.schedule(10.0)}
    assert decisions["long"].action.value == "preempt"
    start = decisions["short"].explain()
    assert start.endswith("; on GPUs freed by preempting long (training, 2 GPUs)"), start
