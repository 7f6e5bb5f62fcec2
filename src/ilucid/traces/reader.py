"""CSV reading with errors that name the file, line and field at fault."""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator, Sequence
from pathlib import Path

__all__ = ["Row", "TraceError", "read_rows"]


class TraceError(ValueError):
    """A trace file is malformed; the message is one line naming file, line and field."""

    def __init__(self, path: Path | str, line: int | None, field: str | None, problem: str) -> None:
        self.path = str(path)
        self.line = line
        self.field = field
        where = self.path if line is None else f"{self.path}:{line}"
        what = f" field '{field}':" if field else ""
        super().__init__(f"{where}:{what} {problem}")


class Row:
    """One CSV record with typed accessors that raise :class:`TraceError`."""

    __slots__ = ("_path", "line", "values")

    def __init__(self, path: Path, line: int, values: dict[str, str]) -> None:
        self._path = path
        self.line = line
        self.values = values

    def text(self, name: str, default: str | None = None) -> str:
        value = self.values.get(name)
        if value is None or value == "":
            if default is not None:
                return default
            raise TraceError(self._path, self.line, name, "is empty")
        return value

    def number(self, name: str, minimum: float | None = 0.0) -> float:
        raw = self.values.get(name)
        if raw is None or raw.strip() == "":
            raise TraceError(self._path, self.line, name, "is empty; expected a number")
        try:
            value = float(raw)
        except ValueError:
            raise TraceError(
                self._path, self.line, name, f"expected a number, got {raw!r}"
            ) from None
        if math.isnan(value) or math.isinf(value):
            raise TraceError(self._path, self.line, name, f"expected a finite number, got {raw!r}")
        if minimum is not None and value < minimum:
            raise TraceError(self._path, self.line, name, f"must be >= {minimum:g}, got {raw!r}")
        return value

    def optional_number(self, name: str, minimum: float | None = 0.0) -> float | None:
        raw = self.values.get(name)
        if raw is None or raw.strip() == "":
            return None
        return self.number(name, minimum)

    def integer(self, name: str, minimum: int | None = 0) -> int:
        value = self.number(name, None if minimum is None else float(minimum))
        if value != int(value):
            raise TraceError(
                self._path, self.line, name, f"expected a whole number, got {self.values[name]!r}"
            )
        return int(value)

    def error(self, name: str | None, problem: str) -> TraceError:
        return TraceError(self._path, self.line, name, problem)


def read_rows(path: Path, required: Sequence[str]) -> Iterator[Row]:
    """Yield rows of a CSV whose header has every ``required`` column.

    A leading ``#`` on the header (as in the RFold Philly file) is ignored and
    column names are stripped of spaces.
    """
    try:
        handle = path.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise TraceError(path, None, None, f"cannot open: {exc.strerror}") from None
    with handle:
        reader = csv.reader(handle)
        try:
            header = next(reader)
        except StopIteration:
            raise TraceError(path, 1, None, "file is empty; expected a header line") from None
        except csv.Error as exc:
            raise TraceError(path, 1, None, f"not valid CSV: {exc}") from None
        names = [h.strip().lstrip("#").strip() for h in header]
        missing = [c for c in required if c not in names]
        if missing:
            raise TraceError(
                path, 1, missing[0], f"missing column; the header has {', '.join(names)}"
            )
        width = len(names)
        try:
            for record in reader:
                line = reader.line_num
                if not record or all(not cell.strip() for cell in record):
                    continue
                if len(record) != width:
                    raise TraceError(
                        path, line, None, f"has {len(record)} fields, the header has {width}"
                    )
                yield Row(path, line, dict(zip(names, record, strict=True)))
        except csv.Error as exc:
            raise TraceError(path, reader.line_num, None, f"not valid CSV: {exc}") from None
