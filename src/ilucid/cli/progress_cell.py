"""A job's progress in one cell of ``ilucid jobs``: ``48%  24,000/50,000  14.3/s  ~58m left``."""

from __future__ import annotations

from typing import Any

__all__ = ["progress_cell"]


def _count(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _span(seconds: float) -> str:
    """``45s``, ``58m``, ``3h05m``, ``2d04h``: a remaining time at a glance."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{str(s % 3600 // 60).zfill(2)}m"
    return f"{s // 86400}d{str(s % 86400 // 3600).zfill(2)}h"


def progress_cell(progress: dict[str, Any] | None) -> str:
    """The API's ``progress`` of a job as a short cell; "" when it never reported."""
    if not progress:
        return ""
    parts = [
        f"{progress['fraction']:.0%}",
        f"{_count(progress['step'])}/{_count(progress['total'])}",
    ]
    if progress.get("rate_per_s"):
        parts.append(f"{progress['rate_per_s']:,.1f}/s")
    if progress.get("left_s") is not None:
        parts.append(f"~{_span(progress['left_s'])} left")
    return "  ".join(parts)
