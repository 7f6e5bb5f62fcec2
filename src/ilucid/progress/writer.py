"""Report a job's progress to ilucid from inside the job: ``report(step, total)``.

ilucid sets ``ILUCID_PROGRESS_FILE`` for every job it runs; :func:`report` writes
``{"step": ..., "total": ...}`` there atomically (a temporary file, then a rename),
so the scheduler never reads half a report. Outside ilucid (the variable unset) it
does nothing, so a training script calls it unconditionally. Standard library only:
a job imports it without installing anything else. See ``docs/progress.md``.
"""

from __future__ import annotations

import json
import math
import os

__all__ = ["ENV", "report"]

#: the variable naming the file a job writes its progress to
ENV = "ILUCID_PROGRESS_FILE"


def report(step: float, total: float) -> bool:
    """Say the job is at ``step`` of ``total`` steps; True when it was written.

    Returns False, doing nothing, when the job does not run under ilucid. Raises
    ValueError for numbers no scheduler could use (negative, not finite, ``step >
    total``, ``total <= 0``): a bug in the caller, better found at once.
    """
    path = os.environ.get(ENV)
    if not path:
        return False
    s, t = float(step), float(total)
    if not (math.isfinite(s) and math.isfinite(t) and 0 <= s <= t and t > 0):
        raise ValueError(f"progress: step {step!r} of total {total!r}: need 0 <= step <= total")
    folder, name = os.path.split(path)
    temporary = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump({"step": _plain(s), "total": _plain(t)}, handle)
    os.replace(temporary, path)
    return True


def _plain(value: float) -> float | int:
    """An integral count written as an integer (``1200``, not ``1200.0``)."""
    return int(value) if value.is_integer() else value
