"""Hand-computed placements on heterogeneous, labelled clusters: GPU type (hard and
preferred), GPU memory, and NVLink/rack topology, each with its explanation."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ilucid.core import Cluster, JobSpec, Node, Placement, Scheduler, make_policy
from ilucid.core.free_gpus import FreeGpus
from ilucid.core.placement import ConsolidatingPlacer
from ilucid.core.topology import TopologyPlacer

V100 = Node("v0", 4, "V100", 16.0)
A100 = Node("a0", 4, "A100", 80.0)


def test_type_constraint_is_honoured_and_explained() -> None:
    scheduler = Scheduler(Cluster((V100, A100)), make_policy("fifo"))
    scheduler.submit(JobSpec("x", 0, 4, 100, gpu_type="A100"), 0)
    scheduler.submit(JobSpec("y", 0, 2, 100, gpu_type="A100"), 0)
    decisions = scheduler.schedule(0)
    assert [(d.job_id, d.placement) for d in decisions] == [("x", Placement(((1, 4),)))]
    # the V100 node has room, but y needs an A100
    assert "1 with GPU type V100 (needs A100)" in scheduler.why_pending("y", 0)


def test_gpu_memory_is_never_exceeded() -> None:
    placer = ConsolidatingPlacer()
    free = FreeGpus(Cluster((V100, A100)))
    big = JobSpec("m", 0, 1, 10, gpu_memory_gb=40.0)
    assert placer.place(big, free) == Placement(((1, 1),))
    free.take(Placement(((1, 4),)))
    assert placer.place(big, free) is None  # only 16 GB cards left


def test_type_preference_is_soft_and_explained() -> None:
    placer = ConsolidatingPlacer()
    free = FreeGpus(Cluster((V100, A100)))
    job = JobSpec("p", 0, 2, 10, preferred_gpu_types=("A100",))
    first = placer.place(job, free)
    assert first == Placement(((1, 2),))
    assert "on A100, preference #1 of A100" in placer.explain(job, first, free)[0].detail
    free.take(Placement(((1, 4),)))
    second = placer.place(job, free)
    assert second == Placement(((0, 2),))  # falls back to the V100 node
    assert "none of A100 had room" in placer.explain(job, second, free)[0].detail


def racks() -> Cluster:
    # 4 nodes x 4 GPUs; rack r0 = n0, n1; rack r1 = n2, n3
    return Cluster(tuple(Node(f"n{i}", 4, labels={"rack": f"r{i // 2}"}) for i in range(4)))


def test_multi_node_job_stays_in_one_rack_when_one_has_room() -> None:
    # n0 has a busy GPU. An 8-GPU job: the consolidating rule takes the two most-free
    # whole nodes in node order (n1, n2: two racks); the topology placer takes r1.
    free = FreeGpus(racks())
    free.take(Placement(((0, 1),)))
    job = JobSpec("wide", 0, 8, 10)
    assert ConsolidatingPlacer().place(job, free) == Placement(((1, 4), (2, 4)))
    placer = TopologyPlacer()
    placement = placer.place(job, free)
    assert placement == Placement(((2, 4), (3, 4)))
    free.take(placement)
    parts = {p.plugin: p.detail for p in placer.explain(job, placement, free)}
    assert parts["topology-rack"] == "within one rack domain (r1)"


def test_spread_across_racks_is_explained() -> None:
    # n0 and n2 each have a busy GPU: no rack holds 8 free GPUs (r0 and r1 have 7).
    free = FreeGpus(racks())
    free.take(Placement(((0, 1), (2, 1))))
    placer = TopologyPlacer()
    job = JobSpec("wide", 0, 8, 10)
    placement = placer.place(job, free)
    assert placement is not None and len({i // 2 for i in placement.node_indices}) == 2
    free.take(placement)
    parts = {p.plugin: p.detail for p in placer.explain(job, placement, free)}
    assert parts["topology-rack"] == (
        "spread over 2 rack domains (r0, r1): no single rack domain had 8 free GPUs (most: 7)"
    )


def test_nvlink_domain_comes_before_rack() -> None:
    # one rack, two NVLink domains: a 8-GPU job goes to the domain with whole nodes
    nodes = tuple(Node(f"n{i}", 4, labels={"rack": "r0", "nvlink": f"d{i // 2}"}) for i in range(4))
    free = FreeGpus(Cluster(nodes))
    free.take(Placement(((1, 1),)))  # d0 has 7 free, d1 has 8
    assert TopologyPlacer().place(JobSpec("w", 0, 8, 10), free) == Placement(((2, 4), (3, 4)))


def test_labelled_clusters_get_the_topology_placer() -> None:
    assert isinstance(Scheduler(racks(), make_policy("fifo")).placer, TopologyPlacer)
    plain = Scheduler(Cluster.homogeneous(2, 4), make_policy("fifo")).placer
    assert not isinstance(plain, TopologyPlacer)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([1, 2, 4, 8]),
            st.sampled_from([None, "V100", "A100"]),
            st.sampled_from([None, 8.0, 40.0]),
        ),
        min_size=1,
        max_size=25,
    )
)
def test_placements_never_break_type_memory_or_capacity(
    requests: list[tuple[int, str | None, float | None]],
) -> None:
    nodes = (
        Node("v0", 4, "V100", 16.0, {"rack": "r0"}),
        Node("v1", 4, "V100", 16.0, {"rack": "r0"}),
        Node("a0", 8, "A100", 80.0, {"rack": "r1"}),
        Node("a1", 8, "A100", 80.0, {"rack": "r1"}),
    )
    free = FreeGpus(Cluster(nodes))
    placer = TopologyPlacer()
    used = [0] * len(nodes)
    for k, (gpus, gpu_type, memory) in enumerate(requests):
        job = JobSpec(f"j{k}", 0, gpus, 10, gpu_type=gpu_type, gpu_memory_gb=memory)
        placement = placer.place(job, free)
        if placement is None:
            continue
        assert placement.num_gpus == gpus
        for index, count in placement.parts:
            node = nodes[index]
            assert gpu_type is None or node.gpu_type == gpu_type
            assert memory is None or node.gpu_memory_gb >= memory
            used[index] += count
            assert used[index] <= node.num_gpus
        free.take(placement)
