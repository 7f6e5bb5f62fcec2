"""Decisions explain themselves: why pending, why this node, why never."""

from __future__ import annotations

from ilucid.core import Action, Cluster, JobSpec, Node, Scheduler, make_policy
from ilucid.core.placement import ConsolidatingPlacer, never_placeable


def mixed_cluster() -> Cluster:
    return Cluster(
        (
            Node("a100-0", 8, "A100", 80.0, {"rack": "r1"}),
            Node("a100-1", 8, "A100", 80.0, {"rack": "r1"}),
            Node("v100-0", 8, "V100", 16.0, {"rack": "r2"}),
        )
    )


def test_why_pending_counts_nodes_by_reason() -> None:
    scheduler = Scheduler(mixed_cluster(), make_policy("fifo"))
    scheduler.submit(JobSpec("big", 0.0, 6, 100.0), 0.0)
    scheduler.submit(JobSpec("other", 0.0, 6, 100.0), 0.0)
    scheduler.submit(JobSpec("third", 0.0, 6, 100.0), 0.0)
    started = [d.job_id for d in scheduler.schedule(0.0)]
    assert started == ["big", "other", "third"]
    scheduler.submit(JobSpec("a100-job", 1.0, 4, 10.0, gpu_type="A100"), 1.0)
    assert scheduler.schedule(1.0) == []
    assert scheduler.why_pending("a100-job", 1.0) == (
        "pending (position 1 in fifo order): 4 A100 GPUs are free but on 2 nodes"
        " (at most 2 on one); the job needs 4 on one node;"
        " other nodes: 1 with GPU type V100 (needs A100)"
    )


def test_memory_filter_explains_and_is_honoured() -> None:
    cluster = mixed_cluster()
    job = JobSpec("llm", 0.0, 8, 10.0, gpu_memory_gb=40.0)
    scheduler = Scheduler(cluster, make_policy("fifo"))
    scheduler.submit(JobSpec("filler", 0.0, 8, 50.0, gpu_type="A100"), 0.0)
    scheduler.submit(JobSpec("filler2", 0.0, 8, 50.0, gpu_type="A100"), 0.0)
    scheduler.schedule(0.0)
    scheduler.submit(job, 1.0)
    assert scheduler.schedule(1.0) == []  # the V100 node is free but has 16 GB GPUs
    assert "1 with 16 GB GPUs (needs 40 GB)" in scheduler.why_pending("llm", 1.0)


def test_start_decision_carries_reason_and_score_parts() -> None:
    cluster = Cluster.homogeneous(2, 8)
    scheduler = Scheduler(cluster, make_policy("fifo"))
    scheduler.submit(JobSpec("a", 0.0, 6, 10.0), 0.0)
    scheduler.submit(JobSpec("b", 0.0, 2, 10.0), 0.0)
    decisions = scheduler.schedule(0.0)
    assert [d.action for d in decisions] == [Action.START, Action.START]
    assert decisions[1].explain() == "start b: head of the fifo queue and fits"
    # best fit: b goes next to a on node0, leaving node1 whole for an 8-GPU job
    placement = decisions[1].placement
    assert placement is not None and placement.parts == ((0, 2),)
    parts = ConsolidatingPlacer().explain(JobSpec("b", 0.0, 2, 10.0), placement, scheduler.free)
    assert [(p.plugin, p.value) for p in parts] == [("consolidation", -1.0), ("best-fit", 0.0)]
    assert [str(p) for p in parts] == [
        "consolidation -1 (spans 1 node: node0)",
        "best-fit +0 (leaves 0 GPUs free there)",
    ]


def test_preemption_is_explained_with_its_cost() -> None:
    scheduler = Scheduler(Cluster.homogeneous(1, 4), make_policy("srtf"))
    scheduler.submit(JobSpec("long", 0.0, 4, 1000.0), 0.0)
    scheduler.schedule(0.0)
    scheduler.submit(JobSpec("short", 5.0, 4, 10.0), 5.0)
    preempt, start = scheduler.schedule(5.0)
    assert (preempt.action, preempt.job_id) == (Action.PREEMPT, "long")
    assert preempt.reasons[0].numbers["overhead_s"] == 40.0
    assert "restore costs 40 s" in preempt.explain()
    assert (start.action, start.job_id) == (Action.START, "short")


def test_never_placeable_names_the_reason_once_per_shape() -> None:
    jobs = [
        JobSpec("fits", 0.0, 8, 1.0),
        JobSpec("h100", 0.0, 1, 1.0, gpu_type="H100"),
        JobSpec("huge", 0.0, 32, 1.0),
    ]
    refused = never_placeable(jobs, mixed_cluster())
    assert set(refused) == {"h100", "huge"}
    assert refused["h100"].message == (
        "0/3 nodes fit: 2 with GPU type A100 (needs H100), 1 with GPU type V100 (needs H100)"
    )
    assert refused["huge"].message == "the job needs 32 GPUs but the cluster has only 24"
