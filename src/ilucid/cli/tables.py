"""The one table renderer every command prints with (``rich``).

On a terminal a table is drawn in the terminal's width with a bold header; piped
or written to a file it is plain text at its natural width, one row a line, so
scripts can read it and nothing is wrapped. Every cell is shown as text: control
characters escaped (:func:`ilucid.cli.common.printable`) and ``[red]`` never read
as rich markup, whoever chose it.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from ilucid.cli.common import printable

__all__ = [
    "SUMMARY_COLUMNS",
    "format_cell",
    "make_table",
    "print_table",
    "render_table",
    "summary_rows",
    "summary_table",
]

#: a simulation summary's columns: key, heading, format
SUMMARY_COLUMNS = (
    ("jobs", "jobs", "{:,}"),
    ("avg_jct", "mean JCT s", "{:,.0f}"),
    ("p50_jct", "p50 JCT s", "{:,.0f}"),
    ("p99_jct", "p99 JCT s", "{:,.0f}"),
    ("avg_queue", "mean queue s", "{:,.0f}"),
    ("p99_queue", "p99 queue s", "{:,.0f}"),
    ("gpu_util", "GPU util", "{:.1%}"),
    ("preemptions", "preempt", "{:,}"),
    ("wall_s", "wall s", "{:.2f}"),
)


#: :data:`rich.box.SIMPLE_HEAD` in ASCII: plain text gets a rule of dashes under its header
_PLAIN_HEAD = box.Box("    \n    \n -- \n    \n    \n    \n    \n    \n", ascii=True)


def format_cell(value: Any, fmt: str = "{}") -> str:
    """``fmt`` applied to ``value``; a figure a row lacks (None, NaN) prints as ``-``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return fmt.format(value)


def make_table(
    header: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    align: str | None = None,
    title: str | None = None,
) -> Table:
    """A table of ``rows`` under ``header``; ``None`` prints empty.

    ``align`` has one letter per column, ``l`` or ``r``; by default the first column
    is left-aligned and the rest (numbers) right-aligned.
    """
    sides = align or "l" + "r" * (len(header) - 1)
    if len(sides) != len(header) or set(sides) - {"l", "r"}:
        raise ValueError(f"align {align!r}: give l or r for each of the {len(header)} columns")
    table = Table(
        box=box.SIMPLE_HEAD,
        title=None if title is None else Text(printable(title)),
        title_justify="left",
        show_edge=False,
        pad_edge=False,
        header_style="bold",
    )
    for heading, side in zip(header, sides, strict=True):
        table.add_column(Text(printable(heading)), justify="left" if side == "l" else "right")
    for row in rows:
        cells = [Text("" if c is None else printable(c)) for c in row]
        if len(cells) != len(header):
            raise ValueError(f"a row has {len(cells)} cells, the table {len(header)} columns")
        table.add_row(*cells)
    return table


def _natural_width(table: Table) -> int:
    """The width the table takes when nothing has to wrap."""
    wide = Console(width=100_000, file=io.StringIO())
    return Measurement.get(wide, wide.options, table).maximum


def render_table(
    header: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    align: str | None = None,
    title: str | None = None,
    max_width: int | None = None,
) -> str:
    """The table as plain text at its natural width, or at most ``max_width`` columns
    (long cells wrap onto more lines); no colour, no trailing spaces."""
    table = make_table(header, rows, align=align, title=title)
    table.box = _PLAIN_HEAD
    width = _natural_width(table)
    if max_width is not None:
        width = min(width, max_width)
    console = Console(file=io.StringIO(), width=width, color_system=None, highlight=False)
    with console.capture() as captured:
        console.print(table)
    return "\n".join(line.rstrip() for line in captured.get().splitlines())


def print_table(
    header: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    align: str | None = None,
    title: str | None = None,
    max_width: int | None = None,
) -> None:
    """Print the table: styled in the terminal's width (or ``max_width``, if narrower),
    else as :func:`render_table`."""
    console = Console(highlight=False)
    if not console.is_terminal:
        text = render_table(header, rows, align=align, title=title, max_width=max_width)
        print(text, flush=True)
        return
    if max_width is not None and console.width > max_width:
        console = Console(highlight=False, width=max_width)
    console.print(make_table(header, rows, align=align, title=title))


def summary_rows(summaries: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The header and rows of :func:`ilucid.sim.metrics.summarize`'s figures, one row a policy."""
    header = ["policy"] + [label for _, label, _ in SUMMARY_COLUMNS]
    rows = [
        [str(s["policy"])] + [format_cell(s.get(key), fmt) for key, _, fmt in SUMMARY_COLUMNS]
        for s in summaries
    ]
    return header, rows


def summary_table(summaries: Sequence[Mapping[str, Any]]) -> str:
    """One row per policy of :func:`ilucid.sim.metrics.summarize`'s figures, as text."""
    header, rows = summary_rows(summaries)
    return render_table(header, rows)
