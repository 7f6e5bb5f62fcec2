"""Properties of the tiered policy on random mixed workloads.

- the training reserve holds at every instant of the simulated timeline;
- a tenant's guaranteed quota is honoured within one scheduling pass;
- no job is lost and work is conserved (done = duration + lost + restores).
"""

from __future__ import annotations

import math
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ilucid.core import Cluster, JobClass, JobSpec, Placement, Scheduler, SchedulerConfig
from ilucid.core.policies.tiered import TierConfig, TieredPolicy
from ilucid.core.quota import TenantQuota
from ilucid.sim.engine import simulate

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CLASSES = (JobClass.TRAINING, JobClass.INFERENCE, JobClass.BEST_EFFORT)


@st.composite
def mixed_workloads(draw: st.DrawFn) -> tuple[list[JobSpec], Cluster, float, SchedulerConfig]:
    cluster = Cluster.homogeneous(draw(st.integers(1, 4)), draw(st.sampled_from([2, 4, 8])))
    reserve = draw(st.sampled_from([0.0, 0.2, 0.5]))
    inference_cap = math.floor((1 - reserve) * cluster.total_gpus + 1e-9)
    sizes = [g for g in (1, 2, 4, 8) if g <= cluster.total_gpus]
    jobs: list[JobSpec] = []
    now = 0
    for index in range(draw(st.integers(1, 14))):
        now += draw(st.integers(0, 150))
        job_class = draw(st.sampled_from(CLASSES))
        gpus = draw(st.sampled_from(sizes))
        if job_class is JobClass.INFERENCE:
            if inference_cap < 1:
                job_class = JobClass.TRAINING
            else:
                gpus = min(gpus, inference_cap)
        duration = float(draw(st.integers(1, 600)))
        jobs.append(
            JobSpec(
                f"j{index}",
                float(now),
                gpus,
                duration,
                job_class=job_class,
                tenant=draw(st.sampled_from(["a", "b"])),
                estimate=float(draw(st.integers(1, 600))),
                checkpoint_s=draw(st.sampled_from([None, 50.0, 200.0])),
            )
        )
    config = SchedulerConfig(checkpoint_s=draw(st.sampled_from([None, 100.0])))
    return jobs, cluster, reserve, config


@SETTINGS
@given(mixed_workloads())
def test_training_reserve_holds_at_every_instant(
    workload: tuple[list[JobSpec], Cluster, float, SchedulerConfig],
) -> None:
    jobs, cluster, reserve, config = workload
    limit = math.floor((1 - reserve) * cluster.total_gpus + 1e-9)
    by_id = {j.id: j for j in jobs}
    held = {"inference": 0}
    peak = {"inference": 0}

    def observe(t: float, event: str, job_id: str, placement: Placement | None) -> None:
        if by_id[job_id].job_class is not JobClass.INFERENCE:
            return
        assert event != "preempt", "inference services are never preempted"
        if event == "start":
            held["inference"] += by_id[job_id].num_gpus
        elif event == "finish":
            held["inference"] -= by_id[job_id].num_gpus
        peak["inference"] = max(peak["inference"], held["inference"])
        assert held["inference"] <= limit, f"inference holds {held} > {limit} at t={t}"

    policy = TieredPolicy(TierConfig(reserve_training=reserve))
    result = simulate(jobs, cluster, policy, config, observer=observe)
    assert len(result.records) == len(jobs)
    for record in result.records:
        assert record.end >= record.first_start >= record.submit
        # work conserved: progress made = duration + work lost + restore overheads
        overheads = record.restores * config.overhead.for_job(by_id[record.id])
        expected = record.duration + record.lost_work_s + overheads
        assert math.isclose(record.work_done, expected, abs_tol=1e-6)


@SETTINGS
@given(st.data())
def test_guaranteed_quota_is_honoured_within_one_pass(data: st.DataObject) -> None:
    nodes = data.draw(st.integers(1, 3))
    per_node = data.draw(st.sampled_from([2, 4]))
    total = nodes * per_node
    tenants = ["a", "b", "c"]
    guarantees = data.draw(
        st.lists(st.integers(0, total), min_size=3, max_size=3).filter(lambda g: sum(g) <= total)
    )
    quotas = {t: TenantQuota(g) for t, g in zip(tenants, guarantees, strict=True)}
    policy = TieredPolicy(TierConfig(quotas=quotas))
    scheduler = Scheduler(Cluster.homogeneous(nodes, per_node), policy)
    rng = random.Random(data.draw(st.integers(0, 10_000)))
    now = 0.0
    for step in range(data.draw(st.integers(1, 40))):
        now += 10.0
        running = [j for j in scheduler.jobs.values() if j.status.value == "running"]
        if running and rng.random() < 0.3:
            scheduler.finish(rng.choice(running).spec.id, now)
        else:
            tenant = rng.choice(tenants)
            scheduler.submit(JobSpec(f"{tenant}{step}", now, 1, 1000.0, tenant=tenant), now)
        scheduler.schedule(now)
        used = {t: 0 for t in tenants}
        for job in scheduler.jobs.values():
            if job.status.value == "running":
                used[job.spec.tenant] += 1
        for job in scheduler.pending():
            tenant = job.spec.tenant
            assert used[tenant] + 1 > quotas[tenant].guaranteed, (
                f"tenant {tenant} holds {used[tenant]} of {quotas[tenant].guaranteed}"
                f" guaranteed GPUs while {job.spec.id} waits"
            )
