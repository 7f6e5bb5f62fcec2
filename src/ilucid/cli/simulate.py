"""``ilucid simulate``: replay a trace under one or more policies."""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ilucid.cli.common import (
    CliError,
    Command,
    policy_list,
    positive_float,
    positive_int,
    printable,
)
from ilucid.cli.core_build import core_build
from ilucid.cli.progress import ProgressDisplay
from ilucid.cli.tables import print_table, summary_rows
from ilucid.core import Cluster, RestoreOverhead, SchedulerConfig
from ilucid.core.placement import never_placeable
from ilucid.core.policies import DEFAULT_PROFILE, needs_profiler, tiresias_overrides
from ilucid.estimators.profiles import profile_dir
from ilucid.settings.profile_file import resolve_policies
from ilucid.sim.explainer import merged_waits
from ilucid.sim.metrics import summarize
from ilucid.sim.progress_reports import ProgressReports
from ilucid.sim.replay_types import SimResult
from ilucid.sim.report import render_report
from ilucid.sim.runner import DEFAULT_START_PREDICTIONS, run_policies
from ilucid.traces import (
    DEFAULT_LOAD,
    KNOWN_TRACES,
    Trace,
    cluster_for_load,
)
from ilucid.traces.csv_cells import formula_safe
from ilucid.traces.named import load_named

__all__ = ["COMMANDS", "simulate_trace"]


def _add_cluster_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "cluster (default: the trace's node list, else offered load 0.85)"
    )
    group.add_argument("--nodes", type=positive_int, help="number of nodes (default: see above)")
    group.add_argument("--gpus-per-node", type=positive_int, default=8, help="GPUs per node")
    group.add_argument(
        "--load",
        type=positive_float,
        help="size the cluster so the trace offers this load (default: 0.85 when the trace"
        " has no node list and --nodes is not given)",
    )
    group.add_argument(
        "--limit",
        type=positive_int,
        help="replay only the first N jobs (default: all; 5,000 for 'synthetic')",
    )


def _add_policy_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("policy settings")
    group.add_argument(
        "--tiresias-interval",
        type=float,
        default=None,
        help="seconds between Tiresias re-plans; 0 = at every event (default: 60)",
    )
    group.add_argument(
        "--tiresias-threshold",
        type=float,
        default=None,
        help="attained GPU-seconds splitting Tiresias' two queues (default: 18000)",
    )
    group.add_argument(
        "--overhead-small",
        type=float,
        default=40.0,
        help="restore overhead after a preemption, s, jobs <= 8 GPUs",
    )
    group.add_argument(
        "--overhead-large",
        type=float,
        default=60.0,
        help="restore overhead after a preemption, s, jobs > 8 GPUs",
    )
    group.add_argument(
        "--processes",
        type=positive_int,
        default=None,
        help="parallel processes (default: one per policy, at most the CPU count)",
    )


def _add_arguments(sim: argparse.ArgumentParser) -> None:
    sim.add_argument(
        "--trace",
        required=True,
        help=f"a trace file, a name inside ILUCID_TRACE_DIR ({', '.join(KNOWN_TRACES)})"
        " or 'synthetic'",
    )
    sim.add_argument(
        "--policy",
        type=policy_list,
        default=[DEFAULT_PROFILE],
        help=f"comma-separated profiles or profile files, e.g. fifo,tiresias,my_site.toml"
        f" (default: {DEFAULT_PROFILE}, the default profile; `ilucid policies` lists them)",
    )
    sim.add_argument("--out", type=Path, required=True, help="output directory")
    sim.add_argument("--seed", type=int, default=0, help="seed of the synthetic trace")
    sim.add_argument(
        "--explain",
        metavar="JOB_ID",
        help="print why this job waited, its estimate's contributions and any packing"
        " (default: no job)",
    )
    _add_cluster_options(sim)
    _add_policy_options(sim)
    _add_knowledge_options(sim)


def _share(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:  # (NaN fails too)
        raise argparse.ArgumentTypeError(f"must be a fraction in [0, 1], got {text}")
    return value


def _noise(text: str) -> float:
    value = float(text)
    if not 0.0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"must be >= 0 and finite, got {text}")
    return value


