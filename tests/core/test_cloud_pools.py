"""Issue 35: on-demand paid pools in the core: power, bill, budgets, release, return home.

Numbers are worked by hand in each test: on-prem is one 4-GPU node, the cloud pool one
or two 4-GPU nodes at 2.5 per GPU-hour with a 300 s start-up, released after 600 s idle.
"""

from __future__ import annotations

import pytest

from ilucid.core import (
    Cluster,
    JobClass,
    JobSpec,
    Node,
    PoolSpec,
    Scheduler,
    SchedulerConfig,
    make_policy,
)
from ilucid.core.cloud import CloudBudget, month_of
from ilucid.core.decision import Action
from ilucid.sim.engine import simulate

ONPREM = Node("onprem", 4)
CLOUD = (Node("cloud0", 4, labels={"pool": "cloud"}), Node("cloud1", 4, labels={"pool": "cloud"}))
POOL = PoolSpec("cloud", 2.5, 300.0, idle_release_s=600.0)


def config(**budgets: CloudBudget) -> SchedulerConfig:
    return SchedulerConfig(pools={"cloud": POOL}, value_of_wait=10.0, budgets=budgets)


def hold_onprem(duration: float = 100_000.0) -> JobSpec:
    return JobSpec("hold", 0, 4, duration, estimate=duration, tenant="ops")


def test_a_node_is_billed_from_power_up_until_its_idle_release() -> None:
    # b bursts at 0: cloud0 comes up (300 s start-up), b runs 100 s to 400, the node
    # idles 600 s and is released at 1,000: 4 GPUs x 1,000 s = 1.11 GPU-h = 2.78
    jobs = [hold_onprem(1000), JobSpec("b", 0, 4, 100, estimate=100, tenant="vision")]
    result = simulate(jobs, Cluster((ONPREM, *CLOUD)), make_policy("fifo"), config())
    b = next(r for r in result.records if r.id == "b")
    assert (b.first_start, b.end) == (0.0, 400.0)
    cost, gpu_h = result.cloud_bill["cloud"]
    assert gpu_h == pytest.approx(4 * 1000 / 3600)
    assert cost == pytest.approx(2.5 * 4 * 1000 / 3600)
    # the tenant pays for its run (start-up included), not for the idle time after it
    assert result.tenant_cloud_cost == {"vision": pytest.approx(2.5 * 4 * 400 / 3600)}
    assert result.power_ups == 1


def test_a_node_still_up_takes_the_next_burst_without_start_up() -> None:
    # c arrives at 500, while cloud0 idles after b (ended 400): no second power-up, no
    # start-up: c runs 500..600; the node is released 600 s after c, at 1,200
    jobs = [
        hold_onprem(5000),
        JobSpec("b", 0, 4, 100, estimate=100),
        JobSpec("c", 500, 4, 100, estimate=100),
    ]
    scheduler_result = simulate(jobs, Cluster((ONPREM, *CLOUD)), make_policy("fifo"), config())
    c = next(r for r in scheduler_result.records if r.id == "c")
    assert (c.first_start, c.end, c.startup_s) == (500.0, 600.0, 0.0)
    assert scheduler_result.power_ups == 1
    _, gpu_h = scheduler_result.cloud_bill["cloud"]
    assert gpu_h == pytest.approx(4 * 1200 / 3600)


def test_an_idle_node_is_released_after_its_idle_time_never_under_a_job() -> None:
    scheduler = Scheduler(Cluster((ONPREM, *CLOUD)), make_policy("fifo"), config=config())
    scheduler.submit(hold_onprem(), 0)
    scheduler.submit(JobSpec("b", 0, 4, 100, estimate=2000), 0)
    scheduler.schedule(0)
    changes = scheduler.take_power_changes()
    assert [(c.node, c.up) for c in changes] == [("cloud0", True)]
    # b runs past its idle time: the node is never released under it
    assert scheduler.next_wakeup(0) is None
    scheduler.schedule(5000)
    assert scheduler.take_power_changes() == []
    scheduler.finish("b", 6000)
    scheduler.schedule(6000)
    assert scheduler.next_wakeup(6000) == 6600
    scheduler.schedule(6599)
    assert scheduler.take_power_changes() == []
    scheduler.schedule(6600)
    (release,) = scheduler.take_power_changes()
    assert (release.node, release.up, release.at) == ("cloud0", False, 6600)
    assert "idle 600 s" in release.why


