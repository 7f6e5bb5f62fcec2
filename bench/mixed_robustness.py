"""Is "tiered beats a static partition on training JCT" robust, or an accident of one run?

Issue #4's scenario (a) on ITP cluster04 (or ``--trace philly``) + Alibaba DLRM
services (10% of the GPUs), replayed with every training job made ``d`` seconds
longer (d = 0..5 by default): a change far below any estimate's error that
reshuffles the order of events. For each d it prints tiered's and the static
partition's (sized to tiered's inference p99) mean training JCT and their ratio,
then how many of the runs tiered won.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from ilucid.core import JobClass, RestoreOverhead, SchedulerConfig
from ilucid.core.placement import never_placeable
from ilucid.core.policies import TierConfig
from ilucid.mixed_cli import DEFAULT_CHECKPOINT_S
from ilucid.sim.mixed import run_scenario
from ilucid.traces import (
    DEFAULT_LOAD,
    cluster_for_load,
    load_inference,
    load_trace,
    overlay_inference,
    trace_dir,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trace", default="itp-04", help="training trace (itp-04)")
    parser.add_argument("--shifts", default="0,1,2,3,4,5", help="seconds added, comma-separated")
    args = parser.parse_args()
    if trace_dir() is None:
        print("bench/mixed_robustness.py needs ILUCID_TRACE_DIR", file=sys.stderr)
        return 2
    trace = load_trace(args.trace)
    # sized as `ilucid mixed` sizes it (bench/mixed.py): 73 x 8 GPUs for itp-04
    cluster = trace.cluster or cluster_for_load(list(trace.jobs), DEFAULT_LOAD)
    instances = load_inference("alibaba-dlrm")
    config = SchedulerConfig(RestoreOverhead(), checkpoint_s=DEFAULT_CHECKPOINT_S)
    print("d s   tiered JCT s   static JCT s   static nodes   ratio   inf p99 s")
    wins = 0
    shifts = [int(d) for d in args.shifts.split(",")]
    for shift in shifts:
        training = [
            dataclasses.replace(j, duration=j.duration + shift)
            if j.job_class is not JobClass.INFERENCE
            else j
            for j in trace.jobs
        ]
        jobs = overlay_inference(training, instances, cluster.total_gpus, 0.10)
        refused = never_placeable(jobs, cluster)
        jobs = [j for j in jobs if j.id not in refused]
        runs = {r.label: r for r in run_scenario(jobs, cluster, config, tiers=TierConfig())}
        tiered = runs["tiered"].summary
        static = next(r for label, r in runs.items() if label.startswith("static"))
        ratio = tiered["avg_jct_training"] / static.summary["avg_jct_training"]
        wins += ratio < 1.0
        print(
            f"{shift:<5} {tiered['avg_jct_training']:>12,.0f}"
            f"   {static.summary['avg_jct_training']:>12,.0f}   {static.label:>12}"
            f"   {ratio:5.3f}   {tiered['p99_tts']:>9,.0f}",
            flush=True,
        )
    print(f"tiered lower in {wins} of {len(shifts)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
