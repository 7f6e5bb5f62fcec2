"""``ilucid study hetero``: a cluster of mixed GPU types with Gavel's per-type speeds."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from ilucid.cli.common import Command, trace_or_generated
from ilucid.cli.tables import format_cell, print_table
from ilucid.core.placement import never_placeable
from ilucid.core.policies import DEFAULT_PROFILE
from ilucid.core.type_speeds import TYPE_RULES
from ilucid.estimators.profiles import profile_dir
from ilucid.studies.gavel_world import GavelWorld
from ilucid.studies.generated import generated_type_world
from ilucid.studies.hetero import LABELS, mixed_type_cluster, run_hetero
from ilucid.traces import cluster_for_load

__all__ = ["COMMANDS"]


def _rules(text: str) -> list[str]:
    rules = [r.strip() for r in text.split(",") if r.strip()]
    unknown = [r for r in rules if r not in TYPE_RULES]
    if unknown or not rules:
        raise argparse.ArgumentTypeError(
            f"unknown GPU type rule {', '.join(unknown) or text!r}; known: {', '.join(TYPE_RULES)}"
        )
    return rules if "blind" in rules else [*rules, "blind"]


def _add_arguments(hetero: argparse.ArgumentParser) -> None:
    hetero.add_argument(
        "--trace",
        help="a trace file, name or 'synthetic' (default: itp-04; with no trace folder set,"
        " generated data)",
    )
    hetero.add_argument(
        "--types", default="V100,P100,K80", help="GPU types of the nodes, round-robin"
    )
    hetero.add_argument(
        "--load",
        type=float,
        default=0.6,
        help="size nodes for this load in reference-type (V100) work (slower types make the"
        " real load higher)",
    )
    hetero.add_argument(
        "--policy", default=DEFAULT_PROFILE, help="scheduling policy (default: the default profile)"
    )
    hetero.add_argument(
        "--rules",
        type=_rules,
        default=list(TYPE_RULES),
        help="GPU type rules to compare, comma-separated (type-blind is always run: the"
        " ratios are to it)",
    )
    hetero.add_argument("--limit", type=int, default=None, help="first N jobs only (default: all)")
    hetero.add_argument("--out", type=Path, default=Path("out/hetero"), help="output directory")


_COLUMNS = (
    ("avg_jct", "mean JCT s", "{:,.0f}"),
    ("p99_queue", "p99 queue s", "{:,.0f}"),
    ("mean_speed", "mean speed", "{:.3f}"),
    ("wall_s", "wall s", "{:.1f}"),
)


def _world(types: list[str]) -> tuple[GavelWorld, str]:
    """Gavel's measured speeds from the profile folder; without one, generated speeds
    for ``types`` (said on one line)."""
    profiles = profile_dir()
    if profiles is None:
        world, how = generated_type_world(types)
        print(
            f"no workload profiles found (set ILUCID_PROFILE_DIR): using generated data: {how}",
            flush=True,
        )
        return world, "generated speeds"
    return GavelWorld.from_directory(profiles), "speeds from Gavel's measured throughputs"


def _run(args: argparse.Namespace) -> int:
    types = [t.strip() for t in args.types.split(",") if t.strip()]
    world, speeds = _world(types)
    trace = trace_or_generated(args.trace, "itp-04", limit=args.limit)
    sized = cluster_for_load(trace.jobs, args.load)
    cluster = mixed_type_cluster(len(sized), types)
    refused = never_placeable(trace.jobs, cluster)  # once: it looks at every job
    jobs = [j for j in trace.jobs if j.id not in refused]
    print(
        f"hetero: {trace.name} ({len(jobs):,} jobs) on {len(cluster)} nodes x 8 GPUs of"
        f" {', '.join(types)} (round-robin); {speeds};"
        f" policy {args.policy}"
    )
    runs = run_hetero(jobs, cluster, world, args.policy, rules=args.rules)
    blind = next(r for r in runs if r.label == LABELS["blind"]).summary.get("avg_jct") or math.nan
    print_table(
        ["GPU type rule"] + [title for _, title, _ in _COLUMNS] + ["mean JCT / type-blind"],
        [
            [run.label]
            + [format_cell(run.summary.get(key), fmt) for key, _, fmt in _COLUMNS]
            + [f"{(run.summary.get('avg_jct') or math.nan) / blind:.3f}x"]
            for run in runs
        ],
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "hetero.json").write_text(
        json.dumps({r.label: r.summary for r in runs}, indent=2, default=str) + "\n"
    )
    return 0


COMMANDS = (
    Command(
        "hetero",
        "mixed GPU types with Gavel's measured speeds: type-blind, fastest-first and"
        " speed-ratio allocation",
        _add_arguments,
        _run,
    ),
)
