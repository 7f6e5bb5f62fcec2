"""Trace-driven simulator: replays jobs through the scheduling core on a virtual clock."""

from ilucid.sim.engine import ClusterSeries, JobRecord, SimResult, World, simulate
from ilucid.sim.metrics import percentile, summarize

__all__ = [
    "ClusterSeries",
    "JobRecord",
    "SimResult",
    "World",
    "percentile",
    "simulate",
    "summarize",
]
