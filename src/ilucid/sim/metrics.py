"""Summary metrics of a simulation: JCT, queueing delay, utilisation, slowdown."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ilucid.sim.replay_types import JobRecord, SimResult

__all__ = ["percentile", "start_prediction_accuracy", "summarize"]

#: Jobs shorter than this count as this long in the bounded slowdown.
SLOWDOWN_BOUND_S = 10.0
#: a start prediction's error is judged against max(actual wait, this): 10 minutes
NORM_FLOOR_S = 600.0


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default) of already sorted values."""
    if not sorted_values:
        return math.nan
    position = (len(sorted_values) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = position - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _distribution(prefix: str, values: list[float]) -> dict[str, float]:
    values.sort()
    return {
        f"avg_{prefix}": _mean(values),
        f"p50_{prefix}": percentile(values, 50),
        f"p95_{prefix}": percentile(values, 95),
        f"p99_{prefix}": percentile(values, 99),
        f"p999_{prefix}": percentile(values, 99.9),
    }


def summarize(result: SimResult, large_above_gpus: int = 8) -> dict[str, Any]:
    """The figures ``summary.json`` carries for one policy; times in seconds."""
    records: list[JobRecord] = result.records
    jcts = [r.jct for r in records]
    queues = [r.queueing_delay for r in records]
    slowdowns = [r.jct / max(r.duration, SLOWDOWN_BOUND_S) for r in records]
    first_submit = min((r.submit for r in records), default=0.0)
    last_end = max((r.end for r in records), default=0.0)
    makespan = last_end - first_submit
    busy = result.busy_gpu_seconds
    summary: dict[str, Any] = {"policy": result.policy, "jobs": len(records)}
    summary.update(_distribution("jct", jcts))
    summary.update(_distribution("queue", queues))
    summary["avg_bounded_slowdown"] = _mean([max(1.0, s) for s in slowdowns])
    summary["makespan"] = makespan
    summary["gpu_util"] = busy / (result.cluster_gpus * makespan) if makespan > 0 else 0.0
    summary["preemptions"] = sum(r.preemptions for r in records)
    small = [r.jct for r in records if r.num_gpus <= large_above_gpus]
    large = [r.jct for r in records if r.num_gpus > large_above_gpus]
    summary["small_jobs"] = len(small)
    summary["avg_jct_small"] = _mean(small)
    summary["large_jobs"] = len(large)
    summary["avg_jct_large"] = _mean(large)
    summary["cluster_gpus"] = result.cluster_gpus
    summary["cluster_nodes"] = result.cluster_nodes
    summary["events"] = result.events
    summary["wall_s"] = result.wall_s
    summary.update(start_prediction_accuracy(records))
    return summary


def start_prediction_accuracy(records: Sequence[JobRecord]) -> dict[str, float]:
    """How far the expected start given to waiting jobs at submission was from their
    real start, and how often its 80% interval held it (issue 37's measures)."""
    sampled = [r for r in records if r.predicted_start >= 0 and r.first_start >= 0]
    if not sampled:
        return {"start_predictions": 0}
    errors = sorted(abs(r.first_start - r.predicted_start) for r in sampled)
    relative = sorted(
        abs(r.first_start - r.predicted_start) / max(r.first_start - r.submit, 60.0)
        for r in sampled
    )
    normalised = sorted(
        abs(r.first_start - r.predicted_start) / max(r.first_start - r.submit, NORM_FLOOR_S)
        for r in sampled
    )
    ranged = [r for r in sampled if r.predicted_low >= 0]
    held = sum(1 for r in ranged if r.predicted_low <= r.first_start <= r.predicted_high)
    widths = sorted(r.predicted_high - r.predicted_low for r in ranged)
    return {
        "start_predictions": len(errors),
        "start_error_median_s": percentile(errors, 50),
        "start_error_mean_s": sum(errors) / len(errors),
        "start_error_median_relative": percentile(relative, 50),
        "start_error_median_norm": percentile(normalised, 50),
        "start_interval_coverage": held / len(ranged) if ranged else math.nan,
        "start_interval_width_median_s": percentile(widths, 50) if widths else math.nan,
    }
