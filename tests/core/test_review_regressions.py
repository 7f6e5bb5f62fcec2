"""Regressions found in review: each once hung or crashed a replay."""

from __future__ import annotations

import math

from ilucid.core import Cluster, JobSpec, Node
from ilucid.core.policies.lucid import LucidConfig, LucidPolicy
from ilucid.core.policies.preemptive import estimate_srtf, tiresias
from ilucid.sim.engine import simulate


def test_a_job_the_profiler_cannot_hold_by_type_skips_profiling() -> None:
    cluster = Cluster((*tuple(Node(f"a{i}", 8, "A100") for i in range(3)), Node("v0", 8, "V100")))
    jobs = [JobSpec("needs-a100", 0.0, 1, 100.0, gpu_type="A100")] + [
        JobSpec(f"j{i}", 10.0 + i, 2, 100.0) for i in range(3)
    ]
    result = simulate(jobs, cluster, LucidPolicy(LucidConfig()))
    assert all(r.end > 0 for r in result.records)


def test_the_profiler_never_takes_the_only_nodes_of_a_type() -> None:
    cluster = Cluster((*tuple(Node(f"v{i}", 8, "V100") for i in range(3)), Node("a0", 8, "A100")))
    jobs = [JobSpec("a", 0.0, 4, 1000.0, gpu_type="A100"), JobSpec("b", 10.0, 4, 1000.0)]
    records = {r.id: r for r in simulate(jobs, cluster, LucidPolicy(LucidConfig())).records}
    assert records["a"].nodes == "a0:4" and records["a"].end == 1000.0


def test_ilucid_with_a_gpu_less_job_does_not_spin() -> None:
    jobs = [
        JobSpec("a", 0, 8, 2000, estimate=5000),
        JobSpec("z", 1, 0, 1000, estimate=10),
        JobSpec("b", 2, 8, 100, estimate=50000),
    ]
    result = simulate(jobs, Cluster.homogeneous(1, 8), estimate_srtf())
    assert result.events < 100
    assert {r.id for r in result.records if r.end > 0} == {"a", "z", "b"}


def test_tiresias_with_an_odd_interval_never_wakes_in_the_past() -> None:
    start = math.nextafter(570569 * 7.3, math.inf)
    result = simulate(
        [JobSpec("a", start, 1, 100.0)], Cluster.homogeneous(1, 8), tiresias(interval=7.3)
    )
    assert result.records[0].first_start >= start
