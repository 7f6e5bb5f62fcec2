"""Latency histograms the service keeps for /metrics (scheduling pass, whole reconcile)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

__all__ = ["BUCKETS", "PASS_PARTS", "Latency", "PassSplit"]

#: upper bounds (s) of the latency buckets served at /metrics
BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0)


@dataclass(slots=True)
class Latency:
    """Count, total seconds and a per-bucket (not cumulative) histogram of durations."""

    count: int = 0
    seconds: float = 0.0
    histogram: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))

    def observe(self, seconds: float) -> None:
        self.count += 1
        self.seconds += seconds
        for index, bound in enumerate(BUCKETS):
            if seconds <= bound:
                self.histogram[index] += 1
                break


#: the parts of a reconcile: read the backend and record what it saw; the core's pass;
#: store the decisions and act on them (stops, launches); the database commits
PASS_PARTS = ("observe", "decide", "apply", "commit")


class PassSplit:
    """Where one reconcile's time went, part by part (:data:`PASS_PARTS`), so an operator
    (and ``bench/service_scale.py``) sees which part a slow pass spent its time in."""

    __slots__ = ("_mark", "seconds")

    def __init__(self, began: float) -> None:
        self._mark = began
        self.seconds = dict.fromkeys(PASS_PARTS, 0.0)

    def lap(self, part: str) -> float:
        """Charge the time since the last lap to ``part``; returns the clock now."""
        now = time.perf_counter()
        self.seconds[part] += now - self._mark
        self._mark = now
        return now

    @property
    def total_s(self) -> float:
        """The whole pass, in seconds."""
        return sum(self.seconds.values())

    def sentence(self) -> str:
        """``reconcile pass: observe 1.2 ms, decide 3.4 ms, ...`` (the debug log's line)."""
        parts = ", ".join(f"{part} {self.seconds[part] * 1000:.1f} ms" for part in PASS_PARTS)
        return f"reconcile pass: {parts}"