def _predictions(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 1_000_000:
        raise argparse.ArgumentTypeError(f"must be a whole number in [0, 1000000], got {text}")
    return value


def _add_knowledge_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("what the replay knows")
    group.add_argument(
        "--no-profiles",
        action="store_true",
        help="replay without workload profiles: profiling measures nothing, so nothing is packed",
    )
    group.add_argument(
        "--start-predictions",
        type=_predictions,
        default=DEFAULT_START_PREDICTIONS,
        metavar="N",
        help="give about N waiting arrivals an expected start (a calibrated range) when"
        " they are submitted, and measure it against their real start (summary.json's"
        " start_* figures); 0: none (default: 500)",
    )
    group.add_argument(
        "--progress-share",
        type=_share,
        default=0.0,
        metavar="F",
        help="a fraction F of jobs report their progress (steps) as they run, and the"
        " core estimates from it (docs/progress.md); 0: none",
    )
    group.add_argument(
        "--progress-every",
        type=positive_float,
        default=1800.0,
        metavar="S",
        help="reports after 1, 2, 4 ... minutes of run, then every S s",
    )
    group.add_argument(
        "--progress-noise",
        type=_noise,
        default=0.1,
        metavar="SIGMA",
        help="each interval's reported steps are the true ones x exp(N(0, SIGMA))",
    )


def _load(args: argparse.Namespace) -> Trace:
    return load_named(args.trace, limit=args.limit, seed=args.seed)


def _cluster(trace: Trace, args: argparse.Namespace) -> tuple[Cluster, str]:
    if args.nodes is not None and args.load is not None:
        raise CliError("give either --nodes or --load, not both")
    if args.nodes is not None:
        return (
            Cluster.homogeneous(args.nodes, args.gpus_per_node),
            f"{args.nodes} nodes x {args.gpus_per_node} GPUs (--nodes)",
        )
    if args.load is None and trace.cluster is not None:
        return trace.cluster, f"the trace's node list ({len(trace.cluster)} nodes)"
    load = DEFAULT_LOAD if args.load is None else args.load
    cluster = cluster_for_load(trace.jobs, load, args.gpus_per_node)
    return cluster, (
        f"{len(cluster)} nodes x {args.gpus_per_node} GPUs (sized for offered load {load:g})"
    )


def _write_jobs_csv(path: Path, result: SimResult) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            [
                "job_id",
                "submit",
                "num_gpus",
                "duration",
                "job_class",
                "tenant",
                "first_start",
                "end",
                "jct",
                "queueing_delay",
                "preemptions",
                "nodes",
                "wait_reason",
                "profiled_s",
                "packed",
                "lost_work_s",
                "predicted_start",
                "predicted_low",
                "predicted_high",
                "projected_start",
            ]
        )
        for r in sorted(result.records, key=lambda r: (r.submit, r.id)):
            writer.writerow(
                formula_safe(
                    [
                        r.id,
                        f"{r.submit:g}",
                        r.num_gpus,
                        f"{r.duration:g}",
                        r.job_class,
                        r.tenant,
                        f"{r.first_start:g}",
                        f"{r.end:g}",
                        f"{r.jct:g}",
                        f"{r.queueing_delay:g}",
                        r.preemptions,
                        r.nodes,
                        r.wait_reason,
                        f"{r.profiled_s:g}",
                        r.packed,
                        f"{r.lost_work_s:g}",
                        f"{r.predicted_start:g}" if r.predicted_start >= 0 else "",
                        f"{r.predicted_low:g}" if r.predicted_low >= 0 else "",
                        f"{r.predicted_high:g}" if r.predicted_high >= 0 else "",
                        f"{r.projected_start:g}" if r.projected_start >= 0 else "",
                    ]
                )
            )


def _print_explanation(job_id: str, policy: str, result: SimResult, detail: list[str]) -> None:
    record = next(r for r in result.records if r.id == job_id)
    print(
        f"\n{printable(job_id)} under {policy}: submitted {record.submit:,.0f}, first start"
        f" {record.first_start:,.0f}, end {record.end:,.0f} (JCT {record.jct:,.0f} s,"
        f" waited {record.queueing_delay:,.0f} s before its first start; the lines below"
        " count every pending spell, after preemptions too)"
    )
    for reason, seconds in merged_waits(result.waits):  # one line per kind of reason
        print(f"  waited {seconds:,.0f} s: {printable(reason)}")
    for time, text in result.story:
        print(f"  t={time:,.0f}: {printable(text)}")
    for line in detail:
        print(f"  {printable(line)}")


def _json_value(value: Any) -> Any:
    """NaN (e.g. the mean JCT of an empty job class) is not JSON; write null."""
    return None if isinstance(value, float) and math.isnan(value) else value


