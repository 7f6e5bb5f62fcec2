"""Policy benchmark (issues #3 and #15): mean JCT and p99.9 queueing against Tiresias and SRTF.

Run with ``make bench-policies`` (needs ``ILUCID_TRACE_DIR``). A sweep (the engine
of ``ilucid sweep``, on a local Dask cluster of ``--workers`` processes or
``--scheduler``'s) replays each trace at its convention size under fifo, qssf,
tiresias, srtf, lucid, estimate-srtf and the default profile ``ilucid``, over
``--seeds`` perturbations of the durations (default: 0, the trace itself). It
prints each policy's mean over seeds and its ratios to the baselines, paired seed
by seed, then the default profile's verdict against issue #15's goals: mean JCT
<= 1.15 x SRTF everywhere and <= 0.9 x Tiresias where SRTF <= 0.8 x Tiresias;
p99.9 queueing <= Tiresias on at least 4 traces and <= 2 x Tiresias on all.
``--loads`` adds a sweep of offered load on one trace.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

from ilucid.sweep import (
    Grid,
    ResultTable,
    Settings,
    open_client,
    parse_seeds,
    pending_cells,
    run_sweep,
    sweep_report,
)

POLICIES = ("fifo", "qssf", "tiresias", "srtf", "lucid", "estimate-srtf", "ilucid")
DEFAULT = "ilucid"
FIGURES = ("avg_jct", "p999_queue", "wall_s", "jobs", "cluster_nodes")


def _figures(table: ResultTable, grid: Grid, baseline: str) -> dict[tuple[str, str, str], Any]:
    """(trace, parameter set, profile, figure) -> the report row (mean over seeds, paired
    ratio to ``baseline``)."""
    rows = sweep_report(table.rows(), grid.cells(), FIGURES, baseline)
    return {(r.trace, r.params, r.profile, r.metric): r for r in rows}


def _print_tables(label: str, table: ResultTable, grid: Grid) -> list[dict[str, object]]:
    to_tiresias = _figures(table, grid, "tiresias")
    to_srtf = _figures(table, grid, "srtf")
    verdicts = []
    for trace in grid.traces:
        for params, settings in grid.parameters.items():

            def mean(profile: str, figure: str, p: str = params, t: str = trace) -> float:
                return float(to_tiresias[(t, p, profile, figure)].value.mean)

            def paired(
                ratios: dict[Any, Any], profile: str, figure: str, p: str = params, t: str = trace
            ) -> float:
                row = ratios[(t, p, profile, figure)]
                return 1.0 if row.ratio is None else float(row.ratio.mean)

            seeds = to_tiresias[(trace, params, "fifo", "avg_jct")].value.n
            print(
                f"\n{label}: {trace}, {mean('fifo', 'jobs'):,.0f} jobs,"
                f" {mean('fifo', 'cluster_nodes'):.0f} x 8 GPUs, load {settings.load:g},"
                f" mean of {seeds} seed(s)"
            )
            print(
                f"{'policy':14} {'mean JCT s':>11} {'/tiresias':>9} {'/srtf':>6}"
                f" {'p99.9 queue s':>14} {'/tiresias':>9} {'wall s':>7}"
            )
            tail_base = max(1.0, mean("tiresias", "p999_queue"))
            for name in grid.profiles:
                print(
                    f"{name:14} {mean(name, 'avg_jct'):>11,.0f}"
                    f" {paired(to_tiresias, name, 'avg_jct'):>9.3f}"
                    f" {paired(to_srtf, name, 'avg_jct'):>6.3f}"
                    f" {mean(name, 'p999_queue'):>14,.0f}"
                    f" {mean(name, 'p999_queue') / tail_base:>9.2f}"
                    f" {mean(name, 'wall_s'):>7.1f}",
                    flush=True,
                )
            jct_srtf = paired(to_srtf, DEFAULT, "avg_jct")
            jct_tir = paired(to_tiresias, DEFAULT, "avg_jct")
            tail = mean(DEFAULT, "p999_queue") / tail_base
            strict = paired(to_tiresias, "srtf", "avg_jct") <= 0.8
            ok_jct = jct_srtf <= 1.15 and (not strict or jct_tir <= 0.9)
            print(
                f"default profile: {jct_srtf:.3f} x srtf (goal <= 1.15), {jct_tir:.3f} x tiresias"
                + (" (goal <= 0.9: srtf <= 0.8 x tiresias here)" if strict else "")
                + f"; p99.9 queueing {tail:.2f} x tiresias;"
                f" mean JCT goal {'met' if ok_jct else 'MISSED'}"
            )
            verdicts.append({"trace": trace, "jct_ok": ok_jct, "tail": tail})
    return verdicts


def _sweep(grid: Grid, table: ResultTable, client: Any) -> None:
    todo = pending_cells(grid.cells(), table)
    outcome = run_sweep(todo, table, client)
    print(
        f"[{len(grid.cells())} cells, {len(todo)} run in {outcome.wall_s:.0f} s]", file=sys.stderr
    )
    for cell, error in outcome.failed:
        print(f"  {cell.label} failed: {error}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default="philly,itp-01,itp-02,itp-03,itp-04,itp-05")
    parser.add_argument("--sweep-trace", default="itp-04")
    parser.add_argument("--loads", default="", help="offered loads to sweep, e.g. 0.6,0.8,1.0")
    parser.add_argument("--limit", type=int, default=None, help="first N jobs of each trace")
    parser.add_argument("--seeds", default="0", help="perturbation seeds, e.g. 0 or 1-6")
    parser.add_argument("--workers", type=int, default=2, help="local Dask workers (0: here)")
    parser.add_argument("--scheduler", default=None, help="a Dask scheduler's address")
    parser.add_argument("--out", type=Path, default=None, help="result table (resumed)")
    args = parser.parse_args()
    if not os.environ.get("ILUCID_TRACE_DIR"):
        print("set ILUCID_TRACE_DIR to the public traces (e.g. ../shared/traces)", file=sys.stderr)
        return 2
    warnings.filterwarnings("ignore")
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-policies-")) / "policies.csv"
    table = ResultTable(out)
    seeds = parse_seeds(args.seeds)
    grids = [
        Grid(
            tuple(t for t in args.traces.split(",") if t),
            POLICIES,
            seeds,
            {"load-0.85": Settings(load=0.85, limit=args.limit)},
        )
    ]
    loads = [float(x) for x in args.loads.split(",") if x]
    if loads:
        parameters = {f"load-{x:g}": Settings(load=x, limit=args.limit) for x in loads}
        grids.append(Grid((args.sweep_trace,), POLICIES, seeds, parameters))
    with open_client(args.workers, args.scheduler) as client:
        _sweep(grids[0], table, client)
        verdicts = _print_tables("convention size", table, grids[0])
        tails = [float(str(v["tail"])) for v in verdicts]
        print(
            f"\ndefault profile over {len(verdicts)} traces: mean JCT goal met on"
            f" {sum(bool(v['jct_ok']) for v in verdicts)}; p99.9 queueing <= tiresias on"
            f" {sum(t <= 1.0 for t in tails)} (goal >= 4), <= 2 x tiresias on"
            f" {sum(t <= 2.0 for t in tails)} (goal: all)"
        )
        if loads:
            _sweep(grids[1], table, client)
            _print_tables("load sweep", table, grids[1])
    print(f"\nrows in {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
