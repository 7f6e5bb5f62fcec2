"""Policy benchmark (issue #3): mean JCT and p99.9 queueing against Tiresias and SRTF.

Run with ``make bench-policies`` (needs ``ILUCID_TRACE_DIR``). For each trace
at its convention size it runs fifo, qssf, tiresias, srtf, lucid and ilucid
(in parallel processes, through the same runner as ``ilucid simulate``) and
prints each policy's ratios to the baselines measured in the same run, then a
sweep of offered load on one trace. The goals: best of lucid/ilucid <= 0.77 x
Tiresias mean JCT, <= 1.15 x SRTF, and p99.9 queueing <= Tiresias.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from ilucid.sim import summarize
from ilucid.sim.runner import run_policies
from ilucid.traces import cluster_for_load, load_trace

POLICIES = ["fifo", "qssf", "tiresias", "srtf", "lucid", "ilucid"]


def _table(label: str, trace_name: str, load: float, limit: int | None) -> None:
    trace = load_trace(trace_name).limit(limit)
    cluster = cluster_for_load(trace.jobs, load)
    runs = run_policies(trace.jobs, cluster, POLICIES)
    summaries = {r.name: summarize(r.result) for r in runs if r.result is not None}
    for run in runs:
        if run.result is None:
            print(f"  {run.name} failed: {run.error}")
    tiresias, srtf = summaries["tiresias"], summaries["srtf"]
    print(
        f"\n{label}: {trace_name}, {len(trace.jobs):,} jobs, {len(cluster)} x 8 GPUs, load {load:g}"
    )
    print(
        f"{'policy':9} {'mean JCT s':>11} {'/tiresias':>9} {'/srtf':>6} {'p99.9 queue s':>14}"
        f" {'/tiresias':>9} {'wall s':>7}"
    )
    for name, s in summaries.items():
        print(
            f"{name:9} {s['avg_jct']:>11,.0f} {s['avg_jct'] / tiresias['avg_jct']:>9.3f}"
            f" {s['avg_jct'] / srtf['avg_jct']:>6.3f} {s['p999_queue']:>14,.0f}"
            f" {s['p999_queue'] / max(1.0, tiresias['p999_queue']):>9.2f} {s['wall_s']:>7.1f}",
            flush=True,
        )
    best = min(("lucid", "ilucid"), key=lambda p: summaries[p]["avg_jct"])
    b = summaries[best]
    lowest_p999 = min(summaries[p]["p999_queue"] for p in ("lucid", "ilucid"))
    print(
        f"best of lucid/ilucid: {best}: {b['avg_jct'] / tiresias['avg_jct']:.3f} x tiresias"
        f" (goal <= 0.77), {b['avg_jct'] / srtf['avg_jct']:.3f} x srtf (goal <= 1.15);"
        f" lowest p99.9 queueing of the two: {lowest_p999:,.0f} s"
        f" vs tiresias {tiresias['p999_queue']:,.0f} s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default="philly,itp-02,itp-03,itp-04")
    parser.add_argument("--sweep-trace", default="itp-04")
    parser.add_argument("--loads", default="0.6,0.7,0.8,0.9,1.0")
    parser.add_argument("--limit", type=int, default=None, help="first N jobs of each trace")
    args = parser.parse_args()
    if not os.environ.get("ILUCID_TRACE_DIR"):
        print("set ILUCID_TRACE_DIR to the public traces (e.g. ../shared/traces)", file=sys.stderr)
        return 2
    warnings.filterwarnings("ignore")
    for trace in [t for t in args.traces.split(",") if t]:
        _table("convention size", trace, 0.85, args.limit)
    for load in [float(x) for x in args.loads.split(",") if x]:
        _table("load sweep", args.sweep_trace, load, args.limit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