def simulate_trace(
    args: argparse.Namespace, trace: Trace, policies: Sequence[str], out: Path
) -> int:
    cluster, how = _cluster(trace, args)
    refused = never_placeable(trace.jobs, cluster)
    jobs = [j for j in trace.jobs if j.id not in refused]
    if not jobs:
        raise CliError(f"{trace.source}: no job fits a cluster of {cluster.total_gpus} GPUs")
    label = "SYNTHETIC trace" if trace.synthetic else f"trace {trace.name}"
    notes = [f"{label}: {len(jobs):,} jobs from {trace.source}", f"cluster: {how}"]
    if trace.skipped:
        notes.append(
            "skipped in the trace: "
            + ", ".join(f"{n:,} {why}" for why, n in sorted(trace.skipped.items()))
        )
    if refused:
        example_id, example = next(iter(refused.items()))
        notes.append(
            f"skipped {len(refused):,} jobs that this cluster can never hold"
            f" (e.g. {example_id}: {example.message})"
        )
    profiling = [p for p in policies if needs_profiler(p)]
    no_profiles = args.no_profiles
    if profiling:
        who = ", ".join(profiling)
        if no_profiles or profile_dir() is None:
            notes.append(
                f"{who}: no workload profiles (ILUCID_PROFILE_DIR): profiling measures"
                " nothing, so nothing is packed"
            )
        else:
            notes.append(
                f"{who}: each job gets a measured workload profile from Lucid's table by a"
                " seeded rule (sha256(seed:job id) mod N); Philly and ITP record none"
            )
    for note in notes:
        print(printable(note))
    config = SchedulerConfig(RestoreOverhead(args.overhead_small, args.overhead_large))
    options: dict[str, Any] = {}
    if args.explain:
        options["explain"] = args.explain
        if all(j.id != args.explain for j in jobs):
            raise CliError(f"--explain: no job {args.explain!r} in {trace.source}")
    if no_profiles:
        options["no_profiles"] = True
    options["start_predictions"] = args.start_predictions
    share = args.progress_share
    if share > 0:
        reports = ProgressReports(share, args.progress_every, args.progress_noise)
        options["progress_reports"] = reports
        notes.append(
            f"{share:.0%} of jobs report their progress: after 1, 2, 4 ... minutes of run,"
            f" then every {reports.every_s:,.0f} s; each interval's steps x exp(N(0,"
            f" {reports.noise:g}))"
        )
        print(printable(notes[-1]))
    if args.tiresias_interval is not None or args.tiresias_threshold is not None:
        options["overrides"] = tiresias_overrides(args.tiresias_interval, args.tiresias_threshold)
    with ProgressDisplay(policies) as progress:
        runs = run_policies(
            jobs, cluster, policies, config, options, args.processes, on_progress=progress.update
        )
    failed = [r for r in runs if r.result is None]
    for run in failed:
        print(f"ilucid: {run.name} failed: {printable(run.error)}", file=sys.stderr)
    results = [r.result for r in runs if r.result is not None]
    summaries = [summarize(r) for r in results]
    out.mkdir(parents=True, exist_ok=True)
    safe = {s["policy"]: {k: _json_value(v) for k, v in s.items()} for s in summaries}
    for figures in safe.values():  # which core ran: wall_s means little without it
        figures["core"] = core_build()
    (out / "summary.json").write_text(json.dumps(safe, indent=2) + "\n", encoding="utf-8")
    for result in results:
        _write_jobs_csv(out / f"jobs-{result.policy}.csv", result)
    (out / "report.html").write_text(
        render_report(f"ilucid: {label}", results, summaries, notes), encoding="utf-8"
    )
    print_table(*summary_rows(summaries))
    for result in results:
        if result.tuner_log:
            print(f"{result.policy} tuner: {len(result.tuner_log)} actions, e.g.")
            for action in result.tuner_log[:3]:
                print(f"  t={action.time:,.0f} {action.action}: {printable(action.detail)}")
    if args.explain:
        for run in runs:
            if run.result is not None:
                _print_explanation(args.explain, run.name, run.result, run.explanation or [])
    print(f"wrote {out / 'summary.json'}, {out / 'report.html'} and jobs-<policy>.csv")
    return 1 if failed else 0


def _run(args: argparse.Namespace) -> int:
    # profile files are read (a bad one stops here) and registered before any fork
    policies = resolve_policies(args.policy)
    return simulate_trace(args, _load(args), policies, args.out)


COMMANDS = (Command("simulate", "replay a trace under one or more policies", _add_arguments, _run),)
