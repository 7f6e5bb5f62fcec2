"""Does a profile beat a static partition on training JCT robustly, or by accident of one run?

Issue #4's scenario (a) on ITP cluster04 (or ``--trace philly``) + Alibaba DLRM
services (10% of the GPUs), replayed with every training job made ``d`` seconds
longer (d = 0..5 by default): a change far below any estimate's error that
reshuffles the order of events, under ``--policy`` (the default profile, or
tiered). The static partition is sized once, to the profile's inference p99
at d = 0 (inference alone decides it, and the shift leaves inference alone).
For each d it prints both policies' mean training JCT and their ratio, then how
many runs the profile won and the mean ratio: one replay
of a loaded cluster swings by 10% or more, so the mean is the figure to trust.
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing as mp
import os
import sys

from ilucid.core import Cluster, JobClass, JobSpec, Policy, RestoreOverhead, SchedulerConfig
from ilucid.core.placement import never_placeable
from ilucid.core.policies import DefaultPolicy, TierConfig, TieredPolicy
from ilucid.sim import simulate
from ilucid.sim.estimates import WalkForwardEstimates
from ilucid.sim.lucid_world import profiling_world
from ilucid.sim.mixed import DEFAULT_CHECKPOINT_S, class_summary, size_static_partition
from ilucid.traces import (
    DEFAULT_LOAD,
    InferenceTrace,
    cluster_for_load,
    load_inference,
    load_trace,
    overlay_inference,
    trace_dir,
)

CONFIG = SchedulerConfig(RestoreOverhead(), checkpoint_s=DEFAULT_CHECKPOINT_S)
_payload: tuple[list[JobSpec], InferenceTrace, Cluster] | None = None
_policy = "ilucid"


def _scenario(shift: int) -> list[JobSpec]:
    assert _payload is not None
    training, instances, cluster = _payload
    longer = [dataclasses.replace(j, duration=j.duration + shift) for j in training]
    jobs = overlay_inference(longer, instances, cluster.total_gpus, 0.10)
    refused = never_placeable(jobs, cluster)
    return [j for j in jobs if j.id not in refused]


def _run(task: tuple[int, int]) -> tuple[int, int, float, float]:
    """(shift, static nodes or 0 for the profile) -> (..., training mean JCT, inference p99)."""
    assert _payload is not None
    shift, static_nodes = task
    jobs = _scenario(shift)
    policy: Policy
    if static_nodes or _policy == "tiered":
        policy = TieredPolicy(TierConfig(static_inference_nodes=static_nodes))
    else:
        policy = DefaultPolicy()
    estimates = WalkForwardEstimates(jobs)
    world = profiling_world("static-partition:1" if static_nodes else _policy, estimates)
    result = simulate(jobs, _payload[2], policy, CONFIG, annotator=estimates, world=world)
    summary = class_summary(result)
    return shift, static_nodes, summary["avg_jct_training"], summary["p99_tts"]


def main() -> int:
    global _payload, _policy
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trace", default="itp-04", help="training trace (itp-04)")
    parser.add_argument("--policy", default="ilucid", choices=("ilucid", "tiered"))
    parser.add_argument("--shifts", default="0,1,2,3,4,5", help="seconds added, comma-separated")
    args = parser.parse_args()
    _policy = args.policy
    if trace_dir() is None:
        print("bench/mixed_robustness.py needs ILUCID_TRACE_DIR", file=sys.stderr)
        return 2
    trace = load_trace(args.trace)
    # sized as `ilucid mixed` sizes it (bench/mixed.py): 73 x 8 GPUs for itp-04
    cluster = trace.cluster or cluster_for_load(list(trace.jobs), DEFAULT_LOAD)
    training = [j for j in trace.jobs if j.job_class is not JobClass.INFERENCE]
    _payload = (training, load_inference("alibaba-dlrm"), cluster)
    shifts = [int(d) for d in args.shifts.split(",")]
    workers = min(2 * len(shifts), os.cpu_count() or 1)
    with mp.get_context("fork").Pool(workers) as pool:
        first = _run((shifts[0], 0))
        nodes, _ = size_static_partition(_scenario(shifts[0]), cluster, first[3], CONFIG)
        tasks = [(d, 0) for d in shifts[1:]] + [(d, nodes) for d in shifts]
        results = {(d, n): jct for d, n, jct, _ in [first, *pool.map(_run, tasks, chunksize=1)]}
    print(f"{args.trace} + DLRM; static partition: {nodes} nodes (inference p99 {first[3]:.0f} s)")
    print(f"d s   {_policy + ' JCT s':>12}   static JCT s   ratio")
    ratios = []
    for shift in shifts:
        tiered, static = results[(shift, 0)], results[(shift, nodes)]
        ratios.append(tiered / static)
        print(f"{shift:<5} {tiered:>12,.0f}   {static:>12,.0f}   {ratios[-1]:5.3f}")
    wins = sum(r < 1.0 for r in ratios)
    mean = sum(ratios) / len(ratios)
    print(f"{_policy} lower in {wins} of {len(shifts)} runs; mean ratio {mean:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
