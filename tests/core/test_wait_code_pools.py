"""Hand-computed wait codes when a job may start outside the main pool's whole GPUs:
training falls back onto serving nodes, a share joins a shared GPU.

The default profile re-plans training on 60 s boundaries, so a job submitted at
t=10 waits until t=60 even when it fits now. Inference starts first and turns
its node into a serving node; training may use that node's free GPUs.
"""

from __future__ import annotations

from ilucid.core import Cluster, JobClass, JobSpec, Scheduler
from ilucid.core.policies.default import DefaultConfig, DefaultPolicy


def _serving_and_training(training_gpus: int) -> Scheduler:
    """2 nodes x 4 GPUs. At t=0 service s (1 GPU) takes node0, which turns serving
    (3 free); training a (``training_gpus``) takes node1, the only main node."""
    scheduler = Scheduler(
        Cluster.homogeneous(2, 4), DefaultPolicy(DefaultConfig(profile_limit_s=None))
    )
    scheduler.submit(JobSpec("s", 0, 1, 10_000, job_class=JobClass.INFERENCE), 0)
    scheduler.submit(JobSpec("a", 0, training_gpus, 10_000, estimate=10_000), 0)
    started = {d.job_id: d.placement.parts for d in scheduler.schedule(0) if d.placement}
    assert started == {"s": ((0, 1),), "a": ((1, training_gpus),)}
    assert scheduler.free.pool_of == ["serving", "main"]
    return scheduler


def test_training_that_fits_on_a_serving_node_waits_behind_the_order() -> None:
    # main: node1 full (0 free); serving: node0 with 3 free. t (2 GPUs) fits on node0:
    # it waits for the 60 s re-plan, not for GPUs.
    scheduler = _serving_and_training(4)
    assert scheduler.free.pool_free == {"main": 0, "serving": 3}
    scheduler.submit(JobSpec("t", 10, 2, 100, estimate=100), 10)
    assert scheduler.schedule(10) == []
    assert scheduler.wait_code("t") == "BehindInOrder"
    assert "fits now" in scheduler.why_pending("t", 10)
    # at the re-plan t starts there, on the serving node (a keeps node1: 4 + 2 GPUs
    # of training are within the 8 - 1 the service leaves)
    started = {d.job_id: d.placement.parts for d in scheduler.schedule(60) if d.placement}
    assert started == {"t": ((0, 2),)}


def test_free_gpus_split_between_main_and_serving_nodes_are_fragmented() -> None:
    # main: node1 has 1 free; serving: node0 has 3 free. w (4 GPUs) would fit the
    # 1 + 3 free GPUs, but on no one node: fragmentation, not a lack of GPUs.
    # x (5 GPUs) finds 1 + 3 < 5 free: short of GPUs in every pool open to it.
    scheduler = _serving_and_training(3)
    assert scheduler.free.pool_free == {"main": 1, "serving": 3}
    scheduler.submit(JobSpec("w", 10, 4, 100, estimate=100), 10)
    scheduler.submit(JobSpec("x", 10, 5, 100, estimate=100), 10)
    assert scheduler.schedule(10) == []
    assert scheduler.wait_code("w") == "Fragmented"
    assert "4 GPUs are free but on 2 nodes" in scheduler.why_pending("w", 10)
    assert scheduler.wait_code("x") == "InsufficientGpus"
    assert "only 4 of 8 GPUs are free" in scheduler.why_pending("x", 10)


def test_a_share_that_fits_a_shared_gpu_waits_behind_the_order() -> None:
    # 1 node x 2 GPUs. At t=0 a (500 milli-GPUs) opens a shared GPU, b takes the other
    # GPU whole: no GPU is free, yet the shared one has 500 left. c (500) fits it now;
    # d (600) fits nowhere.
    scheduler = Scheduler(
        Cluster.homogeneous(1, 2), DefaultPolicy(DefaultConfig(profile_limit_s=None))
    )
    scheduler.submit(JobSpec("a", 0, 1, 10_000, estimate=10_000, gpu_milli=500), 0)
    scheduler.submit(JobSpec("b", 0, 1, 10_000, estimate=10_000), 0)
    assert len(scheduler.schedule(0)) == 2
    assert scheduler.free.pool_free == {"main": 0}
    assert scheduler.free.shares_left(0) == {0: 500}
    scheduler.submit(JobSpec("c", 10, 1, 100, estimate=100, gpu_milli=500), 10)
    scheduler.submit(JobSpec("d", 10, 1, 100, estimate=100, gpu_milli=600), 10)
    assert scheduler.schedule(10) == []
    assert scheduler.wait_code("c") == "BehindInOrder"
    assert scheduler.wait_code("d") == "InsufficientGpus"
