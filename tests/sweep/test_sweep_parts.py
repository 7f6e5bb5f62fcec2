"""Perturbations, the result table and the report's statistics, each on its own."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest

from ilucid.core import JobSpec
from ilucid.sweep import (
    COLUMNS,
    Cell,
    Perturbation,
    ResultTable,
    TableError,
    estimate,
    perturb,
    sweep_report,
)
from ilucid.sweep.report import t_quantile


def jobs(count: int) -> list[JobSpec]:
    return [JobSpec(f"j{i}", float(i), 1 + i % 4, 600.0 + 37 * i) for i in range(count)]


def test_a_seed_is_one_fixed_perturbation_whatever_the_job_order() -> None:
    original = jobs(200)
    jitter = Perturbation("jitter", 0.05)
    once = {j.id: j.duration for j in perturb(original, 3, jitter)}
    again = {j.id: j.duration for j in perturb(list(reversed(original)), 3, jitter)}
    assert once == again
    other = {j.id: j.duration for j in perturb(original, 4, jitter)}
    assert sum(once[k] != other[k] for k in once) > 190
    ratios = [once[j.id] / j.duration for j in original]
    assert all(0.95 <= r < 1.05 for r in ratios)
    assert 0.98 < statistics.mean(ratios) < 1.02  # centred on the trace
    assert perturb(original, 0, jitter) == original
    assert [j.submit_time for j in perturb(original, 3, jitter)] == [
        j.submit_time for j in original
    ]


def test_shift_adds_seed_times_scale_seconds() -> None:
    shifted = perturb(jobs(5), 3, Perturbation("shift", 2.0))
    assert [j.duration for j in shifted] == [j.duration + 6.0 for j in jobs(5)]


def test_the_table_keeps_floats_exactly_and_survives_a_cut_line(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    table = ResultTable(path)
    value = 0.1 + 0.2  # not 0.3: written with repr, read back the same
    table.append(
        {
            "trace": "a",
            "profile": "fifo",
            "params": "default",
            "seed": 1,
            "status": "ok",
            "avg_jct": value,
        }
    )
    with path.open("a", encoding="utf-8") as handle:
        handle.write("a,srtf,default,1,jitter")  # a row a crash cut short
    assert list(table.finished()) == [("a", "fifo", "default", 1)]
    table.append(
        {
            "trace": "a",
            "profile": "srtf",
            "params": "default",
            "seed": 1,
            "status": "ok",
            "avg_jct": 2.5,
        }
    )
    rows = list(table.rows())
    assert [r["profile"] for r in rows] == ["fifo", "srtf"]
    assert float(rows[0]["avg_jct"]) == value
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == ",".join(COLUMNS) and len(lines) == 4


def test_a_table_of_other_columns_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.csv"
    path.write_text("job_id,submit\n1,2\n", encoding="utf-8")
    with pytest.raises(TableError, match=r"other.csv:1: header"):
        list(ResultTable(path).rows())
    with pytest.raises(TableError, match=r"\.csv"):
        ResultTable(tmp_path / "t.parquet")


def test_the_interval_is_students_t() -> None:
    e = estimate([1.0, 2.0, 3.0])  # sd 1, n 3: 4.303 / sqrt(3)
    assert e.mean == 2.0 and e.n == 3
    assert e.half_width == pytest.approx(4.303 / math.sqrt(3))
    assert math.isnan(estimate([5.0]).half_width)
    assert t_quantile(30) == pytest.approx(2.042)
    assert t_quantile(60) == pytest.approx(2.000, abs=0.003)
    assert t_quantile(1000) == pytest.approx(1.962, abs=0.002)


def test_ratios_are_paired_seed_by_seed() -> None:
    def row(profile: str, seed: int, jct: float) -> dict[str, str]:
        return {
            "trace": "t",
            "profile": profile,
            "params": "default",
            "seed": str(seed),
            "status": "ok",
            "avg_jct": repr(jct),
        }

    # seeds move both profiles a lot; b is always exactly 0.8 x a
    rows = [row("a", s, 1000.0 * s) for s in (1, 2, 3)] + [
        row("b", s, 800.0 * s) for s in (1, 2, 3)
    ]
    rows.append({**row("b", 4, 1.0), "status": "failed"})
    cells = [Cell("t", p, "default", s) for p in ("a", "b") for s in (1, 2, 3, 4)]
    report = sweep_report(rows, cells, ["avg_jct"], "a")
    a, b = report
    assert a.ratio is None and a.value.mean == 2000.0 and a.value.n == 3
    assert b.ratio is not None and b.ratio.n == 3
    assert b.ratio.mean == pytest.approx(0.8) and b.ratio.half_width == pytest.approx(
        0.0, abs=1e-12
    )
    assert b.value.half_width > 1000  # the unpaired interval is wide
