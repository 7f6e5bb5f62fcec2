"""Nodes the cluster manager took out of service (issue 18): the live service marks them
unavailable in the core's books (``FreeGpus.set_unavailable``); nothing is placed there,
jobs already there stay accounted until they end, and the node comes back as it was."""

from __future__ import annotations

from ilucid.core import Cluster, JobSpec, Node, Scheduler, make_policy
from ilucid.core.decision import Action
from ilucid.core.free_gpus import MAIN_POOL, UNAVAILABLE_POOL
from ilucid.core.model import Placement

CLUSTER = Cluster((Node("n0", 4), Node("n1", 4)))


def started(scheduler: Scheduler, now: float) -> dict[str, list[str]]:
    """Job -> the node names its START placement chose, in this pass."""
    names = [n.name for n in scheduler.cluster.nodes]
    return {
        d.job_id: [names[i] for i, _ in d.placement.parts]
        for d in scheduler.schedule(now)
        if d.action is Action.START and d.placement is not None
    }


def test_nothing_is_placed_on_an_unavailable_node_and_it_comes_back() -> None:
    scheduler = Scheduler(CLUSTER, make_policy("fifo"))
    scheduler.submit(JobSpec("a", 0, 4, 100, estimate=100), 0)
    scheduler.adopt("a", Placement(((0, 4),)), 0)  # runs on n0
    scheduler.free.set_unavailable([0, 1])
    scheduler.submit(JobSpec("b", 0, 2, 100, estimate=100), 0)
    assert started(scheduler, 1) == {}, "both nodes are out of service"
    assert scheduler.free.pool_of == [UNAVAILABLE_POOL, UNAVAILABLE_POOL]

    scheduler.finish("a", 2)  # its GPUs return to the books, still out of service
    assert scheduler.free.free == [4, 4]
    assert started(scheduler, 2) == {}
    scheduler.free.set_unavailable([1])  # n0 is back, n1 still out
    assert scheduler.free.unavailable() == [1]
    assert started(scheduler, 3) == {"b": ["n0"]}
    scheduler.free.set_unavailable([])
    assert scheduler.free.pool_of == [MAIN_POOL, MAIN_POOL]
    assert (
        scheduler.free.pool_free[MAIN_POOL] == 6 and scheduler.free.pool_free[UNAVAILABLE_POOL] == 0
    )


def test_a_pool_move_while_unavailable_takes_effect_on_return() -> None:
    scheduler = Scheduler(CLUSTER, make_policy("fifo"))
    free = scheduler.free
    free.set_unavailable([1])
    free.set_pool(1, "profiler")  # a policy's move while the node is out
    assert free.pool_of[1] == UNAVAILABLE_POOL
    free.set_unavailable([1])  # said again: nothing changes
    assert free.pool_of[1] == UNAVAILABLE_POOL
    free.set_unavailable([])
    assert free.pool_of[1] == "profiler" and free.pool_free["profiler"] == 4
