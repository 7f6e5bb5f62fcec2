"""The one table renderer every command prints with."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["SUMMARY_COLUMNS", "render_table", "summary_table"]

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


def render_table(
    header: Sequence[str], rows: Iterable[Sequence[Any]], *, align: str | None = None
) -> str:
    """Columns two spaces apart, each as wide as its widest cell; ``None`` prints empty.

    ``align`` has one letter per column, ``l`` or ``r``; by default the first column
    is left-aligned and the rest (numbers) right-aligned.
    """
    cells = [[str(c) for c in header]]
    cells += [["" if c is None else str(c) for c in row] for row in rows]
    sides = align or "l" + "r" * (len(header) - 1)
    if len(sides) != len(header):
        raise ValueError(f"align {align!r} names {len(sides)} columns, the table has {len(header)}")
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join(
        "  ".join(
            cell.ljust(width) if side == "l" else cell.rjust(width)
            for cell, width, side in zip(row, widths, sides, strict=True)
        )
        for row in cells
    )


def summary_table(summaries: Sequence[Mapping[str, Any]]) -> str:
    """One row per policy of :func:`ilucid.sim.summarize`'s figures."""
    header = ["policy"] + [label for _, label, _ in SUMMARY_COLUMNS]
    rows = [
        [s["policy"]] + [fmt.format(s[key]) for key, _, fmt in SUMMARY_COLUMNS] for s in summaries
    ]
    return render_table(header, rows)
