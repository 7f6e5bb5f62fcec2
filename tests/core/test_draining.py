"""Hand-computed cases for draining nodes for starving jobs (core/policies/draining.py).

Notation as in test_tiers.py: ``training(id, submit, GPUs, duration)`` with an
exact estimate; keys are estimated GPU-seconds, smallest first.
"""

from __future__ import annotations

import pytest

from ilucid.core import Cluster, JobSpec
from ilucid.core.jobs import JobState
from ilucid.core.policies.draining import Drainer
from ilucid.core.policies.tiered import TierConfig, TieredPolicy
from ilucid.sim.engine import simulate


def training(job_id: str, submit: float, gpus: int, duration: float) -> JobSpec:
    return JobSpec(job_id, submit, gpus, duration, estimate=duration)


def _starts(depth: int) -> dict[str, float]:
    # 3 nodes x 4 GPUs, starvation after 100 s. a, b, c (3 GPUs; 1,000, 2,000,
    # 3,000 s) start on node0, node1, node2; big1, big2 (4 GPUs, 5,000 s, keys
    # 20,000) wait. x0, x1 (1 GPU, 5,000 s) arrive at 200 and 201.
    # depth 1: at 200 node0 (empty at 1000) is drained for big1; x0 takes node1's
    # free GPU, x1 node2's. big1 starts at 1000; only then is big2 drained for:
    # node1 now empties when x0 ends (5200), node2 at 5201 -> big2 at 5200.
    # depth 2: at 200 node0 is drained for big1 and node1 (empty at 2000) for big2;
    # x0 takes node2's free GPU; x1 (ends after both promises) is not backfilled
    # and waits for c to end at 3000. big1 at 1000, big2 at 2000.
    jobs = [training("a", 0, 3, 1000), training("b", 0, 3, 2000), training("c", 0, 3, 3000)]
    jobs += [training("big1", 0, 4, 5000), training("big2", 1, 4, 5000)]
    jobs += [training("x0", 200, 1, 5000), training("x1", 201, 1, 5000)]
    policy = TieredPolicy(TierConfig(starve_after_s=100.0, drain_depth=depth))
    result = simulate(jobs, Cluster.homogeneous(3, 4), policy)
    return {r.id: r.first_start for r in result.records if r.id in ("big1", "big2", "x1")}


def test_one_drain_at_a_time_serves_the_second_starving_job_late() -> None:
    assert _starts(1) == {"big1": 1000, "big2": 5200, "x1": 201}


def test_two_drains_at_once_serve_both_starving_jobs_sooner_and_small_jobs_later() -> None:
    assert _starts(2) == {"big1": 1000, "big2": 2000, "x1": 3000}


def test_drain_depth_must_be_positive() -> None:
    with pytest.raises(ValueError, match="drain_depth must be >= 1"):
        TierConfig(drain_depth=0)


def test_jobs_queued_out_of_order_are_still_served_longest_waiting_first() -> None:
    # a recovering service queues jobs in id order, not in order of waiting
    drainer = Drainer(starve_after_s=100.0, depth=2, scan_depth=10)
    jobs = {
        seq: JobState(training(f"j{seq}", since, 1, 10), seq)
        for seq, since in [(0, 50.0), (1, 10.0), (2, 30.0), (3, 500.0)]
    }
    for job in jobs.values():
        drainer.waiting(job)
    starving = drainer.starving(1000.0, jobs, refused=lambda job: False)
    assert [j.spec.id for j in starving] == ["j1", "j2"]
    drainer.stopped_waiting(1)
    refuse_j2 = drainer.starving(1000.0, jobs, refused=lambda job: job.seq == 2)
    assert [j.spec.id for j in refuse_j2] == ["j0", "j3"]
    assert drainer.starving(140.0, jobs, refused=lambda job: False) == [jobs[2]]


def test_a_drain_whose_jobs_outrun_their_estimates_promises_again_and_keeps_backfilling() -> None:
    # 2 nodes x 4 GPUs, starvation after 100 s. a (3 GPUs, estimated 1,000 s, runs
    # 2,000) -> node0; b (4 GPUs, estimated 1,000 s, runs 5,000; key 4,000 ties big's
    # and b came first) -> node1; big (4 GPUs) waits. y's arrival at 150 makes a pass:
    # both nodes are expected to empty at 1,000, node0 has more free GPUs, so it is
    # drained for big with the promise t=1000; y (ends by 160) is backfilled there.
    # At 1,100 x (1 GPU, 50 s) arrives: the promise has passed while a still runs.
    # Renewed: a has run 1,100 s, past its 1,000 s estimate, so it is expected to run as long
    # again: node0 should empty at 2,200, and x (ends by 1,150) is backfilled at once.
    # Without renewal x would wait for big (2,000-3,000 s on node0) and start at 3,000.
    jobs = [
        JobSpec("a", 0, 3, 2000, estimate=1000),
        JobSpec("b", 0, 4, 5000, estimate=1000),
        training("big", 0, 4, 1000),
        training("y", 150, 1, 10),
        training("x", 1100, 1, 50),
    ]
    policy = TieredPolicy(TierConfig(starve_after_s=100.0))
    result = simulate(jobs, Cluster.homogeneous(2, 4), policy, explain="big")
    starts = {r.id: r.first_start for r in result.records}
    assert (starts["y"], starts["x"], starts["big"]) == (150, 1100, 2000)
    waits = " | ".join(result.waits)
    assert "except jobs expected to end by t=1000, when they are expected to be empty" in waits
    assert "except jobs expected to end by t=2200, when they are expected to be empty" in waits


def _renewed_starts(renewals: int) -> dict[str, float]:
    # 2 nodes x 4 GPUs, starvation after 100 s. a (2 GPUs, exact 1,000 s) -> node0;
    # b (4 GPUs, estimated 1,000 s, runs 5,000) -> node1; big (4 GPUs) waits. At 150
    # node0 (2 free GPUs) is drained for big, promise t=1000, and y (1 GPU, estimated
    # 10 s, runs 3,000) is backfilled there. At 1,100 (x arrives) the promise has
    # passed: y has run 950 s, so it is expected to run 950 s more, promise t=2050,
    # and x (50 s) is backfilled. At 2,100 (z arrives) it has passed again: renewed
    # (y ran 1,950 s: promise t=4050), z (50 s) is backfilled; past the cap it is
    # not, and z waits for big (y ends at 3,150, big runs 3,150..4,150).
    jobs = [
        training("a", 0, 2, 1000),
        JobSpec("b", 0, 4, 5000, estimate=1000),
        training("big", 0, 4, 1000),
        JobSpec("y", 150, 1, 3000, estimate=10),
        training("x", 1100, 1, 50),
        training("z", 2100, 1, 50),
    ]
    policy = TieredPolicy(TierConfig(starve_after_s=100.0, drain_renewals=renewals))
    result = simulate(jobs, Cluster.homogeneous(2, 4), policy)
    return {r.id: r.first_start for r in result.records if r.id in ("x", "z", "big")}


def test_a_drain_renews_its_promise_at_most_drain_renewals_times() -> None:
    assert _renewed_starts(2) == {"x": 1100, "z": 2100, "big": 3150}
    assert _renewed_starts(1) == {"x": 1100, "z": 4150, "big": 3150}
    assert _renewed_starts(0) == {"x": 4150, "z": 4150, "big": 3150}
