"""The sweep's one result table: a CSV file a row per finished cell, appended as cells end.

Each row is flushed when its cell ends, so a sweep stopped half way (or a lost
machine) keeps what finished, and the next run with the same table skips those
cells. Floats are written with ``repr``, which reads back to the same float: a
row's figures are exactly the replay's. Text a spreadsheet would read as a formula
is written quoted and read back as it was (:mod:`ilucid.traces.csv_cells`).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ilucid.sweep.grid import METRICS, CellKey
from ilucid.traces.csv_cells import formula_safe, restored_cell

__all__ = [
    "COLUMNS",
    "KEY_COLUMNS",
    "RUN_COLUMNS",
    "ResultTable",
    "TableError",
    "row_key",
]

KEY_COLUMNS = ("trace", "profile", "params", "seed")
#: how the cell ran: these differ between two runs of one cell
RUN_COLUMNS = ("status", "attempts", "error", "worker", "elapsed_s", "wall_s")
COLUMNS = (*KEY_COLUMNS, "perturbation", *RUN_COLUMNS, *METRICS)


class TableError(ValueError):
    """A result table this sweep cannot append to; names the file and line."""


def row_key(row: Mapping[str, str]) -> CellKey:
    return (row["trace"], row["profile"], row["params"], int(row["seed"]))


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


class ResultTable:
    """A CSV file of cell rows (``COLUMNS``), read on open and appended to afterwards."""

    def __init__(self, path: Path) -> None:
        if path.suffix.lower() != ".csv":
            raise TableError(f"{path}: the result table is a .csv file")
        self.path = path

    def rows(self) -> Iterator[dict[str, str]]:
        """The complete rows (a last line cut short by a crash is left out)."""
        if not self.path.exists():
            return
        with self.path.open(newline="", encoding="utf-8") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if header is None:
                return
            if tuple(header) != COLUMNS:
                raise TableError(
                    f"{self.path}:1: header: not a sweep table of this version (columns"
                    f" {', '.join(header[:5])}...); give another --out or --fresh"
                )
            for number, cells in enumerate(reader, start=2):
                if len(cells) != len(COLUMNS):
                    continue  # a row cut short by a crash: its cell runs again
                row = dict(zip(COLUMNS, map(restored_cell, cells), strict=True))
                try:
                    row_key(row)
                except ValueError:
                    raise TableError(
                        f"{self.path}:{number}: seed: not a whole number: {row['seed']!r}"
                    ) from None
                yield row

    def finished(self) -> dict[CellKey, dict[str, str]]:
        """The last successful row of each cell."""
        return {row_key(r): r for r in self.rows() if r["status"] == "ok"}

    def append(self, row: Mapping[str, Any]) -> None:
        """Write one row and flush it to disk before the next cell's."""
        fresh = not self.path.exists() or self.path.stat().st_size == 0
        cut_short = False
        if not fresh:
            with self.path.open("rb") as raw:
                raw.seek(-1, os.SEEK_END)
                cut_short = raw.read(1) != b"\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", newline="", encoding="utf-8") as handle:
            if cut_short:  # a line a crash cut short: end it, so this row starts its own
                handle.write("\r\n")
            writer = csv.writer(handle)
            if fresh:
                writer.writerow(COLUMNS)
            writer.writerow(formula_safe(_text(row.get(c)) for c in COLUMNS))
            handle.flush()
            os.fsync(handle.fileno())
