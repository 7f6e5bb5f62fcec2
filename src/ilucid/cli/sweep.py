"""``ilucid sweep``: a grid of replays on Dask, one result table, one report."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from ilucid.cli.common import CliError, Command, positive_float, positive_int, printable
from ilucid.cli.progress import CountDisplay
from ilucid.cli.tables import render_table
from ilucid.sweep import (
    ALL_TRACES,
    DEFAULT_PARAMS,
    Estimate,
    Grid,
    Perturbation,
    ReportRow,
    ResultTable,
    SweepEvent,
    load_grid,
    open_client,
    parse_seeds,
    pending_cells,
    run_sweep,
    sweep_report,
)
from ilucid.sweep.cell import resolve_profile
from ilucid.sweep.grid import apply_settings

__all__ = ["COMMANDS", "report_tables"]


def _names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise argparse.ArgumentTypeError("name at least one")
    return names


def _seeds(text: str) -> tuple[int, ...]:
    try:
        return parse_seeds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _perturbation(text: str) -> Perturbation:
    try:
        return Perturbation.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _workers(text: str) -> int:
    return 0 if text.strip() == "0" else positive_int(text)


def _add_grid_arguments(sweep: argparse.ArgumentParser) -> None:
    grid = sweep.add_argument_group("the grid (without a file, --traces and --policy are needed)")
    grid.add_argument(
        "--traces",
        type=_names,
        help="comma-separated traces: names in ILUCID_TRACE_DIR (itp-01, philly...), files,"
        " or 'synthetic' (default: the grid file's)",
    )
    grid.add_argument(
        "--policy",
        type=_names,
        help="comma-separated profiles or profile files (*.toml) (default: the grid file's)",
    )
    grid.add_argument(
        "--seeds",
        type=_seeds,
        help="perturbation seeds, e.g. 1-6 or 0,1,2; 0 is the trace unperturbed"
        " (default: the grid file's, else 0)",
    )
    grid.add_argument(
        "--perturbation",
        type=_perturbation,
        help="how a seed changes durations: jitter:SCALE (each times 1 +- SCALE) or"
        " shift:SECONDS (each plus seed x SECONDS) (default: the grid file's, else jitter:0.01)",
    )


def _add_settings_arguments(sweep: argparse.ArgumentParser) -> None:
    cluster = sweep.add_argument_group("replay settings (applied to every parameter set)")
    cluster.add_argument(
        "--load",
        type=positive_float,
        help="size the cluster for this offered load (default: the trace's node list, else 0.85)",
    )
    cluster.add_argument(
        "--nodes", type=positive_int, help="number of nodes (default: sized by the load)"
    )
    cluster.add_argument(
        "--gpus-per-node",
        type=positive_int,
        help="GPUs per node (default: the grid file's, else 8)",
    )
    cluster.add_argument(
        "--limit", type=positive_int, help="replay only the first N jobs (default: every job)"
    )


def _add_output_arguments(sweep: argparse.ArgumentParser) -> None:
    report = sweep.add_argument_group("the table and the report")
    report.add_argument(
        "--out",
        type=Path,
        help="the result table, a .csv file, resumed if it exists (default: the grid file's,"
        " else sweep.csv)",
    )
    report.add_argument(
        "--fresh", action="store_true", help="delete the table first instead of resuming it"
    )
    report.add_argument(
        "--baseline", help="the profile ratios are paired with (default: the first profile)"
    )
    report.add_argument(
        "--metric",
        type=_names,
        help="comma-separated figures to report (default: the grid file's, else avg_jct)",
    )


def _add_engine_arguments(sweep: argparse.ArgumentParser) -> None:
    engine = sweep.add_argument_group("where cells run")
    engine.add_argument(
        "--workers",
        type=_workers,
        default=2,
        help="worker processes of a local Dask cluster; 0 runs the cells one after another"
        " in this process (default: 2)",
    )
    engine.add_argument(
        "--scheduler",
        help="a running Dask scheduler's address, e.g. tcp://host:8786; --workers is then"
        " ignored; docs/sweep.md: Slurm, Kubernetes (default: none, a local cluster)",
    )


def _add_arguments(sweep: argparse.ArgumentParser) -> None:
    sweep.add_argument(
        "grid",
        nargs="?",
        type=Path,
        help="a grid file (TOML, docs/sweep.md); the flags below override what it says",
    )
    _add_grid_arguments(sweep)
    _add_settings_arguments(sweep)
    _add_output_arguments(sweep)
    _add_engine_arguments(sweep)


def _grid(args: argparse.Namespace) -> Grid:
    overrides = {
        "traces": args.traces,
        "profiles": args.policy,
        "seeds": args.seeds,
        "perturbation": args.perturbation,
        "baseline": args.baseline,
        "metrics": args.metric,
        "out": args.out,
    }
    if args.grid is not None:
        grid = load_grid(args.grid, overrides)
    else:
        if args.traces is None or args.policy is None:
            raise CliError("give a grid file, or --traces and --policy")
        grid = Grid(**{k: v for k, v in overrides.items() if v is not None})
    settings = {
        "load": args.load,
        "nodes": args.nodes,
        "gpus_per_node": args.gpus_per_node,
        "limit": args.limit,
    }
    grid = apply_settings(grid, settings)
    for name in grid.profiles:
        resolve_profile(name)  # a bad name or profile file stops here, before any task
    return grid


def _on_event(progress: CountDisplay) -> Callable[[SweepEvent], None]:
    """Count each cell as it ends; say at once when one fails (retried once, then given up)."""

    def on_event(event: SweepEvent) -> None:
        if event.kind == "retry":
            progress.note(f"sweep: {event.cell.label} failed: {event.error}; retrying once")
            return
        if event.kind == "failed":
            progress.note(f"sweep: {event.cell.label} failed again: {event.error}")
        progress.advance(event.kind == "failed")

    return on_event


def _shown(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.4g}"


def _interval(estimate: Estimate | None, fmt: Callable[[float], str]) -> tuple[str, str]:
    if estimate is None or estimate.n == 0:
        return "-", ""
    if math.isnan(estimate.half_width):
        return fmt(estimate.mean), ""
    return fmt(estimate.mean), f"± {fmt(estimate.half_width)}"


def report_tables(rows: Sequence[ReportRow], baseline: str | None) -> list[str]:
    """One table per figure: per trace (and parameter set) and profile, the mean over seeds
    with its 95% interval and the ratio to the baseline paired seed by seed."""
    tables = []
    for metric in dict.fromkeys(r.metric for r in rows):
        chosen = [r for r in rows if r.metric == metric]
        several = len({r.params for r in chosen if r.trace != ALL_TRACES}) > 1
        body = []
        for r in chosen:
            trace = (
                r.trace
                if not several or r.params in ("", DEFAULT_PARAMS)
                else f"{r.trace} [{r.params}]"
            )
            mean, spread = _interval(r.value, _shown)
            ratio, ratio_spread = _interval(r.ratio, lambda v: f"{v:.3f}")
            seeds = r.value.n if r.trace != ALL_TRACES else (r.ratio.n if r.ratio else 0)
            body.append([trace, r.profile, seeds, mean, spread, ratio, ratio_spread])
        vs = f"/ {baseline}" if baseline else "ratio"
        header = ["trace", "profile", "seeds", f"mean {metric}", "95% CI", vs, "95% CI"]
        tables.append(
            f"{metric}: mean over seeds, ratio paired seed by seed\n"
            + render_table(header, body, align="llrrrrr")
        )
    return tables


def _run(args: argparse.Namespace) -> int:
    grid = _grid(args)
    baseline = grid.baseline or grid.profiles[0]
    out = grid.out or Path("sweep.csv")
    table = ResultTable(out)
    if args.fresh and out.exists():
        out.unlink()
    cells = grid.cells()
    todo = pending_cells(cells, table)
    where = args.scheduler or (
        f"a local Dask cluster of {args.workers} workers" if args.workers else "this process"
    )
    print(
        f"sweep: {len(cells)} cells ({len(grid.traces)} traces x {len(grid.parameters)} parameter"
        f" sets x {len(grid.profiles)} profiles x {len(grid.seeds)} seeds,"
        f" {grid.perturbation.label}); {len(cells) - len(todo)} already in {out};"
        f" {len(todo)} to run on {where}",
        flush=True,
    )
    outcome = None
    if todo:
        try:
            with (
                open_client(args.workers, args.scheduler) as client,
                CountDisplay(len(todo), "sweep", "cells") as bar,
            ):
                outcome = run_sweep(todo, table, client, _on_event(bar))
        except KeyboardInterrupt:
            done = len(pending_cells(cells, ResultTable(out)))
            print(
                f"\nilucid sweep: interrupted; {len(cells) - done} of {len(cells)} cells are in"
                f" {out}: run the same command again to finish the rest",
                file=sys.stderr,
            )
            return 130
        print(
            f"sweep: {outcome.done} cells ran in {outcome.wall_s:.1f} s,"
            f" {len(outcome.failed)} failed; rows in {out}"
        )
    report = sweep_report(table.rows(), cells, grid.metrics, baseline)
    text = "\n\n".join(report_tables(report, baseline))
    print(text)
    out.with_suffix(".report.txt").write_text(text + "\n", encoding="utf-8")
    if outcome is not None and outcome.failed:
        print(f"ilucid sweep: {len(outcome.failed)} cells failed twice:", file=sys.stderr)
        for cell, error in outcome.failed:
            print(f"  {printable(cell.label)}: {printable(error)}", file=sys.stderr)
        return 1
    return 0


COMMANDS = (
    Command(
        "sweep",
        "replay a grid of traces x profiles x perturbation seeds on Dask; mean and 95% CI",
        _add_arguments,
        _run,
        description=(
            "Run every cell of a grid (traces x parameter sets x profiles x perturbation"
            " seeds) as a Dask task, on a local cluster or --scheduler's, writing a row per"
            " cell to --out as cells end; a rerun skips the cells already there. Prints per"
            " profile the mean over seeds with its 95% confidence interval and the ratio to"
            " --baseline paired seed by seed (docs/sweep.md)."
        ),
    ),
)
