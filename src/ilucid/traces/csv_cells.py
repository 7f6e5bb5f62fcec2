"""Cells of every CSV file ilucid writes, safe to open in a spreadsheet.

A text cell a spreadsheet would read as a formula (one that starts with ``=``,
``+``, ``-``, ``@``, a tab or a carriage return: a job id, a tenant or a user a
client chose, ``=HYPERLINK(...)``) is written with a leading ``'``, the OWASP rule
for CSV injection; the spreadsheet then shows it as the text it is. Numbers are
left as they are, whether written as numbers or as their text (``-1.5``, ``1e-3``):
a spreadsheet reads them as numbers, never as formulas.

Files ilucid reads back (the generic trace ``/history.csv`` exports, a sweep's
result table) undo the quote with :func:`restored_cell`. Text that itself starts
with ``'`` before such a character gets one more quote, so what is read back is
exactly what was written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["FORMULA_STARTS", "formula_safe", "restored_cell", "safe_cell"]

#: First characters that make a spreadsheet read a cell as a formula (OWASP)
FORMULA_STARTS = frozenset("=+-@\t\r")

_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
#: first characters of every text :func:`_quoted` can be true of (a formula's, or a quote
#: of the text's own before one): any other text is written as it is, without a closer look
_SUSPECT = FORMULA_STARTS | {"'"}


def _quoted(text: str) -> bool:
    """Whether ``text`` is written with a leading ``'``: it starts, after any quotes of
    its own, with a formula's first character and is not a number."""
    rest = text.lstrip("'")
    return rest[:1] in FORMULA_STARTS and _NUMBER.fullmatch(rest) is None


def safe_cell(value: object) -> object:
    """``value``, with a leading ``'`` when it is text a spreadsheet would run."""
    if isinstance(value, str) and value[:1] in _SUSPECT and _quoted(value):
        return "'" + value
    return value


def formula_safe(row: Iterable[object]) -> list[object]:
    """A row to hand to ``csv.writer(...).writerow``, each cell :func:`safe_cell`.

    :func:`safe_cell` inlined: a replay's jobs CSV is about two million cells."""
    return [
        "'" + cell if isinstance(cell, str) and cell[:1] in _SUSPECT and _quoted(cell) else cell
        for cell in row
    ]


def restored_cell(text: str) -> str:
    """The text :func:`safe_cell` was given, from the cell it wrote."""
    if text[:1] == "'" and _quoted(text[1:]):
        return text[1:]
    return text
