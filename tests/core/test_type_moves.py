"""A running job moves to a faster GPU type left free, only when the move pays."""

from __future__ import annotations

from ilucid.core import Cluster, JobSpec, Node, Scheduler, SchedulerConfig
from ilucid.core.decision import Action
from ilucid.core.policies import make_policy
from ilucid.core.type_moves import SETTLE_S

CLUSTER = Cluster((Node("fast", 1, "v100"), Node("slow", 1, "k80")))
SPEEDS = (("k80", 1.0), ("v100", 3.0))
#: when the job on the v100 ends: the long one has settled on the k80 by then
T = SETTLE_S + 100


def _scheduler(move_after: float = 3.0) -> Scheduler:
    config = SchedulerConfig(
        gpu_type_rule="fastest", gpu_type_patience=0.0, gpu_type_move_after=move_after
    )
    return Scheduler(CLUSTER, make_policy("fifo"), config=config)


def _typed(job_id: str, estimate: float) -> JobSpec:
    return JobSpec(job_id, 0, 1, estimate, type_speeds=SPEEDS, estimate=estimate)


def _on(scheduler: Scheduler, job_id: str) -> str:
    placement = scheduler.jobs[job_id].placement
    assert placement is not None
    return CLUSTER.nodes[placement.parts[0][0]].gpu_type


def test_a_long_job_on_the_slow_type_moves_when_the_fast_one_frees() -> None:
    scheduler = _scheduler()
    scheduler.submit(_typed("short", T), 0)  # takes the v100 first
    scheduler.submit(_typed("long", 100_000), 0)  # left the k80
    scheduler.schedule(0)
    assert (_on(scheduler, "short"), _on(scheduler, "long")) == ("v100", "k80")
    scheduler.finish("short", T)
    decisions = scheduler.schedule(T)
    assert [(d.action, d.job_id) for d in decisions] == [
        (Action.PREEMPT, "long"),
        (Action.START, "long"),
    ]
    stop, start = decisions
    assert stop.reasons[0].message.startswith(
        "v100 GPUs are free: moves from k80, where it runs 3x slower, saving about"
    )
    assert "moves to v100: 3x its speed on k80" in start.reasons[0].message
    assert _on(scheduler, "long") == "v100"
    # the k80 it left is free at once for the policy's next pass
    soon = scheduler.next_wakeup(T)
    assert soon is not None and T < soon < T + 1e-6
    assert scheduler.schedule(soon) == []


def test_a_move_that_would_not_pay_is_not_made() -> None:
    scheduler = _scheduler()
    scheduler.submit(_typed("short", T), 0)
    scheduler.submit(_typed("nearly-done", T + 50), 0)  # 50 s left: saves ~33 s
    scheduler.schedule(0)
    scheduler.finish("short", T)
    assert scheduler.schedule(T) == []
    assert _on(scheduler, "nearly-done") == "k80"


def test_moves_can_be_turned_off_and_a_waiting_job_comes_first() -> None:
    off = _scheduler(move_after=0.0)
    off.submit(_typed("short", T), 0)
    off.submit(_typed("long", 100_000), 0)
    off.schedule(0)
    off.finish("short", T)
    assert off.schedule(T) == []
    # a job waiting when the v100 frees takes it: only GPUs the pass left free move jobs
    busy = _scheduler()
    busy.submit(_typed("short", T), 0)
    busy.submit(_typed("long", 100_000), 0)
    busy.submit(_typed("next", 500), 1)
    busy.schedule(1)
    busy.finish("short", T)
    decisions = busy.schedule(T)
    assert [(d.action, d.job_id) for d in decisions] == [(Action.START, "next")]
    assert _on(busy, "long") == "k80"


def test_a_job_moves_only_once_it_has_settled_where_it_runs() -> None:
    """One the policy keeps stopping and starting (the lowest in its order) would take
    the faster type only to be stopped there: it moves after SETTLE_S of running."""
    scheduler = _scheduler()
    scheduler.submit(_typed("short", SETTLE_S / 2), 0)
    scheduler.submit(_typed("long", 100_000), 0)
    scheduler.schedule(0)
    scheduler.finish("short", SETTLE_S / 2)
    assert scheduler.schedule(SETTLE_S / 2) == []
    assert _on(scheduler, "long") == "k80"


def test_a_long_job_that_can_move_starts_on_the_slower_type_a_short_one_waits() -> None:
    """With patience, a job expected to run long enough to move later takes the free k80
    at once; a shorter one (it would end before it could move) waits for the v100."""
    config = SchedulerConfig(gpu_type_rule="fastest", gpu_type_patience=0.03)
    cluster = Cluster((*CLUSTER.nodes, Node("slow2", 1, "k80")))
    scheduler = Scheduler(cluster, make_policy("fifo"), config=config)
    scheduler.submit(_typed("first", T), 0)
    scheduler.submit(_typed("long", 100_000), 0)
    scheduler.submit(_typed("shorter", SETTLE_S / 2), 0)
    started = {d.job_id for d in scheduler.schedule(0)}
    placement = scheduler.jobs["long"].placement
    assert placement is not None and cluster.nodes[placement.parts[0][0]].gpu_type == "k80"
    assert started == {"first", "long"}
    assert scheduler.wait_code("shorter").value == "WaitingForFasterType"
