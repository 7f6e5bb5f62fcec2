"""``ilucid study hybrid``: on-prem first, burst to a paid cloud pool when waiting costs more."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from ilucid.cli.common import Command, trace_or_generated
from ilucid.cli.tables import format_cell, print_table
from ilucid.core import PoolSpec
from ilucid.core.cloud import CloudBudget
from ilucid.core.placement import never_placeable
from ilucid.studies.hybrid import CLOUD_POOL, HybridRun, hybrid_scenarios, run_hybrid
from ilucid.traces import DEFAULT_LOAD, cluster_for_load

__all__ = ["COMMANDS"]


def _values(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers like 1,10, got {text!r}") from None
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError("give one or more values >= 0")
    return values


def _add_arguments(hybrid: argparse.ArgumentParser) -> None:
    hybrid.add_argument(
        "--trace",
        help="a trace file, name or 'synthetic' (default: itp-04; with no trace folder set,"
        " generated data)",
    )
    hybrid.add_argument(
        "--onprem-load",
        type=float,
        default=1.0,
        help="size the on-prem 8-GPU nodes for this offered load (1.0: just enough on average)",
    )
    hybrid.add_argument(
        "--cloud-nodes",
        type=int,
        default=None,
        help="cloud nodes (default: a quarter of the on-prem nodes, at least 1)",
    )
    hybrid.add_argument("--cloud-cost", type=float, default=2.5, help="price per cloud GPU-hour")
    hybrid.add_argument("--startup", type=float, default=300.0, help="cloud start-up time, s")
    hybrid.add_argument(
        "--value-of-wait",
        type=_values,
        default=[1.0, 10.0],
        help="what an hour of waiting is worth per GPU, comma-separated (default: 1,10)",
    )
    hybrid.add_argument(
        "--idle-release",
        type=float,
        default=600.0,
        help="release a cloud node after this many seconds with no job, s (default: 600)",
    )
    hybrid.add_argument(
        "--budget",
        type=float,
        default=None,
        help="every tenant's monthly cloud budget, in the price's currency (default: none)",
    )
    hybrid.add_argument(
        "--policy", default="ilucid", help="scheduling policy (default: ilucid, the default)"
    )
    hybrid.add_argument("--limit", type=int, default=None, help="first N jobs only (default: all)")
    hybrid.add_argument("--out", type=Path, default=Path("out/hybrid"), help="output directory")


_COLUMNS = (
    ("avg_jct", "mean JCT s", "{:,.0f}"),
    ("p99_queue", "p99 queue s", "{:,.0f}"),
    ("main_gpu_hours", "on-prem GPU-h", "{:,.0f}"),
    (f"{CLOUD_POOL}_gpu_hours", "cloud job GPU-h", "{:,.0f}"),
    (f"{CLOUD_POOL}_node_gpu_hours", "cloud billed GPU-h", "{:,.0f}"),
    ("cloud_cost", "cloud cost", "{:,.0f}"),
    ("jct_gain_share", "of always-on JCT gain", "{:.0%}"),
    ("cost_share", "of always-on cost", "{:.0%}"),
    ("power_ups", "node power-ups", "{:,}"),
    ("wall_s", "wall s", "{:.1f}"),
)


def _against_always_on(runs: list[HybridRun]) -> None:
    """Each burst run's JCT gain and cost as shares of the always-on baseline's."""
    by_label = {run.label: run.summary for run in runs}
    base = by_label.get("on-prem only")
    always = by_label.get("always-on cloud")
    if base is None or always is None:
        return
    gain = base["avg_jct"] - always["avg_jct"]
    for run in runs:
        if run.value_of_wait is None:
            continue
        if gain > 0:
            run.summary["jct_gain_share"] = (base["avg_jct"] - run.summary["avg_jct"]) / gain
        if always["cloud_cost"] > 0:
            run.summary["cost_share"] = run.summary["cloud_cost"] / always["cloud_cost"]


def _run(args: argparse.Namespace) -> int:
    trace = trace_or_generated(args.trace, "itp-04", limit=args.limit)
    onprem = cluster_for_load(trace.jobs, args.onprem_load or DEFAULT_LOAD)
    cloud_nodes = (
        args.cloud_nodes if args.cloud_nodes is not None else max(1, math.ceil(len(onprem) / 4))
    )
    refused = never_placeable(trace.jobs, onprem)  # once: it looks at every job
    jobs = [j for j in trace.jobs if j.id not in refused]
    pool = PoolSpec(CLOUD_POOL, args.cloud_cost, args.startup, idle_release_s=args.idle_release)
    budgets = {}
    if args.budget is not None:
        budgets = {t: CloudBudget(limit=args.budget) for t in sorted({j.tenant for j in jobs})}
    print(
        f"hybrid: {trace.name} ({len(jobs):,} jobs) on {len(onprem)} on-prem nodes (load"
        f" {args.onprem_load:g}) + {cloud_nodes} cloud nodes at {args.cloud_cost:g}/GPU-h,"
        f" {args.startup:g} s start-up, released after {args.idle_release:g} s idle;"
        f" policy {args.policy}"
    )
    scenarios = hybrid_scenarios(onprem, cloud_nodes, pool, args.value_of_wait, budgets)
    runs = run_hybrid(jobs, scenarios, args.policy)
    _against_always_on(runs)
    print_table(
        ["run"] + [title for _, title, _ in _COLUMNS],
        [
            [run.label] + [format_cell(run.summary.get(key), fmt) for key, _, fmt in _COLUMNS]
            for run in runs
        ],
    )
    args.out.mkdir(parents=True, exist_ok=True)
    summary = {
        run.label: {k: v for k, v in run.summary.items() if not isinstance(v, float) or v == v}
        for run in runs
    }
    (args.out / "hybrid.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"wrote {args.out / 'hybrid.json'}")
    return 0


COMMANDS = (
    Command(
        "hybrid",
        "on-prem cluster plus a paid cloud pool: JCT and cost at values of waiting time",
        _add_arguments,
        _run,
    ),
)
