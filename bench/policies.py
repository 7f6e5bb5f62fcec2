"""Policy benchmark (issues #3 and #15): mean JCT and p99.9 queueing against Tiresias and SRTF.

Run with ``make bench-policies`` (needs ``ILUCID_TRACE_DIR``). For each trace
at its convention size it runs fifo, qssf, tiresias, srtf, lucid,
estimate-srtf and the default profile ``ilucid`` (in parallel processes,
through the same runner as ``ilucid simulate``) and prints each policy's
ratios to the baselines measured in the same run, then the default profile's
verdict against issue #15's goals: mean JCT <= 1.15 x SRTF everywhere and
<= 0.9 x Tiresias where SRTF <= 0.8 x Tiresias; p99.9 queueing <= Tiresias on
at least 4 traces and <= 2 x Tiresias on all. ``--loads`` adds a sweep of
offered load on one trace.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from ilucid.sim import summarize
from ilucid.sim.runner import run_policies
from ilucid.traces import cluster_for_load, load_trace

POLICIES = ["fifo", "qssf", "tiresias", "srtf", "lucid", "estimate-srtf", "ilucid"]
DEFAULT = "ilucid"


def _table(label: str, trace_name: str, load: float, limit: int | None) -> dict[str, object]:
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
        f"{'policy':14} {'mean JCT s':>11} {'/tiresias':>9} {'/srtf':>6} {'p99.9 queue s':>14}"
        f" {'/tiresias':>9} {'wall s':>7}"
    )
    for name, s in summaries.items():
        print(
            f"{name:14} {s['avg_jct']:>11,.0f} {s['avg_jct'] / tiresias['avg_jct']:>9.3f}"
            f" {s['avg_jct'] / srtf['avg_jct']:>6.3f} {s['p999_queue']:>14,.0f}"
            f" {s['p999_queue'] / max(1.0, tiresias['p999_queue']):>9.2f} {s['wall_s']:>7.1f}",
            flush=True,
        )
    d = summaries[DEFAULT]
    jct_srtf = d["avg_jct"] / srtf["avg_jct"]
    jct_tir = d["avg_jct"] / tiresias["avg_jct"]
    tail = d["p999_queue"] / max(1.0, tiresias["p999_queue"])
    strict = srtf["avg_jct"] / tiresias["avg_jct"] <= 0.8
    ok_jct = jct_srtf <= 1.15 and (not strict or jct_tir <= 0.9)
    print(
        f"default profile: {jct_srtf:.3f} x srtf (goal <= 1.15), {jct_tir:.3f} x tiresias"
        + (" (goal <= 0.9: srtf <= 0.8 x tiresias here)" if strict else "")
        + f"; p99.9 queueing {tail:.2f} x tiresias; mean JCT goal {'met' if ok_jct else 'MISSED'}"
    )
    return {"trace": trace_name, "jct_ok": ok_jct, "tail": tail}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default="philly,itp-01,itp-02,itp-03,itp-04,itp-05")
    parser.add_argument("--sweep-trace", default="itp-04")
    parser.add_argument("--loads", default="", help="offered loads to sweep, e.g. 0.6,0.8,1.0")
    parser.add_argument("--limit", type=int, default=None, help="first N jobs of each trace")
    args = parser.parse_args()
    if not os.environ.get("ILUCID_TRACE_DIR"):
        print("set ILUCID_TRACE_DIR to the public traces (e.g. ../shared/traces)", file=sys.stderr)
        return 2
    warnings.filterwarnings("ignore")
    verdicts = [_table("convention size", t, 0.85, args.limit) for t in args.traces.split(",") if t]
    tails = [float(str(v["tail"])) for v in verdicts]
    print(
        f"\ndefault profile over {len(verdicts)} traces: mean JCT goal met on"
        f" {sum(bool(v['jct_ok']) for v in verdicts)}; p99.9 queueing <= tiresias on"
        f" {sum(t <= 1.0 for t in tails)} (goal >= 4), <= 2 x tiresias on"
        f" {sum(t <= 2.0 for t in tails)} (goal: all)"
    )
    for load in [float(x) for x in args.loads.split(",") if x]:
        _table("load sweep", args.sweep_trace, load, args.limit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
