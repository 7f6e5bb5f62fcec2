"""Reading a job's own progress report, in either of its two forms (pure: no I/O).

A job reports where it is in one of two ways (``docs/progress.md``): a line on its
output, ``ILUCID_PROGRESS step=1200 total=50000``, anywhere in the line (after a
logger's prefix, say), or a JSON file at ``$ILUCID_PROGRESS_FILE``,
``{"step": 1200, "total": 50000}``. Whatever a job writes is untrusted: a report
counts only when both numbers are plain decimals, finite, ``0 <= step <= total``,
``total > 0`` and at most :data:`MAX_VALUE`; anything else is ignored, never an
error (a job's output is not the service's to fail on).
"""

from __future__ import annotations

import json
import math
import re

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_VALUE",
    "Progress",
    "last_in_output",
    "parse_file",
    "parse_line",
    "valid",
]

#: (step, total): where the job is, of how many steps
Progress = tuple[float, float]

#: the largest step or total taken (a quadrillion steps; beyond is a typo or garbage)
MAX_VALUE = 1e15
#: the largest progress file read: ``{"step": ..., "total": ...}`` is a few dozen bytes
MAX_FILE_BYTES = 4096

_LINE = re.compile(
    rb"(?:^|[^A-Za-z0-9_])ILUCID_PROGRESS[ \t]+step=(\S{1,32})[ \t]+total=(\S{1,32})"
)
_NUMBER = re.compile(rb"^[0-9]{1,16}(?:\.[0-9]{1,16})?(?:[eE][+-]?[0-9]{1,3})?$")


def valid(step: object, total: object) -> Progress | None:
    """``(step, total)`` as floats when they make a report, else None."""
    if isinstance(step, bool) or isinstance(total, bool):
        return None
    if not isinstance(step, int | float) or not isinstance(total, int | float):
        return None
    try:
        s, t = float(step), float(total)
    except OverflowError:  # an int too large for a float
        return None
    if not (math.isfinite(s) and math.isfinite(t)):
        return None
    if not (0.0 <= s <= t <= MAX_VALUE and t > 0.0):
        return None
    return (s, t)


def _number(text: bytes) -> float | None:
    return float(text) if _NUMBER.match(text) else None


def parse_line(line: bytes | str) -> Progress | None:
    """The report in one output line, or None (no report, or a malformed one)."""
    data = line.encode("utf-8", "replace") if isinstance(line, str) else line
    found = _LINE.search(data)
    if found is None:
        return None
    step, total = _number(found.group(1)), _number(found.group(2))
    if step is None or total is None:
        return None
    return valid(step, total)


def last_in_output(data: bytes | str, cut: bool = False) -> Progress | None:
    """The newest valid report in a stretch of output (the last one wins).

    ``cut``: ``data`` is a tail that starts inside a line, whose first line is then
    not read (its start is missing). A last line without its newline is not read
    either: the job may be writing it now.
    """
    raw = data.encode("utf-8", "replace") if isinstance(data, str) else data
    lines = raw.split(b"\n")
    lines.pop()  # after the last newline: "" or a line still being written
    if cut and lines:
        lines.pop(0)
    for line in reversed(lines):
        if b"ILUCID_PROGRESS" in line:
            found = parse_line(line)
            if found is not None:
                return found
    return None


def parse_file(data: bytes) -> Progress | None:
    """The report in a progress file's bytes, or None when it is not one."""
    if len(data) > MAX_FILE_BYTES:
        return None
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(document, dict):
        return None
    return valid(document.get("step"), document.get("total"))
