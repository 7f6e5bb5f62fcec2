"""Trace-driven simulator: replays jobs through the scheduling core on a virtual clock."""

from ilucid.sim.engine import ClusterSeries, JobRecord, SimResult, simulate
from ilucid.sim.metrics import percentile, summarize

__all__ = ["ClusterSeries", "JobRecord", "SimResult", "percentile", "simulate", "summarize"]
