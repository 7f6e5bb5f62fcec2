"""Simulator benchmark: wall time and peak memory per policy on real traces.

Run with ``make bench`` (or ``python bench/simulator.py``); needs
``ILUCID_TRACE_DIR``. Each (trace, policy) is one ``ilucid simulate`` run in
its own process, and its wall time is the ``wall_s`` that run writes to
summary.json: the same code path and options as the CLI (the trace's node
list, predicted-start sampling, walk-forward estimates and their refits for
the estimate-driven policies), not a leaner call. Peak RSS is that process's.
The baseline measured in the same run is a one-second tick loop with the
Lucid artifact's FIFO semantics (per tick: release ended jobs, admit
arrivals, sort the queue, place until the first job that does not fit),
which is how that simulator spends its time; the ratio shows what the event
heap buys on the same trace and policy (the CLI run there gets the same
homogeneous cluster through ``--nodes``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ilucid.cli.core_build import core_build

GOALS = {
    "fifo": 5.0,
    "sjf": 10.0,
    "srtf": 20.0,
    "tiresias": 20.0,
    "qssf": 20.0,
    "ilucid": 20.0,
}
MEMORY_GOAL_MIB = 2048
TRACES = {"philly": "the trace's nodes", "itp-04": "the trace's nodes"}
POLICIES = "fifo,sjf,srtf,tiresias,fifo-backfill,sjf-backfill,qssf,ilucid"


def _cli(trace_name: str, policy: str, extra: list[str]) -> dict[str, float | str]:
    """Run ``ilucid simulate`` for one policy; its summary.json figures and peak RSS."""
    with tempfile.TemporaryDirectory(prefix="ilucid-bench-") as out:
        command = [
            sys.executable,
            "-m",
            "ilucid.cli",
            "simulate",
            "--trace",
            trace_name,
            "--policy",
            policy,
            "--out",
            out,
            "--processes",
            "1",
            *extra,
        ]
        began = time.perf_counter()
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert child.stderr is not None
        errors = child.stderr.read()
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        process_s = time.perf_counter() - began
        if child.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{errors.decode(errors='replace')}")
        summary = json.loads((Path(out) / "summary.json").read_text(encoding="utf-8"))[policy]
    return {
        "trace": trace_name,
        "policy": policy,
        "jobs": summary["jobs"],
        "nodes": summary["cluster_nodes"],
        "wall_s": summary["wall_s"],
        "process_s": process_s,
        "avg_jct": summary["avg_jct"],
        "makespan": summary["makespan"],
        "peak_mib": usage.ru_maxrss / 1024,
        "start_predictions": summary.get("start_predictions", 0),
    }


def _tick_fifo(trace_name: str, limit: int | None, budget_s: float) -> None:
    """The baseline: FIFO replayed one simulated second at a time.

    Stops after ``budget_s`` of wall time and reports how many simulated
    seconds it covered, so its full cost can be projected.
    """
    from ilucid.traces import cluster_for_load, load_trace

    trace = load_trace(trace_name)
    cluster = cluster_for_load(trace.jobs)
    jobs = trace.jobs[:limit] if limit else trace.jobs
    per_node = cluster.nodes[0].num_gpus
    free = [per_node] * len(cluster)
    start = time.perf_counter()
    now = int(jobs[0].submit_time)
    queue: list[tuple[float, int, int, int]] = []  # submit, index, gpus, duration
    running: list[tuple[int, list[tuple[int, int]]]] = []  # end, placement
    arrived = finished = 0
    total_jct = 0.0
    first = now
    while finished < len(jobs):
        if (now - first) % 4096 == 0 and time.perf_counter() - start > budget_s:
            break
        still = []
        for end, placement in running:
            if end == now:
                for node, count in placement:
                    free[node] += count
                finished += 1
            else:
                still.append((end, placement))
        running = still
        while arrived < len(jobs) and jobs[arrived].submit_time <= now:
            job = jobs[arrived]
            queue.append((job.submit_time, arrived, job.num_gpus, int(job.duration)))
            arrived += 1
        queue.sort()
        started = 0
        for submit, _, gpus, duration in queue:
            order = sorted(range(len(free)), key=lambda n: free[n])
            placement = None
            if gpus <= per_node:
                node = next((n for n in order if free[n] >= gpus), None)
                placement = None if node is None else [(node, gpus)]
            else:
                whole = [n for n in reversed(order) if free[n] == per_node][: gpus // per_node]
                if len(whole) == gpus // per_node and gpus % per_node == 0:
                    placement = [(n, per_node) for n in whole]
            if placement is None:
                break
            for node, count in placement:
                free[node] -= count
            running.append((now + max(duration, 1), placement))
            total_jct += now + max(duration, 1) - submit
            started += 1
        del queue[:started]
        now += 1
    wall = time.perf_counter() - start
    complete = finished == len(jobs)
    print(
        json.dumps(
            {
                "trace": trace_name,
                "policy": "fifo (1 s tick)",
                "jobs": len(jobs),
                "wall_s": wall,
                "complete": complete,
                "ticks": now - first,
                "avg_jct": total_jct / len(jobs) if complete else float("nan"),
            }
        )
    )


def _spawn(*args: str) -> dict[str, float | str]:
    output = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, check=True
    ).stdout
    result: dict[str, float | str] = json.loads(output.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tick", metavar="TRACE", help=argparse.SUPPRESS)
    parser.add_argument("--limit", type=int, default=None, help="first N jobs only")
    parser.add_argument("--policies", default=POLICIES)
    parser.add_argument("--no-baseline", action="store_true", help="skip the 1 s tick baseline")
    parser.add_argument(
        "--budget",
        type=float,
        default=120.0,
        help="wall seconds the tick baseline may run per trace before projecting",
    )
    args = parser.parse_args()
    if args.tick:
        _tick_fifo(args.tick, args.limit, args.budget)
        return 0
    if not os.environ.get("ILUCID_TRACE_DIR"):
        print("set ILUCID_TRACE_DIR to the public traces (e.g. ../shared/traces)", file=sys.stderr)
        return 2
    extra = ["--limit", str(args.limit)] if args.limit else []
    policies = [p for p in args.policies.split(",") if p]
    print("wall s: summary.json's wall_s of `ilucid simulate` (process s: the whole command)")
    print(f"core: {core_build()} (PYTHONPATH=src times the Python source)")
    print(
        f"{'trace':8} {'nodes':>5} {'policy':14} {'jobs':>8} {'wall s':>8} {'goal s':>7}"
        f" {'process s':>9} {'peak MiB':>9} {'mean JCT s':>12}"
    )
    for trace in TRACES:
        for policy in policies:
            row = _cli(trace, policy, extra)
            goal = GOALS.get(policy)
            verdict = (
                ""
                if goal is None
                else (
                    "ok"
                    if float(row["wall_s"]) <= goal and float(row["peak_mib"]) <= MEMORY_GOAL_MIB
                    else "MISS"
                )
            )
            print(
                f"{trace:8} {int(row['nodes']):>5} {policy:14} {int(row['jobs']):>8,}"
                f" {float(row['wall_s']):>8.2f} {goal if goal else '-':>7}"
                f" {float(row['process_s']):>9.1f} {float(row['peak_mib']):>9.0f}"
                f" {float(row['avg_jct']):>12,.0f} {verdict}",
                flush=True,
            )
    if args.no_baseline:
        return 0
    print("\nbaseline measured in this run: FIFO as a 1-second tick loop (artifact semantics)")
    print("(a run past the budget is projected from its ticks per second; marked ~)")
    print(f"{'trace':8} {'jobs':>7} {'tick s':>9} {'event s':>8} {'speed-up':>9} {'same JCT':>9}")
    for trace, limit in (("itp-01", None), ("itp-05", None), ("philly", 20000)):
        lim = ["--limit", str(limit)] if limit else []
        nodes = _nodes_for_load(trace, limit)
        event = _cli(trace, "fifo", [*lim, "--nodes", str(nodes), "--gpus-per-node", "8"])
        tick = _spawn("--tick", trace, "--budget", str(args.budget), *lim)
        tick_wall = float(tick["wall_s"])
        mark = " "
        if not tick["complete"]:
            # ticks needed = simulated span of the event-driven run
            needed = float(event["makespan"])
            tick_wall = tick_wall * needed / max(1.0, float(tick["ticks"]))
            mark = "~"
            same = "n/a"
        else:
            same = str(
                abs(float(tick["avg_jct"]) - float(event["avg_jct"]))
                <= 1e-6 * float(event["avg_jct"]) + 1
            )
        print(
            f"{trace:8} {int(event['jobs']):>7,} {mark}{tick_wall:>8.1f}"
            f" {float(event['wall_s']):>8.3f} {tick_wall / float(event['wall_s']):>8.0f}x"
            f" {same:>9}",
            flush=True,
        )
    return 0


def _nodes_for_load(trace_name: str, limit: int | None) -> int:
    """The node count of the tick loop's cluster (sized for the default load)."""
    from ilucid.traces import cluster_for_load, load_trace

    trace = load_trace(trace_name)
    jobs = trace.jobs[:limit] if limit else trace.jobs
    return len(cluster_for_load(jobs))


if __name__ == "__main__":
    sys.exit(main())
