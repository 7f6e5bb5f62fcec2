"""CSV reading with errors that name the file, line and field at fault.

Every number a trace states is checked here, at the edge: finite, and within
explicit bounds (below). A replay's cost must follow the trace's events, so a
row such as ``duration = 1e308`` is refused with its file and line rather than
left to stretch the simulated clock. Every reader reads lines of at most
:data:`MAX_LINE_BYTES` (a link to /dev/zero is one endless line), and only as
many rows as its caller takes (``--limit`` stops the reading).
"""

from __future__ import annotations

import csv
import itertools
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

from ilucid.traces.csv_cells import restored_cell

__all__ = [
    "MAX_GPUS",
    "MAX_LINE_BYTES",
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
#: Longest line of a trace, bytes (a real trace's lines are under 1 KB): a longer one is
#: refused with its line before more of it is read, so memory stays bounded
MAX_LINE_BYTES = 1 << 20

_SECONDS_NOTE = " (about 100 years)"
_INF = math.inf


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
        # what :meth:`bounded` accepts, without its messages' costs (a trace states
        # hundreds of thousands of numbers): NaN fails both comparisons
        if (minimum if minimum is not None else -maximum) <= value <= maximum and not (
            value == _INF or value == -_INF
        ):
            return value
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

    def gpu_milli(self, name: str) -> int:
        """A share of one GPU in thousandths: a whole number in ``1..1000`` (refused,
        never clamped, outside it)."""
        return self.integer(name, 1, 1000)

    def error(self, name: str | None, problem: str) -> TraceError:
        return TraceError(self._path, self.line, name, problem)


def _open(path: Path) -> IO[str]:
    try:
        return path.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise TraceError(path, None, None, f"cannot open: {exc.strerror}") from None


def _too_long(path: Path, line: int, binary: bool) -> TraceError:
    note = " and holds NUL bytes: a binary file, not a CSV trace" if binary else ""
    return TraceError(path, line, None, f"line longer than {MAX_LINE_BYTES:,} bytes{note}")


def _checked_lines(path: Path, handle: IO[str]) -> Iterator[str]:
    """The file's lines, each read with a bound: a line over :data:`MAX_LINE_BYTES`
    bytes, or holding a NUL character (a binary file, not a CSV), is refused with its
    line number before more of it is read."""
    for number in itertools.count(1):
        # room for a longest line and its CR LF: a line cut here is one too long
        line = handle.readline(MAX_LINE_BYTES + 2)
        if not line:
            return
        # a character is 1 to 4 bytes: count the bytes only when they may be too many
        too_many = len(line) > MAX_LINE_BYTES // 4
        if too_many and len(line.rstrip("\r\n").encode("utf-8")) > MAX_LINE_BYTES:
            raise _too_long(path, number, "\x00" in line)
        if "\x00" in line:
            raise TraceError(
                path, number, None, "contains a NUL byte: a binary file, not a CSV trace"
            )
        yield line


def _undecodable(path: Path, exc: UnicodeDecodeError) -> TraceError:
    """Locate the first byte that is not UTF-8: text decoding reads ahead in blocks, so
    the line the decoder was on is not the line at fault; UTF-8 never uses byte 0x0A
    inside a character, so decoding line by line finds the exact place. Lines are read
    with the same bound as :func:`_checked_lines`."""
    offset = 0
    try:
        with path.open("rb") as raw:
            for number in itertools.count(1):
                line = raw.readline(MAX_LINE_BYTES + 2)
                if not line:
                    break
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError as bad:
                    cut = len(line) > MAX_LINE_BYTES + 1 and not line.endswith(b"\n")
                    # a character cut at the bound is the long line's fault, not its byte's
                    if not cut or bad.start < len(line) - 3:
                        byte = line[bad.start]
                        return TraceError(
                            path,
                            number,
                            None,
                            f"byte 0x{byte:02x} at offset {offset + bad.start} is not UTF-8"
                            " (a binary file, or text in another encoding such as Latin-1?);"
                            " save the trace as UTF-8",
                        )
                if len(line.rstrip(b"\r\n")) > MAX_LINE_BYTES:
                    return _too_long(path, number, b"\x00" in line)
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


def read_rows(
    path: Path, required: Sequence[str], *, quoted_formulas: bool = False
) -> Iterator[Row]:
    """Yield rows of a CSV whose header has every ``required`` column, reading the
    file only as far as the caller takes rows.

    A leading ``#`` on the header (as in the RFold Philly file) is ignored and
    column names are stripped of spaces. Bytes that are not UTF-8, NUL bytes and
    lines over :data:`MAX_LINE_BYTES` are refused with the line (and byte offset)
    where they occur. ``quoted_formulas``: the file is one ilucid wrote, whose text
    cells a spreadsheet would read as formulas are quoted
    (:mod:`ilucid.traces.csv_cells`); they are read back as they were.
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
                # blank: no cell holds more than spaces
                if not "".join(record).strip():
                    continue
                if len(record) != width:
                    raise TraceError(
                        path, line, None, f"has {len(record)} fields, the header has {width}"
                    )
                if quoted_formulas:
                    record = [restored_cell(cell) for cell in record]
                yield Row(path, line, dict(zip(names, record, strict=True)))
        except csv.Error as exc:
            raise TraceError(path, reader.line_num, None, f"not valid CSV: {exc}") from None
        except UnicodeDecodeError as exc:
            raise _undecodable(path, exc) from None
