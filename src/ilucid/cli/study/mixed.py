"""``ilucid study mixed``: training plus real-time inference, the default profile (or tiered) vs
static partitioning vs FIFO."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from pathlib import Path
from typing import Any

from ilucid.cli.common import Command, say_generated, trace_or_generated
from ilucid.cli.tables import format_cell, print_table
from ilucid.core import Cluster, JobClass, JobSpec, RestoreOverhead, SchedulerConfig
from ilucid.core.placement import never_placeable
from ilucid.core.policies import DEFAULT_PROFILE
from ilucid.core.policies.tiered import TierConfig
from ilucid.settings.tier_settings import load_tier_config
from ilucid.studies.generated import generated_inference
from ilucid.studies.mixed import DEFAULT_CHECKPOINT_S, MixedRun, run_scenario
from ilucid.traces import (
    DEFAULT_LOAD,
    KNOWN_INFERENCE,
    InferenceTrace,
    cluster_for_load,
    load_inference,
    overlay_inference,
    trace_dir,
)

__all__ = ["COMMANDS", "run_mixed_command"]

_COLUMNS = (
    ("label", "run", "{}"),
    ("inference_share", "inf GPU share", "{:.1%}"),
    ("p99_tts", "inf p99 start s", "{:,.0f}"),
    ("max_tts", "inf max start s", "{:,.0f}"),
    ("avg_jct_training", "train mean JCT s", "{:,.0f}"),
    ("vs_training_only", "x train-only", "{:.3f}"),
    ("p99_queue_training", "train p99 queue s", "{:,.0f}"),
    ("preemptions", "preempt", "{:,}"),
    ("lost_gpu_hours", "lost GPU-h", "{:,.1f}"),
    ("start_error_median_s", "start err med s", "{:,.0f}"),
    ("wall_s", "wall s", "{:.1f}"),
)


def _add_arguments(mixed: argparse.ArgumentParser) -> None:
    mixed.add_argument(
        "--trace",
        help="training trace: a file, a name or 'synthetic' (default: philly; with no"
        " trace folder set, generated data)",
    )
    mixed.add_argument(
        "--policy",
        choices=(DEFAULT_PROFILE, "tiered"),
        default=DEFAULT_PROFILE,
        help="profile compared with the static partition and FIFO",
    )
    mixed.add_argument(
        "--inference",
        help=f"inference instances: {', '.join(KNOWN_INFERENCE)} or a path; 'none' when the"
        " trace has its own inference jobs (default: alibaba-dlrm; with no trace folder"
        " set, generated services)",
    )
    mixed.add_argument("--share", type=float, default=0.10, help="inference GPU share")
    mixed.add_argument(
        "--target-p99", type=float, default=60.0, help="inference p99 time-to-start goal, s"
    )
    mixed.add_argument(
        "--checkpoint",
        type=float,
        default=DEFAULT_CHECKPOINT_S,
        help="default training checkpoint interval, s",
    )
    mixed.add_argument(
        "--reserve",
        type=float,
        default=None,
        help="share of GPUs inference may never take from training (default: the --tiers"
        " file's, else 0.2)",
    )
    mixed.add_argument(
        "--tiers",
        type=Path,
        default=None,
        help="TOML file of the reserve, tenant quotas and starvation settings (docs/tiers.md;"
        " default: none, the built-in settings)",
    )
    mixed.add_argument(
        "--preemption-limit",
        type=int,
        default=None,
        help="spare training jobs already preempted this many times (default: no limit)",
    )
    mixed.add_argument(
        "--limit", type=int, default=None, help="first N training jobs only (default: all)"
    )
    mixed.add_argument(
        "--load",
        type=float,
        default=None,
        help="size 8-GPU nodes for this offered load (of the training jobs, or of all jobs"
        " when the trace has its own inference) instead of the trace's node list (default:"
        " the trace's node list, else 0.85)",
    )
    mixed.add_argument("--out", type=Path, default=Path("out/mixed"), help="output directory")


def _print_mixed_table(runs: list[MixedRun]) -> None:
    """One row per run; a figure a run does not have (or NaN) prints as ``-``."""
    rows = [
        [format_cell({"label": run.label, **run.summary}.get(key), fmt) for key, _, fmt in _COLUMNS]
        for run in runs
    ]
    print_table([title for _, title, _ in _COLUMNS], rows)


def _tier_config(args: argparse.Namespace) -> TierConfig:
    """The --tiers file's settings (or the defaults), with flags given on the command line
    taking precedence."""
    tiers = load_tier_config(args.tiers) if args.tiers is not None else TierConfig()
    overrides: dict[str, Any] = {}
    if args.reserve is not None:
        overrides["reserve_training"] = args.reserve
    if args.preemption_limit is not None:
        overrides["preemption_limit"] = args.preemption_limit
    return dataclasses.replace(tiers, **overrides) if overrides else tiers


def _inference(given: str | None) -> tuple[InferenceTrace, str]:
    """``--inference`` as given; left out, alibaba-dlrm, or generated services when no
    trace folder is set (said on one line); with the name to print."""
    if given is None and trace_dir() is None:
        instances = generated_inference()
        say_generated(instances.source)
        return instances, "generated"
    return load_inference(given or "alibaba-dlrm"), given or "alibaba-dlrm"


def _beyond_partition(jobs: list[JobSpec], cluster: Cluster) -> set[str]:
    """Training jobs that need more than the cluster less its largest node: the static
    partition keeps at least one node for inference, so they would never start there."""
    if len(cluster) < 2:
        return set()
    largest = max(range(len(cluster)), key=lambda i: cluster.nodes[i].num_gpus)
    rest = Cluster(tuple(n for i, n in enumerate(cluster.nodes) if i != largest))
    training = [j for j in jobs if j.job_class is not JobClass.INFERENCE]
    return set(never_placeable(training, rest))


def run_mixed_command(args: argparse.Namespace) -> int:
    if not 0 < args.share < 1:
        raise ValueError(f"--share must be in (0, 1), got {args.share}")
    trace = trace_or_generated(args.trace, "philly", limit=args.limit)
    cluster: Cluster
    if trace.cluster is not None and args.load is None:
        cluster = trace.cluster
    else:
        # size for the training jobs (an overlay then adds inference on top), or for
        # every job when the trace carries its own inference
        has_inference = any(j.job_class is JobClass.INFERENCE for j in trace.jobs)
        basis = (
            trace.jobs
            if has_inference
            else [j for j in trace.jobs if j.job_class is not JobClass.INFERENCE]
        )
        cluster = cluster_for_load(list(basis), args.load or DEFAULT_LOAD)
    jobs = list(trace.jobs)
    if args.inference != "none" and not any(j.job_class is JobClass.INFERENCE for j in jobs):
        instances, inference_name = _inference(args.inference)
        jobs = overlay_inference(jobs, instances, cluster.total_gpus, args.share)
        print(
            f"scenario: {trace.name} training ({len(trace.jobs):,} jobs) + {inference_name}"
            f" inference ({sum(j.job_class is JobClass.INFERENCE for j in jobs):,} services,"
            f" thinned to {args.share:.0%} of {cluster.total_gpus:,} GPUs, tiled every"
            f" {instances.window_s / 86400:.1f} days)"
        )
    else:
        print(f"scenario: {trace.name}, its own inference jobs ({trace.source})")
    refused = never_placeable(jobs, cluster)
    jobs = [j for j in jobs if j.id not in refused]
    if refused:
        print(f"skipped {len(refused):,} jobs this cluster can never hold")
    too_big = _beyond_partition(jobs, cluster)
    if too_big:
        jobs = [j for j in jobs if j.id not in too_big]
        print(
            f"skipped {len(too_big):,} training jobs the static partition's training side"
            " (the cluster less one node) can never hold, for every run alike"
        )
    config = SchedulerConfig(RestoreOverhead(), checkpoint_s=args.checkpoint)
    start = time.perf_counter()
    runs = run_scenario(
        jobs,
        cluster,
        config,
        target_p99_s=args.target_p99,
        tiers=_tier_config(args),
        policy=args.policy,
        on_step=lambda text: print(f"[{time.perf_counter() - start:5.0f} s] running {text}"),
    )
    baseline = runs[-1].summary["avg_jct_training"]
    for run in runs:
        run.summary["vs_training_only"] = run.summary["avg_jct_training"] / baseline
    _print_mixed_table(runs)
    args.out.mkdir(parents=True, exist_ok=True)
    summary = {
        run.label: {
            k: (None if isinstance(v, float) and math.isnan(v) else v)
            for k, v in run.summary.items()
        }
        for run in runs
    }
    (args.out / "mixed.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out / 'mixed.json'}")
    return 0


COMMANDS = (
    Command(
        "mixed",
        "training + real-time inference: the default profile vs static partitioning vs strict FIFO",
        _add_arguments,
        run_mixed_command,
        description=(
            "Scenario (a): a training trace plus inference services from an inference"
            " instance list (default alibaba-dlrm), thinned to --share of the cluster's"
            " GPUs and tiled over the training span (docs/scenarios.md). Scenario (b):"
            " --trace alibaba, whose LS pods are the inference and BE pods the training."
        ),
    ),
)
