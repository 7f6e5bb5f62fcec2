"""Does a profile beat a static partition on training JCT robustly, or by accident of one run?

Issue #4's scenario (a) on ITP cluster04 (or ``--trace philly``) + Alibaba DLRM
services (10% of the GPUs), replayed with every training job made ``d`` seconds
longer (d = 0..5 by default): a change far below any estimate's error that
reshuffles the order of events, under ``--policy`` (the default profile, or
tiered). The static partition is sized once, to the profile's inference p99
at the first d (inference alone decides it, and the shift leaves inference alone).

Both are sweeps (``ilucid sweep``'s engine, on a local Dask cluster of
``--workers`` processes): the profile over the shifts (perturbation ``shift:1``,
seed d = d seconds), then, once its p99 sized the partition,
``static-partition:N`` over the same shifts. For each d it prints both policies'
mean training JCT and their ratio, then how many runs the profile won and the
mean ratio with its 95% interval: one replay of a loaded cluster swings by 10% or
more, so the mean is the figure to trust.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from ilucid.core import RestoreOverhead, SchedulerConfig
from ilucid.studies.mixed import DEFAULT_CHECKPOINT_S, size_static_partition
from ilucid.sweep import (
    Grid,
    Perturbation,
    ResultTable,
    Settings,
    open_client,
    pending_cells,
    run_sweep,
    sweep_report,
)
from ilucid.sweep.cell import cell_jobs
from ilucid.traces import trace_dir

CONFIG = SchedulerConfig(RestoreOverhead(), checkpoint_s=DEFAULT_CHECKPOINT_S)
PARAMS = "dlrm-10pct"


def _sweep(grid: Grid, table: ResultTable, client: Any) -> None:
    todo = pending_cells(grid.cells(), table)
    outcome = run_sweep(todo, table, client)
    for cell, error in outcome.failed:
        print(f"{cell.label} failed: {error}", file=sys.stderr)
    print(f"[{len(todo)} cells ran in {outcome.wall_s:.0f} s]", file=sys.stderr)


def _figure(table: ResultTable, grid: Grid, figure: str) -> dict[tuple[str, int], float]:
    """(profile, shift) -> the figure, from the table's successful rows of ``grid``."""
    keys = {c.key for c in grid.cells()}
    values = {}
    for row in table.rows():
        key = (row["trace"], row["profile"], row["params"], int(row["seed"]))
        if row["status"] == "ok" and key in keys and row[figure]:
            values[(key[1], key[3])] = float(row[figure])
    return values


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trace", default="itp-04", help="training trace (itp-04)")
    parser.add_argument("--policy", default="ilucid", choices=("ilucid", "tiered"))
    parser.add_argument("--shifts", default="0,1,2,3,4,5", help="seconds added, comma-separated")
    parser.add_argument("--limit", type=int, default=None, help="first N training jobs only")
    parser.add_argument("--workers", type=int, default=2, help="local Dask workers (0: here)")
    parser.add_argument("--scheduler", default=None, help="a Dask scheduler's address")
    parser.add_argument("--out", type=Path, default=None, help="result table (resumed)")
    args = parser.parse_args()
    if trace_dir() is None:
        print("bench/mixed_robustness.py needs ILUCID_TRACE_DIR", file=sys.stderr)
        return 2
    shifts = tuple(int(d) for d in args.shifts.split(","))
    # sized as `ilucid study mixed` sizes it (bench/mixed.py): 73 x 8 GPUs for itp-04
    settings = Settings(
        limit=args.limit,
        checkpoint_s=DEFAULT_CHECKPOINT_S,
        inference="alibaba-dlrm",
        inference_share=0.10,
    )
    shift = Perturbation("shift", 1.0)
    profile = Grid((args.trace,), (args.policy,), shifts, {PARAMS: settings}, shift)
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-robustness-")) / "robustness.csv"
    table = ResultTable(out)
    with open_client(args.workers, args.scheduler) as client:
        _sweep(profile, table, client)
        first = profile.cells()[0]
        target = _figure(table, profile, "p99_tts")[(args.policy, shifts[0])]
        jobs, cluster = cell_jobs(first)
        nodes, _ = size_static_partition(jobs, cluster, target, CONFIG)
        static_name = f"static-partition:{nodes}"
        both = Grid((args.trace,), (args.policy, static_name), shifts, {PARAMS: settings}, shift)
        _sweep(both, table, client)
    jct = _figure(table, both, "avg_jct_training")
    print(f"{args.trace} + DLRM; static partition: {nodes} nodes (inference p99 {target:.0f} s)")
    print(f"d s   {args.policy + ' JCT s':>12}   static JCT s   ratio")
    ratios = []
    for d in shifts:
        tested, static = jct[(args.policy, d)], jct[(static_name, d)]
        ratios.append(tested / static)
        print(f"{d:<5} {tested:>12,.0f}   {static:>12,.0f}   {ratios[-1]:5.3f}")
    wins = sum(r < 1.0 for r in ratios)
    (row,) = [
        r
        for r in sweep_report(table.rows(), both.cells(), ["avg_jct_training"], static_name)
        if r.profile == args.policy
    ]
    assert row.ratio is not None
    interval = "" if row.ratio.n < 2 else f" +- {row.ratio.half_width:.3f} (95%)"
    print(
        f"{args.policy} lower in {wins} of {len(shifts)} runs;"
        f" mean ratio {row.ratio.mean:.3f}{interval}"
    )
    print(f"rows in {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
