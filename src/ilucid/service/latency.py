"""Latency histograms the service keeps for /metrics (scheduling pass, whole reconcile)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["BUCKETS", "Latency"]

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