def test_a_budget_too_small_for_the_run_keeps_the_job_on_prem_and_says_why() -> None:
    # the run would cost 2.5 x 4 x (1,000 + 300) / 3,600 = 3.61 > the 3.00 left
    budgets = {"vision": CloudBudget(limit=3.0)}
    scheduler = Scheduler(Cluster((ONPREM, *CLOUD)), make_policy("fifo"), config=config(**budgets))
    scheduler.submit(hold_onprem(), 0)
    scheduler.submit(JobSpec("b", 0, 4, 1000, estimate=1000, tenant="vision"), 0)
    decisions = scheduler.schedule(0)
    assert [d.job_id for d in decisions if d.action is Action.START] == ["hold"]
    assert scheduler.take_power_changes() == []
    why = scheduler.why_pending("b", 0)
    assert "tenant vision has 3.00 of 3.00 left this month, less than the run's 3.61" in why, why


def test_a_running_cloud_job_is_stopped_when_its_tenant_reaches_the_budget_never_past() -> None:
    # estimated 100 s, but it runs on: 4 GPUs x 2.5/GPU-h = 0.00278/s; a budget of 5
    # lasts 1,800 s from its start at 0. The core wakes then and stops it there.
    budgets = {"vision": CloudBudget(limit=5.0)}
    jobs = [hold_onprem(100_000), JobSpec("b", 0, 4, 50_000, estimate=100, tenant="vision")]
    result = simulate(
        jobs, Cluster((ONPREM, *CLOUD)), make_policy("fifo"), config(**budgets), explain="b"
    )
    assert result.tenant_cloud_cost["vision"] == pytest.approx(5.0)
    story = " ".join(text for _, text in result.story)
    assert "tenant vision reached its cloud budget of 5 this month" in story, story
    stopped = [t for t, text in result.story if "reached its cloud budget" in text]
    assert stopped == [pytest.approx(1800.0)]


def test_a_tenant_or_a_job_that_opts_out_stays_on_prem() -> None:
    budgets = {"lab": CloudBudget(cloud=False)}
    scheduler = Scheduler(Cluster((ONPREM, *CLOUD)), make_policy("fifo"), config=config(**budgets))
    scheduler.submit(hold_onprem(), 0)
    scheduler.submit(JobSpec("b", 0, 4, 100, estimate=100, tenant="lab"), 0)
    scheduler.schedule(0)
    assert scheduler.take_power_changes() == []
    assert "tenant lab keeps its jobs on-prem (cloud off)" in scheduler.why_pending("b", 0)
    # and a job submitted with --no-cloud, of a tenant that may burst
    scheduler = Scheduler(Cluster((ONPREM, *CLOUD)), make_policy("fifo"), config=config(**budgets))
    scheduler.submit(hold_onprem(), 0)
    scheduler.submit(JobSpec("c", 0, 4, 100, estimate=100, cloud=False), 0)
    scheduler.schedule(0)
    assert scheduler.take_power_changes() == []
    assert "submitted with --no-cloud: on-prem only" in scheduler.why_pending("c", 0)


def test_a_tenants_own_value_of_waiting_decides_its_bursts() -> None:
    # b would wait 1,000 s (0.28 h) and run 100 s: worth 0.28 x 0.5 = 0.14 per GPU-h of
    # waiting at the tenant's own 0.5 < the run's 0.28 per GPU: it stays on-prem
    budgets = {"frugal": CloudBudget(value_of_wait=0.5)}
    scheduler = Scheduler(Cluster((ONPREM, *CLOUD)), make_policy("fifo"), config=config(**budgets))
    scheduler.submit(hold_onprem(1000), 0)
    scheduler.submit(JobSpec("b", 0, 4, 100, estimate=100, tenant="frugal"), 0)
    scheduler.schedule(0)
    assert scheduler.take_power_changes() == []
    assert "stays on-prem" in scheduler.why_pending("b", 0)


