"""CSV reading with errors that name the file, line and field at fault.

Every number a trace states is checked here, at the edge: finite, and within
explicit bounds (below). A replay's cost must follow the trace's events, so a
row such as ``duration = 1e308`` is refused with its file and line rather than
left to stretch the simulated clock.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

__all__ = [
    "MAX_GPUS",
    "MAX_NUMBER",
    "MAX_SECONDS",
    "Row",
    "TraceError",
    "header_names",
    "read_rows",
]

#: Longest duration and latest time (seconds) a trace may state: about 100 years
#: (100 x 365.25 x 86,400 = 3.16e9 s). Still covers Unix-epoch times up to 2071.
MAX_SECONDS = 3.2e9
#: Most GPUs one job, pod, instance or node may state: above any cluster built today.
MAX_GPUS = 100_000
#: Largest magnitude of any other number: past 2**53 a float no longer holds whole numbers.
MAX_NUMBER = float(2**53)

_SECONDS_NOTE = " (about 100 years)"


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

    def number(
        self, name: str, minimum: float | None = 0.0, maximum: float = MAX_NUMBER, unit: str = ""
    ) -> float:
        """A finite number in ``[minimum, maximum]`` (``[-maximum, maximum]`` without minimum)."""
        raw = self.values.get(name)
        if raw is None or raw.strip() == "":
            raise TraceError(self._path, self.line, name, "is empty; expected a number")
        try:
            value = float(raw)
        except ValueError:
            raise TraceError(
                self._path, self.line, name, f"expected a number, got {raw!r}"
            ) from None
        return self.bounded(name, value, minimum, maximum, raw=raw, unit=unit)

    def bounded(
        self,
        name: str,
        value: float,
        minimum: float | None = 0.0,
        maximum: float = MAX_NUMBER,
        raw: str | None = None,
        unit: str = "",
    ) -> float:
        """Refuse NaN, infinities and values outside the bounds; ``unit`` labels the message."""
        shown = repr(raw) if raw is not None else f"{value:g}"
        if math.isnan(value) or math.isinf(value):
            raise TraceError(self._path, self.line, name, f"expected a finite number, got {shown}")
        if minimum is not None and value < minimum:
            raise TraceError(self._path, self.line, name, f"must be >= {minimum:g}, got {shown}")
        low = -maximum if minimum is None else minimum
        if not low <= value <= maximum:
            note = _SECONDS_NOTE if maximum == MAX_SECONDS else ""
            raise TraceError(
                self._path,
                self.line,
                name,
                f"{value:g}{unit} is beyond the limit of {maximum:g}{unit}{note}",
            )
        return value

    def optional_number(
        self, name: str, minimum: float | None = 0.0, maximum: float = MAX_NUMBER
    ) -> float | None:
        raw = self.values.get(name)
        if raw is None or raw.strip() == "":
            return None
        return self.number(name, minimum, maximum)

    def seconds(self, name: str) -> float:
        """A duration or time: finite, non-negative, at most :data:`MAX_SECONDS`."""
        return self.number(name, 0.0, MAX_SECONDS, " s")

    def optional_seconds(self, name: str) -> float | None:
        raw = self.values.get(name)
        if raw is None or raw.strip() == "":
            return None
        return self.seconds(name)

    def integer(self, name: str, minimum: int | None = 0, maximum: float = MAX_NUMBER) -> int:
        value = self.number(name, None if minimum is None else float(minimum), maximum)
        if value != int(value):
            raise TraceError(
                self._path, self.line, name, f"expected a whole number, got {self.values[name]!r}"
            )
        return int(value)

    def gpus(self, name: str) -> int:
        """A GPU count: a whole number in ``0..MAX_GPUS``."""
        return self.integer(name, 0, MAX_GPUS)

    def error(self, name: str | None, problem: str) -> TraceError:
        return TraceError(self._path, self.line, name, problem)


def _open(path: Path) -> IO[str]:
    try:
        return path.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise TraceError(path, None, None, f"cannot open: {exc.strerror}") from None


def _checked_lines(path: Path, handle: IO[str]) -> Iterator[str]:
    """The file's lines; a NUL character (a binary file, not a CSV) is refused with its line."""
    for number, line in enumerate(handle, 1):
        if "\x00" in line:
            raise TraceError(
                path, number, None, "contains a NUL byte: a binary file, not a CSV trace"
            )
        yield line


def _undecodable(path: Path, exc: UnicodeDecodeError) -> TraceError:
    """Locate the first byte that is not UTF-8: text decoding reads ahead in blocks, so
    the line the decoder was on is not the line at fault; UTF-8 never uses byte 0x0A
    inside a character, so decoding line by line finds the exact place."""
    offset = 0
    try:
        with path.open("rb") as raw:
            for number, line in enumerate(raw, 1):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError as bad:
                    byte = line[bad.start]
                    return TraceError(
                        path,
                        number,
                        None,
                        f"byte 0x{byte:02x} at offset {offset + bad.start} is not UTF-8"
                        " (a binary file, or text in another encoding such as Latin-1?);"
                        " save the trace as UTF-8",
                    )
                offset += len(line)
    except OSError as err:
        return TraceError(path, None, None, f"cannot read: {err.strerror}")
    return TraceError(path, None, None, f"not UTF-8: {exc.reason}")


def header_names(path: Path) -> list[str]:
    """Column names of the first line, stripped of spaces and a leading ``#``.

    The leading ``#`` is how the RFold Philly file marks its header.
    """
    with _open(path) as handle:
        return _header(path, csv.reader(_checked_lines(path, handle)))


def _header(path: Path, reader: Iterator[list[str]]) -> list[str]:
    try:
        header = next(reader)
    except StopIteration:
        raise TraceError(path, 1, None, "file is empty; expected a header line") from None
    except csv.Error as exc:
        raise TraceError(path, 1, None, f"not valid CSV: {exc}") from None
    except UnicodeDecodeError as exc:
        raise _undecodable(path, exc) from None
    return [h.strip().lstrip("#").strip() for h in header]


def read_rows(path: Path, required: Sequence[str]) -> Iterator[Row]:
    """Yield rows of a CSV whose header has every ``required`` column.

    A leading ``#`` on the header (as in the RFold Philly file) is ignored and
    column names are stripped of spaces. Bytes that are not UTF-8 and NUL
    bytes are refused with the line (and byte offset) where they occur.
    """
    with _open(path) as handle:
        reader = csv.reader(_checked_lines(path, handle))
        names = _header(path, reader)
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
        except UnicodeDecodeError as exc:
            raise _undecodable(path, exc) from None
