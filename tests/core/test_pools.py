"""Pools with a price and a start-up delay: on-prem first, burst when waiting costs more."""

from __future__ import annotations

import pytest

from ilucid.core import Cluster, JobSpec, Node, PoolSpec, SchedulerConfig, make_policy
from ilucid.sim.engine import simulate

ONPREM = Node("onprem", 4)
CLOUD = Node("cloud0", 4, labels={"pool": "cloud"})


def config(value: float | None) -> SchedulerConfig:
    return SchedulerConfig(pools={"cloud": PoolSpec("cloud", 2.5, 300.0)}, value_of_wait=value)


@pytest.mark.parametrize(
    ("value", "b_start", "b_end", "cloud_gpu_h"),
    [
        # a (4g, 1000 s) holds the on-prem node; b (4g, 100 s) would wait 1000 s = 0.278 h.
        # Cloud costs 2.5 x (100 + 300 s start-up) / 3600 = 0.278 per GPU.
        # value 0.5: waiting is worth 0.139 < 0.278 -> b waits on-prem: 1000..1100.
        (0.5, 1000.0, 1100.0, 0.0),
        # value 10: worth 2.78 > 0.278 -> b bursts at 0; 300 s start-up, ends at 400;
        # 4 GPUs x 400 s = 0.444 GPU-h billed.
        (10.0, 0.0, 400.0, 4 * 400 / 3600),
        # never burst without a value of waiting
        (None, 1000.0, 1100.0, 0.0),
    ],
)
def test_burst_only_when_the_wait_is_worth_the_price(
    value: float | None, b_start: float, b_end: float, cloud_gpu_h: float
) -> None:
    jobs = [JobSpec("a", 0, 4, 1000, estimate=1000), JobSpec("b", 0, 4, 100, estimate=100)]
    result = simulate(jobs, Cluster((ONPREM, CLOUD)), make_policy("fifo"), config(value))
    b = next(r for r in result.records if r.id == "b")
    assert (b.first_start, b.end) == (b_start, b_end)
    assert result.pool_gpu_seconds.get("cloud", 0.0) / 3600 == pytest.approx(cloud_gpu_h)


def test_a_burst_says_why() -> None:
    jobs = [JobSpec("a", 0, 4, 1000, estimate=1000), JobSpec("b", 0, 4, 100, estimate=100)]
    result = simulate(
        jobs, Cluster((ONPREM, CLOUD)), make_policy("fifo"), config(10.0), explain="b"
    )
    story = " ".join(text for _, text in result.story)
    # waiting 1,000 s x 4 GPUs at 10/GPU-h = 11.11, against 2.5 x 100 s x 4 GPUs = 0.28
    assert (
        "burst to cloud (generic, 2.50/GPU-h): expected wait on-prem 17 min x 4 GPUs valued at"
        " 10/GPU-h = 11.11 > cloud cost 0.28 + start-up 5 min" in story
    )


def test_unlabelled_nodes_are_on_prem_and_labelled_ones_wait_for_bursts() -> None:
    # without bursting, the cloud node is never used even when on-prem is full
    jobs = [JobSpec(f"j{k}", 0, 4, 100, estimate=100) for k in range(3)]
    result = simulate(jobs, Cluster((ONPREM, CLOUD)), make_policy("fifo"), config(None))
    assert sorted(r.first_start for r in result.records) == [0.0, 100.0, 200.0]
    assert "cloud" not in result.pool_gpu_seconds
