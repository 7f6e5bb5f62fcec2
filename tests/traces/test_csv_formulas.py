"""Every CSV ilucid writes is safe to open in a spreadsheet: a text cell starting with
``=``, ``+``, ``-``, ``@``, a tab or a carriage return is written with a leading ``'``
(OWASP), numbers stay numbers, and the files ilucid reads back read as they were
written. Covered: the simulator's ``jobs-<policy>.csv``, a sweep's result table, and
(tests/service/test_history_csv_formulas.py) the service's ``/history.csv``."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from ilucid.cli import main
from ilucid.sweep.table import COLUMNS, ResultTable
from ilucid.traces import load_trace
from ilucid.traces.csv_cells import formula_safe, restored_cell, safe_cell

ROOT = Path(__file__).resolve().parents[2]
FORMULAS = ["=1+2", "+SUM(A1)", "-2+3", "@SUM(A1)", "\t=x", "\r=x", '=HYPERLINK("http://x")']


@pytest.mark.parametrize("text", FORMULAS)
def test_a_formula_cell_gets_a_leading_quote(text: str) -> None:
    assert safe_cell(text) == "'" + text


@pytest.mark.parametrize("value", [-1.5, -1, 0, 2.5, "-1.5", "+3", "-1e-05", "1e5", ".5", "-"])
def test_numbers_stay_numbers(value: object) -> None:
    if value == "-":  # a lone minus is no number: quoted
        assert safe_cell(value) == "'-"
        return
    assert safe_cell(value) is value


@pytest.mark.parametrize(
    "text", [*FORMULAS, "plain", "", "'quoted", "'=x", "''=x", "'-1.5", "-1.5", "-", "'"]
)
def test_what_is_read_back_is_what_was_written(text: str) -> None:
    assert restored_cell(str(safe_cell(text))) == text


def test_a_row_keeps_its_numbers_and_quotes_its_formulas() -> None:
    assert formula_safe(["=cmd", -1.5, 3, None, "ok"]) == ["'=cmd", -1.5, 3, None, "ok"]


def test_the_simulators_jobs_csv_quotes_ids_and_tenants(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    with trace.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "submit_time", "num_gpus", "duration", "job_class", "tenant"])
        writer.writerow(["=cmd|' /C calc'!A0", 0, 1, 100, "training", "+team"])
        writer.writerow(["@j2", 10, 1, 50, "training", "-team"])
        writer.writerow(["j3", 20, 1, 50, "training", "\tteam"])
    argv = ["simulate", "--trace", str(trace), "--policy", "fifo", "--nodes", "1"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 0
    with (tmp_path / "out" / "jobs-fifo.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["job_id"], r["tenant"]) for r in rows] == [
        ("'=cmd|' /C calc'!A0", "'+team"),
        ("'@j2", "'-team"),
        ("j3", "'\tteam"),
    ]
    assert [float(r["submit"]) for r in rows] == [0, 10, 20]  # numbers as they were
    risky = set("=+-@\t\r")
    cells = [cell for r in rows for cell in r.values()]
    assert not [c for c in cells if c[:1] in risky and not re.fullmatch(r"[+-]?[\d.e+-]+", c)]


def test_a_sweep_table_quotes_text_and_reads_it_back(tmp_path: Path) -> None:
    table = ResultTable(tmp_path / "sweep.csv")
    row = {c: "" for c in COLUMNS}
    row.update(trace="=evil()", profile="-x", params="@p", seed=3, status="failed")
    row["error"] = "+oops"
    row["elapsed_s"] = -0.5
    table.append(row)
    with (tmp_path / "sweep.csv").open(newline="", encoding="utf-8") as handle:
        written = next(csv.DictReader(handle))
    assert (written["trace"], written["profile"], written["params"]) == ("'=evil()", "'-x", "'@p")
    assert written["error"] == "'+oops" and written["elapsed_s"] == "-0.5"
    read = next(table.rows())
    assert (read["trace"], read["profile"], read["params"], read["error"]) == (
        "=evil()",
        "-x",
        "@p",
        "+oops",
    )


def test_a_generic_trace_ilucid_wrote_reads_back_unquoted(tmp_path: Path) -> None:
    path = tmp_path / "history.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            ["id", "submit_time", "num_gpus", "duration", "job_class", "tenant", "user"]
        )
        writer.writerow(formula_safe(["=j1", "0.000", 1, "5.000", "training", "@t", "-u"]))
    job = load_trace(str(path)).jobs[0]
    assert (job.id, job.tenant, job.user) == ("=j1", "@t", "-u")


#: how a file writes CSV: the csv module's writers, pandas
_WRITES_CSV = re.compile(r"csv\.writer\(|DictWriter\(|\.to_csv\(")


def test_every_csv_writer_of_the_project_goes_through_the_one_helper() -> None:
    """A new CSV writer in src/ or bench/ must quote formula cells too."""
    writers = []
    for folder in ("src", "bench"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if _WRITES_CSV.search(text):
                writers.append(path.relative_to(ROOT))
                assert "formula_safe(" in text, f"{path}: writes CSV without formula_safe"
    assert {str(p) for p in writers} >= {
        "src/ilucid/cli/simulate.py",
        "src/ilucid/service/history.py",
        "src/ilucid/sweep/table.py",
    }


def _reference_safe_cell(value: object) -> object:
    """The rule as first written, without :func:`formula_safe`'s first-character screen."""
    if isinstance(value, str):
        rest = value.lstrip("'")
        pattern = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
        if rest[:1] in "=+-@\t\r" and rest[:1] and re.fullmatch(pattern, rest) is None:
            return "'" + value
    return value


def test_the_fast_row_path_quotes_exactly_what_the_rule_quotes() -> None:
    """Every text of up to three characters over the characters that matter (formula
    starts, quotes, digits, signs, dots, exponents, letters): same cell, byte for byte."""
    alphabet = "=+-@\t\r'1.eEa "
    texts = ["", *alphabet]
    texts += [a + b for a in alphabet for b in alphabet]
    texts += [a + b + c for a in alphabet for b in alphabet for c in alphabet]
    cells: list[object] = [*texts, 3, -1.5, None, float("-inf")]
    expected = [_reference_safe_cell(cell) for cell in cells]
    assert formula_safe(cells) == expected
    assert [safe_cell(cell) for cell in cells] == expected
    assert sum(1 for a, b in zip(cells, expected, strict=True) if a != b) > 100
