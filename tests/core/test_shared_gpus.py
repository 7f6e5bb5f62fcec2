"""Fractions of one GPU (``gpu_milli`` < 1000) in the main books, the placer every
policy and the live service use: shares open on a whole free GPU, later fractions join
the fullest share that still holds them, and the GPU comes back whole only when its
last job ends."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ilucid.core import Cluster, JobClass, JobSpec, Node, Placement, Scheduler, make_policy
from ilucid.core.free_gpus import FULL_GPU, FreeGpus
from ilucid.core.placement import ConsolidatingPlacer
from ilucid.core.policies.tiered import TierConfig, TieredPolicy
from ilucid.core.topology import TopologyPlacer

INFERENCE = JobClass.INFERENCE


def fraction(job_id: str, milli: int, **kw: object) -> JobSpec:
    return JobSpec(job_id, 0, 1, 100, job_class=INFERENCE, gpu_milli=milli, **kw)  # type: ignore[arg-type]


def test_a_share_takes_one_whole_gpu_until_its_last_job_leaves() -> None:
    free = FreeGpus(Cluster((Node("n0", 2),)))
    first = Placement(((0, 1),), 0, 500)
    free.take(first)
    assert (free.free_total, free.free[0], free.shares_left(0)) == (1, 1, {0: 500})
    second = Placement(((0, 1),), 0, 300)
    free.take(second)
    assert (free.free_total, free.shares_left(0)) == (1, {0: 200})
    with pytest.raises(ValueError, match="200 milli-GPUs left, cannot take 300"):
        free.take(Placement(((0, 1),), 0, 300))
    free.give_back(first)
    assert (free.free_total, free.shares_left(0)) == (1, {0: 700})
    free.give_back(second)
    assert (free.free_total, free.free[0], free.shares_left(0)) == (2, 2, {})
    with pytest.raises(ValueError, match="does not hold"):
        free.give_back(second)


def test_a_share_cannot_open_on_a_node_without_a_free_gpu() -> None:
    free = FreeGpus(Cluster((Node("n0", 1),)))
    free.take(Placement(((0, 1),)))
    with pytest.raises(ValueError, match="no free GPU to share"):
        free.take(Placement(((0, 1),), 0, 100))
    assert free.shares_left(0) == {}


def test_fractions_join_the_fullest_share_that_holds_them_else_open_one_by_best_fit() -> None:
    placer = ConsolidatingPlacer()
    free = FreeGpus(Cluster((Node("n0", 4), Node("n1", 2))))
    opened = placer.place(fraction("a", 600), free)
    assert opened == Placement(((1, 1),), 0, 600)  # best fit: the smaller node
    assert opened is not None
    free.take(opened)
    other = Placement(((0, 1),), 0, 200)
    free.take(other)  # n0 has a share with 800 left, n1 one with 400 left
    # 300 fits both: the fuller one (n1, 400 left) is chosen
    assert placer.place(fraction("b", 300), free) == Placement(((1, 1),), 0, 300)
    # 500 fits only n0's share
    assert placer.place(fraction("c", 500), free) == Placement(((0, 1),), 0, 500)
    # 900 fits no share: a new one opens on a whole GPU, labelled apart from n1's
    assert placer.place(fraction("d", 900), free) == Placement(((1, 1),), 1, 900)


def test_a_fraction_honours_gpu_type_and_preference() -> None:
    placer = ConsolidatingPlacer()
    free = FreeGpus(Cluster((Node("v0", 2, "V100"), Node("a0", 2, "A100"))))
    free.take(Placement(((0, 1),), 0, 500))  # a V100 share with room
    assert placer.place(fraction("x", 500, gpu_type="A100"), free) == Placement(((1, 1),), 0, 500)
    free.take(Placement(((1, 1),), 0, 500))
    # both types have a share with room: the preferred type's comes first
    wants_a100 = fraction("y", 400, preferred_gpu_types=("A100",))
    assert placer.place(wants_a100, free) == Placement(((1, 1),), 0, 400)
    # the topology placer keeps a fraction on one node as the consolidating one does
    assert TopologyPlacer().place(wants_a100, free) == Placement(((1, 1),), 0, 400)


def test_two_halves_share_one_gpu_and_a_third_waits_with_the_reason() -> None:
    scheduler = Scheduler(Cluster((Node("n0", 1),)), make_policy("fifo"))
    for job_id in ("a", "b", "c"):
        scheduler.submit(fraction(job_id, 500), 0)
    started = scheduler.schedule(0)
    assert [(d.job_id, d.placement) for d in started] == [
        ("a", Placement(((0, 1),), 0, 500)),
        ("b", Placement(((0, 1),), 0, 500)),
    ]
    why = scheduler.why_pending("c", 0)
    assert "the only GPU is busy (1 inference)" in why  # one GPU, counted once
    assert "no shared GPU has 500 milli-GPUs left" in why
    assert "the most left on one: 0" in why
    placed = started[1].placement
    assert placed is not None
    explained = scheduler.placer.explain(scheduler.jobs["b"].spec, placed, scheduler.free)
    assert explained[0].plugin == "gpu-share"
    assert "1000 of 1000 taken there now, 0 left" in explained[0].detail
    scheduler.finish("a", 10)
    assert [(d.job_id, d.placement) for d in scheduler.schedule(10)] == [
        ("c", Placement(((0, 1),), 0, 500))
    ]
    scheduler.finish("b", 20)
    scheduler.finish("c", 20)
    assert scheduler.free.free_total == 1


def test_the_training_reserve_counts_a_share_as_its_fraction() -> None:
    cluster = Cluster((Node("n0", 1),))
    reserved = Scheduler(cluster, TieredPolicy(TierConfig(reserve_training=0.2)))
    for job_id in ("a", "b"):
        reserved.submit(fraction(job_id, 400), 0)
    # 0.4 + 0.4 GPUs <= 80% of one GPU: both run, where whole GPUs would give none
    assert [d.job_id for d in reserved.schedule(0)] == ["a", "b"]
    reserved.submit(fraction("c", 100), 1)
    assert reserved.schedule(1) == []
    assert "inference holds 0.8/1 GPUs" in reserved.why_pending("c", 1)
    open_policy = Scheduler(cluster, TieredPolicy(TierConfig(reserve_training=0.0)))
    for job_id in ("a", "b", "c"):
        open_policy.submit(fraction(job_id, 500), 0)
    assert [d.job_id for d in open_policy.schedule(0)] == ["a", "b"]


def test_a_share_of_several_gpus_is_refused() -> None:
    with pytest.raises(ValueError, match="needs num_gpus = 1, got 2"):
        JobSpec("x", 0, 2, 10, gpu_milli=500)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from([0, 100, 250, 500, 1000])), max_size=40))
def test_random_starts_and_ends_never_overcommit_a_gpu(steps: list[tuple[bool, int]]) -> None:
    """Whole and fractional jobs start and end at random: no share ever holds more than
    one GPU, and free + busy whole GPUs + open shares always add up to the cluster."""
    cluster = Cluster((Node("n0", 2), Node("n1", 3)))
    placer = ConsolidatingPlacer()
    free = FreeGpus(cluster)
    held: list[Placement] = []
    for index, (start, milli) in enumerate(steps):
        if start or not held:
            spec = JobSpec(f"j{index}", 0, 1, 1, gpu_milli=milli or FULL_GPU)
            placement = placer.place(spec, free)
            if placement is not None:
                free.take(placement)
                held.append(placement)
        else:
            free.give_back(held.pop(index % len(held)))
        shares = {(i, s): left for i in range(2) for s, left in free.shares_left(i).items()}
        whole = sum(1 for p in held if p.share is None)
        assert free.free_total + whole + len(shares) == cluster.total_gpus
        for (node, share), left in shares.items():
            taken = sum(p.milli for p in held if p.share == share and p.parts[0][0] == node)
            assert taken + left == FULL_GPU
