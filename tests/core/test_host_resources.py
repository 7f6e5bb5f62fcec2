"""CPUs and memory a job states per node (``cpus``, ``memory_gb``) are booked in the
core's free-GPU books and honoured by the placer every policy and the live service use:
a node with free GPUs but too few free CPUs or too little memory is passed over, and a
job that waits for them says so."""

from __future__ import annotations

import pytest

from ilucid.core import Cluster, JobSpec, Node, Placement, Scheduler, make_policy
from ilucid.core.free_gpus import FreeGpus
from ilucid.core.placement import ConsolidatingPlacer, never_placeable
from ilucid.core.topology import TopologyPlacer

SMALL = Node("small", 4, cpus=8, memory_gb=64)
BIG = Node("big", 8, cpus=64, memory_gb=512)


def test_best_fit_passes_over_a_node_short_of_cpus() -> None:
    placer = ConsolidatingPlacer()
    free = FreeGpus(Cluster((SMALL, BIG)))
    # GPUs alone: best fit is the small node
    assert placer.place(JobSpec("g", 0, 2, 10), free) == Placement(((0, 2),))
    hungry = JobSpec("c", 0, 2, 10, cpus=16)
    placed = placer.place(hungry, free)
    assert placed == Placement(((1, 2),), cpus=16)
    assert placed is not None
    free.take(placed)
    assert (free.cpus_free[1], free.memory_free[1]) == (48, 512)
    free.give_back(placed)
    assert (free.cpus_free[1], free.free[1]) == (64, 8)


def test_cpus_and_memory_add_up_across_jobs_on_a_node() -> None:
    scheduler = Scheduler(Cluster((SMALL,)), make_policy("fifo"))
    scheduler.submit(JobSpec("a", 0, 1, 100, cpus=6, memory_gb=16), 0)
    scheduler.submit(JobSpec("b", 0, 1, 100, cpus=4), 0)
    scheduler.submit(JobSpec("m", 0, 1, 100, memory_gb=60), 0)
    assert [d.job_id for d in scheduler.schedule(0)] == ["a"]
    why = scheduler.why_pending("b", 0)
    assert "1 of 1 node with free GPUs lacks the free CPUs or memory" in why, why
    assert "the most free on one of them: 2 CPUs" in why and "the job needs 4 CPUs" in why
    scheduler.finish("a", 10)
    assert [d.job_id for d in scheduler.schedule(10)] == ["b", "m"]  # 4 CPUs; 60 of 64 GB


def test_a_gang_takes_cpus_on_each_node_it_spans() -> None:
    placer = ConsolidatingPlacer()
    free = FreeGpus(
        Cluster((Node("n0", 4, cpus=16), Node("n1", 4, cpus=16), Node("n2", 4, cpus=4)))
    )
    gang = JobSpec("g", 0, 8, 10, cpus=8)
    placed = placer.place(gang, free)
    assert placed == Placement(((0, 4), (1, 4)), cpus=8)
    assert placed is not None
    free.take(placed)
    assert free.cpus_free == [8, 8, 4]
    # 4 GPUs are free on n2, but not 8 CPUs
    assert placer.place(JobSpec("h", 0, 4, 10, cpus=8), free) is None
    assert TopologyPlacer().place(JobSpec("h", 0, 4, 10, cpus=8), free) is None


def test_take_refuses_what_a_node_cannot_host_and_changes_nothing() -> None:
    free = FreeGpus(Cluster((SMALL,)))
    with pytest.raises(ValueError, match="cannot take 9 and 0 GB"):
        free.take(Placement(((0, 1),), cpus=9))
    assert (free.free[0], free.cpus_free[0]) == (4, 8)


def test_a_node_that_does_not_report_cpus_has_no_limit() -> None:
    free = FreeGpus(Cluster((Node("n", 2),)))
    assert ConsolidatingPlacer().place(JobSpec("x", 0, 1, 10, cpus=1000), free) is not None


def test_a_job_no_node_could_ever_host_is_left_out_with_the_reason() -> None:
    refused = never_placeable([JobSpec("x", 0, 1, 10, cpus=128)], Cluster((SMALL, BIG)))
    assert "with 8 CPUs (needs 128)" in refused["x"].message
    assert "with 64 CPUs (needs 128)" in refused["x"].message


def test_a_share_of_one_gpu_books_its_cpus_too() -> None:
    placer = ConsolidatingPlacer()
    free = FreeGpus(Cluster((SMALL,)))
    first = placer.place(JobSpec("a", 0, 1, 10, gpu_milli=500, cpus=6), free)
    assert first == Placement(((0, 1),), 0, 500, 6)
    assert first is not None
    free.take(first)
    # room on the shared GPU, but 2 CPUs left: the next share waits
    assert placer.place(JobSpec("b", 0, 1, 10, gpu_milli=500, cpus=4), free) is None
    assert placer.place(JobSpec("c", 0, 1, 10, gpu_milli=500, cpus=2), free) == Placement(
        ((0, 1),), 0, 500, 2
    )


def test_invalid_needs_are_refused() -> None:
    with pytest.raises(ValueError, match="cpus must be > 0 and finite"):
        JobSpec("x", 0, 1, 10, cpus=0)
    with pytest.raises(ValueError, match="memory_gb must be > 0 and finite"):
        JobSpec("x", 0, 1, 10, memory_gb=float("inf"))
