"""Per-GPU-type speeds in the simulator (Gavel's measured throughputs)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ilucid.core import Cluster, JobSpec, Node, make_policy
from ilucid.sim.engine import simulate
from ilucid.studies.gavel_world import GavelWorld

# one workload measured on two types: 10 steps/s on the reference, 5 on the slow one
TABLE = {
    "v100": {"('Net (batch size 8)', 1)": 10.0},
    "k80": {"('Net (batch size 8)', 1)": 5.0},
}


def test_a_job_runs_at_its_measured_speed_on_each_type() -> None:
    world = GavelWorld(TABLE)
    cluster = Cluster((Node("slow", 1, "K80"), Node("fast", 1, "V100")))
    jobs = [JobSpec("a", 0, 1, 100), JobSpec("b", 0, 1, 100)]
    # best fit puts a on node 0 (K80: half speed -> 200 s), b on node 1 (V100: 100 s)
    result = simulate(jobs, cluster, make_policy("fifo"), world=world)
    ends = {r.id: r.end for r in result.records}
    assert ends == {"a": 200.0, "b": 100.0}


def test_preferring_the_fastest_type_is_honoured() -> None:
    world = GavelWorld(TABLE)
    cluster = Cluster((Node("slow", 1, "K80"), Node("fast", 1, "V100")))
    job = JobSpec("a", 0, 1, 100)
    ranked = world.ranking(job, ["K80", "V100"])
    assert ranked == ("V100", "K80")
    result = simulate(
        [JobSpec("a", 0, 1, 100, preferred_gpu_types=ranked)],
        cluster,
        make_policy("fifo"),
        world=world,
    )
    assert result.records[0].end == 100.0


def test_real_gavel_table_loads_and_ranks() -> None:
    traces = os.environ.get("ILUCID_TRACE_DIR")
    profiles = Path(traces).parent / "profiles" if traces else None
    if profiles is None or not (profiles / "gavel").is_dir():
        pytest.skip("../shared/profiles/gavel not found")
    world = GavelWorld.from_directory(profiles)
    assert set(world.throughputs) == {"v100", "p100", "k80"}
    speeds = [world.speed(JobSpec(f"j{i}", 0, 1, 1), "K80") for i in range(200)]
    assert min(speeds) > 0 and sum(speeds) / len(speeds) < 1.0  # K80 is slower on average
    assert world.speed(JobSpec("x", 0, 1, 1), "A100") == 1.0  # unknown types: recorded speed
