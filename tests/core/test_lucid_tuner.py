"""The Lucid tuner acts on forecasts and logs each action with its cause."""

from __future__ import annotations

from ilucid.core import Cluster, Forecast, JobSpec, Scheduler
from ilucid.core.policies.lucid import PROFILER_POOL, LucidConfig, LucidPolicy


def test_forecasts_switch_packing_and_resize_the_profiler() -> None:
    policy = LucidPolicy(LucidConfig(profiler_nodes=1, profiler_max_nodes=4))
    scheduler = Scheduler(Cluster.homogeneous(16, 8), policy)
    scheduler.schedule(0.0)
    assert len(scheduler.free.pool_nodes(PROFILER_POOL)) == 1
    # main capacity: 15 nodes x 8 GPUs x 3600 s = 432,000 GPU-s per hour
    scheduler.forecast(Forecast(jobs=20, gpu_seconds=100_000), 600.0)
    scheduler.schedule(600.0)
    assert policy.packing_on is False
    assert policy.tuner_log[0].action == "packing off"
    assert "23% of main capacity" in policy.tuner_log[0].detail
    # 200 jobs x 300 s x 2 headroom = 120,000 GPU-s = 4.2 node-hours -> 5, capped at 4
    scheduler.forecast(Forecast(jobs=200, gpu_seconds=420_000), 1200.0)
    scheduler.schedule(1200.0)
    assert policy.packing_on is True
    assert [a.action for a in policy.tuner_log[1:]] == ["packing on", "profiler 1 -> 4 nodes"]
    assert policy.tuner_log[-1].forecast == Forecast(jobs=200, gpu_seconds=420_000)
    assert len(scheduler.free.pool_nodes(PROFILER_POOL)) == 4


def test_profiler_never_keeps_the_main_pool_from_the_largest_waiting_job() -> None:
    # 4 nodes x 8 GPUs; a 32-GPU job needs every node, so the pool gives its node back
    policy = LucidPolicy(LucidConfig(profiler_nodes=1, profiler_max_share=0.5))
    scheduler = Scheduler(Cluster.homogeneous(4, 8), policy)
    scheduler.submit(JobSpec("whole", 0.0, 32, 100.0, estimate=100.0), 0.0)
    decisions = scheduler.schedule(0.0)
    assert [d.job_id for d in decisions] == ["whole"]
    assert scheduler.free.pool_nodes(PROFILER_POOL) == []
