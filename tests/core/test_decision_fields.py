"""Decisions carry what a driver acts on as typed fields; reasons' numbers are for people."""

from __future__ import annotations

import dataclasses

from ilucid.core import (
    Action,
    Cluster,
    Decision,
    JobSpec,
    Node,
    Placement,
    PoolSpec,
    Reason,
    ReasonCode,
    Scheduler,
    SchedulerConfig,
    make_policy,
)


def test_a_preemption_carries_its_lost_run_time_and_restore_overhead() -> None:
    config = SchedulerConfig(checkpoint_s=100.0)
    scheduler = Scheduler(Cluster.homogeneous(1, 4), make_policy("srtf"), config=config)
    scheduler.submit(JobSpec("long", 0.0, 4, 1000.0), 0.0)
    scheduler.schedule(0.0)
    scheduler.submit(JobSpec("short", 250.0, 4, 10.0), 250.0)
    preempt, start = scheduler.schedule(250.0)
    assert (preempt.action, preempt.job_id) == (Action.PREEMPT, "long")
    # 250 s run, checkpoints every 100 s: the last 50 s are lost
    assert (preempt.lost_s, preempt.overhead_s) == (50.0, 40.0)
    assert preempt.reasons[0].numbers == {"overhead_s": 40.0, "lost_s": 50.0}
    assert (start.startup_s, start.lost_s, start.overhead_s) == (0.0, 0.0, 0.0)


def test_a_burst_start_carries_the_pools_startup() -> None:
    config = SchedulerConfig(pools={"cloud": PoolSpec("cloud", 2.5, 300.0)}, value_of_wait=10.0)
    cluster = Cluster((Node("onprem", 4), Node("cloud0", 4, labels={"pool": "cloud"})))
    scheduler = Scheduler(cluster, make_policy("fifo"), config=config)
    scheduler.submit(JobSpec("a", 0.0, 4, 1000.0, estimate=1000.0), 0.0)
    scheduler.submit(JobSpec("b", 0.0, 4, 100.0, estimate=100.0), 0.0)
    a, b = scheduler.schedule(0.0)
    assert (a.job_id, a.startup_s) == ("a", 0.0)
    assert (b.job_id, b.action, b.startup_s) == ("b", Action.START, 300.0)
    assert b.reasons[0].numbers["startup_s"] == 300.0


def test_a_reason_added_to_a_decision_keeps_every_other_field() -> None:
    first, extra = Reason(ReasonCode.SCHEDULED, "a"), Reason(ReasonCode.PACKED, "b")
    values: dict[str, object] = {
        "action": Action.PREEMPT,
        "job_id": "j",
        "placement": Placement(((0, 2),)),
        "reasons": (first,),
        "limit_s": 300.0,
        "shares_with": "k",
        "startup_s": 5.0,
        "lost_s": 7.0,
        "overhead_s": 40.0,
    }
    fields = {f.name for f in dataclasses.fields(Decision)}
    missing = fields - set(values) - {"score"}
    assert not missing, f"give the new fields a value here: {missing}"
    decision = Decision(**values)  # type: ignore[arg-type]
    added = decision.with_reason(extra)
    assert added == dataclasses.replace(decision, reasons=(first, extra))
