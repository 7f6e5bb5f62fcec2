"""``ilucid sweep`` on a 2-worker LocalCluster: the figures of sequential runs, resumable,
and a failing cell reported and retried once without sinking the sweep."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from sweep_helpers import SweepRun, figures, run_sweep_cli, write_trace

from ilucid.cli import main
from ilucid.sweep import METRICS, Cell, ResultTable, Settings, SweepEvent, run_sweep

pytestmark = pytest.mark.xdist_group("dask")

#: two profiles x the trace itself and one perturbation, on 4 nodes (a long queue)
GRID = ["--policy", "fifo,srtf", "--seeds", "0,1", "--nodes", "4", "--baseline", "fifo"]


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(write_trace(tmp_path_factory.mktemp("trace") / "jobs.csv", jobs=300))


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory: pytest.TempPathFactory, trace: str) -> tuple[Path, SweepRun]:
    """One sweep on a 2-worker LocalCluster; one of its traces does not exist."""
    folder = tmp_path_factory.mktemp("local")
    out = folder / "dask.csv"
    traces = f"{trace},{folder / 'no-such-trace.csv'}"
    return out, run_sweep_cli(["--traces", traces, *GRID, "--workers", "2", "--out", str(out)])


def test_cells_on_workers_equal_the_same_cells_run_one_after_another(
    local_sweep: tuple[Path, SweepRun], trace: str, tmp_path: Path
) -> None:
    out, _ = local_sweep
    sequential = tmp_path / "seq.csv"
    run = run_sweep_cli(["--traces", trace, *GRID, "--workers", "0", "--out", str(sequential)])
    assert run.code == 0, run.stderr
    on_dask = {k: v for k, v in figures(out).items() if k[0] == trace}
    assert len(on_dask) == 4
    assert on_dask == figures(sequential)  # every figure, to the last digit
    workers = {r["worker"] for r in ResultTable(out).rows() if r["status"] == "ok"}
    assert all(not w.endswith(f":{os.getpid()}") for w in workers)  # not this process
    perturbed = {k[1]: v["avg_jct"] for k, v in on_dask.items() if k[3] == 1}
    unperturbed = {k[1]: v["avg_jct"] for k, v in on_dask.items() if k[3] == 0}
    assert perturbed != unperturbed  # seed 1 is another trace


def test_seed_zero_is_what_ilucid_simulate_reports(
    local_sweep: tuple[Path, SweepRun], trace: str, tmp_path: Path
) -> None:
    out, _ = local_sweep
    simulate = ["simulate", "--trace", trace, "--nodes", "4", "--policy", "fifo,srtf"]
    assert main([*simulate, "--processes", "1", "--out", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    rows = figures(out)
    for profile in ("fifo", "srtf"):
        row = rows[(trace, profile, "default", 0)]
        for metric in METRICS:
            if row[metric] != "":
                assert float(row[metric]) == summary[profile][metric], metric


def test_a_failing_cell_is_retried_once_reported_and_the_rest_finish(
    local_sweep: tuple[Path, SweepRun],
) -> None:
    out, run = local_sweep
    assert run.code == 1
    assert run.stderr.count("no-such-trace.csv fifo seed 0 failed:") == 1
    assert "retrying once" in run.stderr
    assert "no-such-trace.csv fifo seed 0 failed again" in run.stderr
    assert "4 cells failed twice" in run.stderr
    failed = [r for r in ResultTable(out).rows() if r["status"] == "failed"]
    assert len(failed) == 4 and {r["attempts"] for r in failed} == {"2"}
    assert all("no-such-trace.csv" in r["error"] for r in failed)
    assert len(figures(out)) == 4  # every cell of the real trace finished
    report = run.stdout.split("mean over seeds")[1]
    assert "jobs.csv" in report and "srtf" in report


def test_a_rerun_skips_finished_cells_and_runs_the_rest(
    local_sweep: tuple[Path, SweepRun], trace: str, tmp_path: Path
) -> None:
    out = tmp_path / "resumed.csv"
    shutil.copy(local_sweep[0], out)
    lines = out.read_text(encoding="utf-8").splitlines(keepends=True)
    dropped = next(i for i, line in enumerate(lines) if line.startswith(f"{trace},srtf,default,1,"))
    out.write_text("".join(lines[:dropped] + lines[dropped + 1 :]), encoding="utf-8")
    before = {k: v for k, v in figures(local_sweep[0]).items() if k[0] == trace}
    grid = ["--traces", trace, *GRID, "--workers", "0", "--out", str(out)]
    run = run_sweep_cli(grid)
    assert run.code == 0, run.stderr
    assert "3 already in" in run.stdout and "1 to run" in run.stdout
    assert "sweep: 1 cells ran" in run.stdout
    assert figures(out) == before  # the one cell ran again, to the same figures
    size = out.stat().st_size
    again = run_sweep_cli(grid)
    assert "4 already in" in again.stdout and "0 to run" in again.stdout
    assert out.stat().st_size == size


def test_a_cell_that_fails_once_succeeds_on_its_retry(tmp_path: Path) -> None:
    trace = tmp_path / "late.csv"  # appears only after the first attempt failed
    events: list[SweepEvent] = []

    def on_event(event: SweepEvent) -> None:
        events.append(event)
        if event.kind == "retry":
            trace.write_text("id,submit_time,num_gpus,duration\na,0,1,60\nb,5,2,120\n")

    table = ResultTable(tmp_path / "t.csv")
    cells = [Cell(str(trace), "fifo", "default", 0, Settings(nodes=1))]
    # in this process: the retry's resubmission to Dask is the failing-trace test's
    outcome = run_sweep(cells, table, None, on_event)
    assert [e.kind for e in events] == ["retry", "done"]
    assert events[0].error is not None and "late.csv" in events[0].error
    assert outcome.done == 1 and not outcome.failed
    (row,) = table.rows()
    assert row["status"] == "ok" and row["attempts"] == "2" and row["jobs"] == "2"
