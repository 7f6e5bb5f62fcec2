"""Fractional-GPU placement: hand-computed choices of best-fit, worst-fit and fgd,
and the invariant that no GPU is ever shared beyond its capacity."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ilucid.core.fractional import (
    FULL_GPU,
    PodRequest,
    ShareCluster,
    ShareNode,
    SharePlacement,
    TaskMix,
    TaskType,
    choose,
    fragmentation,
)

BIG_CPU = 64_000


def node(name: str, gpus: int = 1, model: str = "T4", cpu: int = BIG_CPU) -> ShareNode:
    return ShareNode(name, cpu, 1 << 20, gpus, model)


def pod(pod_id: str, milli: int = FULL_GPU, gpus: int = 1, **kw: object) -> PodRequest:
    return PodRequest(pod_id, kw.pop("cpu", 1000), 1024, gpus, milli, **kw)  # type: ignore[arg-type]


def cluster_with(used: list[int], nodes: list[ShareNode] | None = None) -> ShareCluster:
    """One 1-GPU node per entry, with ``used`` milli already taken on its GPU."""
    cluster = ShareCluster(nodes or [node(f"n{i}") for i in range(len(used))])
    for index, milli in enumerate(used):
        if milli:
            cluster.take(pod(f"pre{index}", milli), SharePlacement(index, (0,), milli))
    return cluster


def test_best_fit_and_worst_fit_on_hand_cases() -> None:
    # n0's GPU is free, n1's has 500 left. A 0.5-GPU pod: best-fit fills n1 exactly
    # (0 left), worst-fit takes n0 (500 left there, the most).
    cluster = cluster_with([0, 500])
    assert choose(pod("p", 500), cluster, "best-fit").node == 1  # type: ignore[union-attr]
    assert choose(pod("p", 500), cluster, "worst-fit").node == 0  # type: ignore[union-attr]


def test_fgd_keeps_shares_that_the_mix_can_still_use() -> None:
    # The expected mix is all 0.6-GPU tasks. n0 is free (1000), n1 has 700 left.
    # A 0.3-GPU pod: best-fit takes n1 (400 left) - but 400 < 600 is then unusable:
    # fragmentation grows by 400. On n0, 700 left still fits a 0.6 task: growth 0.
    mix = TaskMix((TaskType(0, 1, 600, 1.0),))
    cluster = cluster_with([0, 300])
    assert choose(pod("p", 300), cluster, "best-fit").node == 1  # type: ignore[union-attr]
    chosen = choose(pod("p", 300), cluster, "fgd", mix)
    assert chosen is not None and chosen.node == 0
    parts = {p.plugin: p for p in chosen.score}
    assert parts["fragmentation"].detail == "expected unusable GPU share grows by 0.000 GPUs"


def test_fragmentation_by_hand() -> None:
    # free shares (1000, 400, 0) with 16 cores: a 0.5-GPU task cannot use the 400
    # (fragment 400); a 1-GPU task can use the whole GPU but not the 400 (400);
    # a 2-GPU task needs two whole GPUs: all 1400 are fragments; a task needing
    # 32 cores cannot run: all 1400.
    mix = TaskMix(
        (
            TaskType(1000, 1, 500, 0.25),
            TaskType(1000, 1, 1000, 0.25),
            TaskType(1000, 2, 1000, 0.25),
            TaskType(32_000, 1, 500, 0.25),
        )
    )
    assert fragmentation(16_000, [1000, 400, 0], mix) == pytest.approx(
        0.25 * (400 + 400 + 1400 + 1400)
    )


def test_whole_gpu_pods_take_only_free_gpus_on_one_node() -> None:
    cluster = ShareCluster([node("a", gpus=4), node("b", gpus=4)])
    cluster.take(pod("x", 100), choose(pod("x", 100), cluster, "best-fit"))  # type: ignore[arg-type]
    placement = choose(pod("w", gpus=4), cluster, "best-fit")
    assert placement is not None and placement.node == 1 and placement.gpus == (0, 1, 2, 3)
    three = choose(pod("t", gpus=3), cluster, "best-fit")
    assert three is not None and three.node == 0 and 0 not in three.gpus


def test_type_and_cpu_constraints_are_honoured() -> None:
    cluster = ShareCluster([node("t4", model="T4"), node("v100", model="V100", cpu=2000)])
    wants_v100 = pod("v", 500, gpu_types=frozenset({"V100"}))
    assert choose(wants_v100, cluster, "best-fit").node == 1  # type: ignore[union-attr]
    too_hungry = pod("h", 500, gpu_types=frozenset({"V100"}), cpu=4000)
    for policy in ("best-fit", "worst-fit"):
        assert choose(too_hungry, cluster, policy) is None


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 1000), st.sampled_from([1, 1, 1, 2, 4])), min_size=1, max_size=40
    ),
    st.sampled_from(["best-fit", "worst-fit", "fgd"]),
)
def test_no_gpu_is_ever_shared_beyond_its_capacity(
    requests: list[tuple[int, int]], policy: str
) -> None:
    nodes = [node("a", gpus=4), node("b", gpus=2), node("c", gpus=8, model="V100")]
    pods = [
        pod(f"p{i}", milli if gpus == 1 else FULL_GPU, gpus)
        for i, (milli, gpus) in enumerate(requests)
    ]
    mix = TaskMix.from_pods(pods)
    cluster = ShareCluster(nodes)
    taken: dict[tuple[int, int], int] = {}
    for request in pods:
        placement = choose(request, cluster, policy, mix)
        if placement is None:
            continue
        if request.num_gpu > 1:
            assert all(cluster.state[placement.node].free[g] == FULL_GPU for g in placement.gpus)
        cluster.take(request, placement)
        for gpu in placement.gpus:
            key = (placement.node, gpu)
            taken[key] = taken.get(key, 0) + placement.milli
            assert taken[key] <= FULL_GPU
    assert all(left >= 0 for state in cluster.state for left in state.free)
    assert cluster.gpu_allocated == sum(taken.values())