def test_the_pool_cap_limits_the_nodes_up() -> None:
    capped = PoolSpec("cloud", 2.5, 300.0, max_nodes=1)
    cfg = SchedulerConfig(pools={"cloud": capped}, value_of_wait=10.0)
    scheduler = Scheduler(Cluster((ONPREM, *CLOUD)), make_policy("fifo"), config=cfg)
    scheduler.submit(hold_onprem(), 0)
    for name in ("b", "c"):
        scheduler.submit(JobSpec(name, 0, 4, 100, estimate=100), 0)
    started = [d.job_id for d in scheduler.schedule(0) if d.action is Action.START]
    assert started == ["hold", "b"]
    assert [c.node for c in scheduler.take_power_changes()] == ["cloud0"]


def test_a_cloud_job_returns_on_prem_when_its_gpus_free() -> None:
    # hold is estimated at 100,000 s: b would wait 27.8 h, worth 278 per GPU > 35 for
    # its 50,000 s run: it bursts. hold really ends at 1,000: b, with ~49,000 s left,
    # comes home (preempted there, started on-prem in the same pass)
    hold = JobSpec("hold", 0, 4, 1000, estimate=100_000, tenant="ops")
    jobs = [hold, JobSpec("b", 0, 4, 50_000, estimate=50_000)]
    result = simulate(jobs, Cluster((ONPREM, *CLOUD)), make_policy("fifo"), config(), explain="b")
    texts = [text for _, text in result.story]
    assert any("returns home" in t for t in texts), texts
    assert any("returns on-prem from a paid pool" in t for t in texts), texts
    # it paid the cloud for 1,000 s only
    assert result.tenant_cloud_cost["default"] == pytest.approx(2.5 * 4 * 1000 / 3600)


def test_months_are_calendar_months_in_utc() -> None:
    assert month_of(0) == "1970-01"
    assert month_of(31 * 86400 - 1) == "1970-01"
    assert month_of(31 * 86400) == "1970-02"
    assert month_of(1_796_601_600) == "2026-12"  # 2026-12-07 00:00 UTC


def test_free_gpus_of_another_type_are_no_room_for_the_wait() -> None:
    # the a100 node is held; the v100 node is free but useless to an a100 job: its
    # on-prem wait is the holder's 10,000 s, not 0 (which would never burst)
    nodes = (
        Node("onprem/a100", 4, "a100"),
        Node("onprem/v100", 4, "v100"),
        Node("cloud0", 4, "a100", labels={"pool": "cloud"}),
    )
    scheduler = Scheduler(Cluster(nodes), make_policy("fifo"), config=config())
    scheduler.submit(JobSpec("hold", 0, 4, 10_000, gpu_type="a100", estimate=10_000), 0)
    scheduler.submit(JobSpec("b", 0, 4, 600, gpu_type="a100", estimate=600), 0)
    started = {d.job_id: d for d in scheduler.schedule(0) if d.action is Action.START}
    assert set(started) == {"hold", "b"}
    assert "expected wait on-prem 2.8 h x 4 GPUs" in started["b"].reasons[0].message


def test_an_inference_job_that_bursts_leaves_its_paid_node_in_the_paid_pool() -> None:
    # the inference tier marks on-prem nodes it starts a service on as serving; a node
    # the service burst to stays in pool cloud, so it is billed and released as one
    scheduler = Scheduler(Cluster((ONPREM, *CLOUD)), make_policy("ilucid"), config=config())
    scheduler.submit(hold_onprem(), 0)
    scheduler.schedule(0)
    serve = JobSpec("serve", 1, 4, 1000, job_class=JobClass.INFERENCE, estimate=1000)
    scheduler.submit(serve, 1)
    for moment in (1, 60, 120):
        scheduler.schedule(moment)
    placement = scheduler.jobs["serve"].placement
    assert placement is not None and placement.parts[0][0] == 1  # cloud0
    assert scheduler.free.pool_of[1] == "cloud"
