"""``ilucid study fragmentation``: best-fit vs worst-fit vs fragmentation-aware packing
(issue 5)."""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ilucid.cli.common import Command, say_generated
from ilucid.cli.progress import ProgressDisplay
from ilucid.cli.tables import print_table
from ilucid.core.fractional import POLICIES
from ilucid.sim.forked import forked_map
from ilucid.studies.fragmentation import PackingOutcome, inflate, never_fits
from ilucid.studies.generated import write_generated_share
from ilucid.traces import TraceError, trace_dir
from ilucid.traces.formats import load_alibaba_share

__all__ = ["COMMANDS"]

ALIBABA_DIR = "alibaba-gpu-v2023"
NODES_FILE = "openb_node_list_gpu_node.csv"
DEFAULT_VARIANTS = "default,gpushare100,gpuspec33"


def _add_arguments(frag: argparse.ArgumentParser) -> None:
    frag.add_argument(
        "--variants",
        default=DEFAULT_VARIANTS,
        help="pod lists openb_pod_list_<variant>.csv: default, gpushare20..100,"
        " gpuspec05..33, or 'all'",
    )
    frag.add_argument("--nodes", type=Path, help="node list (default: the trace's GPU nodes)")
    frag.add_argument(
        "--pods", type=Path, help="one pod list instead of --variants (default: --variants)"
    )
    frag.add_argument("--until", type=float, default=1.0, help="requests / capacity to stop at")
    frag.add_argument(
        "--out", type=Path, default=Path("out/fragmentation"), help="output directory"
    )


def _variant_files(args: argparse.Namespace) -> tuple[list[tuple[str, Path]], Path]:
    if args.pods is not None:
        if args.nodes is None:
            raise ValueError("--pods needs --nodes")
        return [(args.pods.stem, args.pods)], args.nodes
    directory = trace_dir()
    if directory is None:
        if args.nodes is not None:
            raise ValueError("--nodes needs --pods (or ILUCID_TRACE_DIR for --variants)")
        pods, nodes, how = write_generated_share(args.out / "generated")
        say_generated(how)
        return [("generated", pods)], nodes
    folder = directory / ALIBABA_DIR
    if args.variants == "all":
        files = sorted(folder.glob("openb_pod_list_*.csv"))
        pairs = [(f.stem.removeprefix("openb_pod_list_"), f) for f in files]
    else:
        pairs = [
            (v, folder / f"openb_pod_list_{v}.csv") for v in args.variants.split(",") if v.strip()
        ]
    for name, path in pairs:
        if not path.exists():
            raise TraceError(path, None, None, f"variant {name!r} not found")
    return pairs, args.nodes or folder / NODES_FILE


def _run(task: tuple[str, Path, Path, str, float]) -> tuple[str, PackingOutcome, int]:
    variant, pods_path, nodes_path, policy, until = task
    pods, nodes = load_alibaba_share(pods_path, nodes_path)
    left_out = sum(1 for p in pods if never_fits(p, nodes))
    return variant, inflate(pods, nodes, policy, until), left_out


def _fragmentation(args: argparse.Namespace) -> int:
    pairs, nodes_path = _variant_files(args)
    tasks = [(v, path, nodes_path, policy, args.until) for v, path in pairs for policy in POLICIES]
    workers = min(len(tasks), os.cpu_count() or 1)
    print(f"packing {len(pairs)} pod list(s) x {len(POLICIES)} policies on {nodes_path.name}")
    results = []
    with ProgressDisplay([f"{len(tasks)} packings"], what="packed") as progress:
        if workers > 1:
            for result in forked_map(_run, tasks, workers):
                results.append(result)
                progress.update([len(results) / len(tasks)])
        else:
            for task in tasks:
                results.append(_run(task))
                progress.update([len(results) / len(tasks)])
    print_table(
        (
            "variant",
            "policy",
            "allocated",
            "unalloc GPUs",
            "at 1st fail",
            "1st fail at",
            "failed pods",
            "wall s",
        ),
        [
            (
                variant,
                outcome.policy,
                f"{outcome.allocated_share:.2%}",
                f"{outcome.unallocated_end:,.1f}",
                f"{outcome.first_failure_unallocated:,.1f}",
                f"{outcome.first_failure_requested:.1%}",
                f"{outcome.pods_failed:,}",
                f"{outcome.wall_s:.1f}",
            )
            for variant, outcome, _ in results
        ],
        align="llrrrrrr",
    )
    table: dict[str, dict[str, Any]] = {}
    for variant, outcome, left_out in results:
        row = asdict(outcome)
        row.update(
            allocated_share=outcome.allocated_share,
            unallocated_end=outcome.unallocated_end,
            never_fit=left_out,
        )
        table.setdefault(variant, {})[outcome.policy] = row
    for variant, rows in table.items():
        fgd_first = rows["fgd"]["first_failure_unallocated"]
        best_first = rows["best-fit"]["first_failure_unallocated"]
        verdict = "fewer" if fgd_first < best_first else "NOT fewer"
        print(
            f"{variant}: fgd leaves {verdict} unallocated GPUs than best-fit at the first"
            f" failure ({fgd_first:,.1f} vs {best_first:,.1f}); when requests reach"
            f" {args.until:g} x capacity {rows['fgd']['unallocated_end']:,.1f}"
            f" vs {rows['best-fit']['unallocated_end']:,.1f}"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "fragmentation.json").write_text(json.dumps(table, indent=2) + "\n")
    print(f"wrote {args.out / 'fragmentation.json'}")
    return 0


COMMANDS = (
    Command(
        "fragmentation",
        "pack Alibaba v2023 pods until full: best-fit vs worst-fit vs fragmentation-aware",
        _add_arguments,
        _fragmentation,
        description="See docs/fragmentation.md. Reads the Alibaba v2023 pod lists in"
        " ILUCID_TRACE_DIR (or --pods/--nodes); with neither, generated pods and nodes.",
    ),
)
