"""A gang's shape (``nodes`` x ``gpus_per_node``, JobSpec.shape) is honoured by the
placer: each part on its own node, even where one node could hold the whole job, and a
gang that finds too few such nodes says so in the fields that decided."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ilucid.core import Cluster, JobSpec, Node, Placement, Scheduler, make_policy
from ilucid.core.free_gpus import FreeGpus
from ilucid.core.placement import ConsolidatingPlacer
from ilucid.core.topology import TopologyPlacer


def test_two_by_four_takes_two_nodes_though_one_could_hold_eight() -> None:
    cluster = Cluster(tuple(Node(f"n{i}", 8) for i in range(3)))
    for placer in (ConsolidatingPlacer(), TopologyPlacer()):
        free = FreeGpus(cluster)
        assert placer.place(JobSpec("g", 0, 8, 10, shape=(4, 4)), free) == Placement(
            ((0, 4), (1, 4))
        )
        # without a shape the consolidating rule keeps it on one node
        assert placer.place(JobSpec("p", 0, 8, 10), free) == Placement(((0, 8),))


def test_each_part_goes_to_the_node_that_fits_it_best() -> None:
    free = FreeGpus(Cluster((Node("big", 8), Node("mid", 4), Node("small", 2))))
    free.take(Placement(((0, 3),)))  # big has 5 free
    # parts 4 and 2: 4 -> mid (4 free, best fit), 2 -> small
    placed = ConsolidatingPlacer().place(JobSpec("g", 0, 6, 10, shape=(2, 4)), free)
    assert placed == Placement(((1, 4), (2, 2)))


def test_a_gang_on_one_node_never_spreads() -> None:
    free = FreeGpus(Cluster((Node("a", 4), Node("b", 4))))
    free.take(Placement(((0, 2),)))
    free.take(Placement(((1, 2),)))
    assert ConsolidatingPlacer().place(JobSpec("g", 0, 4, 10, shape=(4,)), free) is None
    free.give_back(Placement(((1, 2),)))
    assert ConsolidatingPlacer().place(JobSpec("g", 0, 4, 10, shape=(4,)), free) == Placement(
        ((1, 4),)
    )


def test_a_gang_short_of_nodes_names_its_fields() -> None:
    nodes = (*(Node(f"a{i}", 8, "a100", 80.0) for i in range(6)), Node("v0", 8, "v100", 16.0))
    scheduler = Scheduler(Cluster(nodes), make_policy("fifo"))
    for index in range(1, 6):
        scheduler.free.take(Placement(((index, 2),)))
    spec = JobSpec("g", 0, 16, 100, gpu_type="a100", gpu_memory_gb=80, shape=(8, 8))
    scheduler.submit(spec, 0)
    assert scheduler.schedule(0) == []
    assert scheduler.why_pending("g", 0).endswith(
        "the job needs 2 x 8 a100 GPUs of 80 GB or more: 1 of 6 nodes has 8 free"
        " (needs 2 such nodes); other nodes: 1 with GPU type v100 (needs a100)"
    )


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.integers(0, 8), min_size=1, max_size=6),
    st.lists(st.integers(1, 8), min_size=1, max_size=4),
)
def test_largest_first_best_fit_finds_distinct_nodes_whenever_they_exist(
    busy: list[int], shape: list[int]
) -> None:
    """Against brute force: a placement exists iff some assignment of parts to distinct
    nodes with room exists; when found, every part is on its own node with room."""
    from itertools import permutations

    cluster = Cluster(tuple(Node(f"n{i}", 8) for i in range(len(busy))))
    free = FreeGpus(cluster)
    for index, count in enumerate(busy):
        if count:
            free.take(Placement(((index, count),)))
    room = [8 - c for c in busy]
    possible = len(shape) <= len(room) and any(
        all(room[n] >= part for n, part in zip(nodes, shape, strict=False))
        for nodes in permutations(range(len(room)), len(shape))
    )
    placed = ConsolidatingPlacer().place(JobSpec("g", 0, sum(shape), 1, shape=tuple(shape)), free)
    assert (placed is not None) == possible
    if placed is not None:
        assert sorted(n for _, n in placed.parts) == sorted(shape)
        assert len({i for i, _ in placed.parts}) == len(shape)
        assert all(room[i] >= n for i, n in placed.parts)
