"""Sweeps: a grid of replays (traces x parameter sets x profiles x perturbation seeds) run on
Dask distributed, streamed into one result table, and summarised with confidence intervals.

``ilucid sweep`` (cli/sweep.py) and the benchmarks drive it; docs/sweep.md describes the
grid file and how to reach a cluster.
"""

from ilucid.sweep.cell import CellFailed, run_cell
from ilucid.sweep.engine import (
    MAX_ATTEMPTS,
    SweepEvent,
    SweepOutcome,
    open_client,
    pending_cells,
    run_sweep,
)
from ilucid.sweep.grid import (
    DEFAULT_PARAMS,
    METRICS,
    Cell,
    Grid,
    GridError,
    Perturbation,
    Settings,
    load_grid,
    parse_seeds,
)
from ilucid.sweep.perturb import perturb
from ilucid.sweep.report import ALL_TRACES, Estimate, ReportRow, estimate, sweep_report
from ilucid.sweep.table import COLUMNS, RUN_COLUMNS, ResultTable, TableError

__all__ = [
    "ALL_TRACES",
    "COLUMNS",
    "DEFAULT_PARAMS",
    "MAX_ATTEMPTS",
    "METRICS",
    "RUN_COLUMNS",
    "Cell",
    "CellFailed",
    "Estimate",
    "Grid",
    "GridError",
    "Perturbation",
    "ReportRow",
    "ResultTable",
    "Settings",
    "SweepEvent",
    "SweepOutcome",
    "TableError",
    "estimate",
    "load_grid",
    "open_client",
    "parse_seeds",
    "pending_cells",
    "perturb",
    "run_cell",
    "run_sweep",
    "sweep_report",
]
