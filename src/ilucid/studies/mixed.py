"""Mixed training + inference scenarios: per-class figures and the comparisons of issue 4.

A scenario is run under ``tiered`` (inference first, training reserve), under
static partitioning (a fixed pool of inference nodes, sized by search so
inference starts as promptly as under ``tiered``), under strict FIFO, and the
training jobs alone under ``tiered`` (to report what sharing the cluster with
inference costs training).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ilucid.core import BuildContext, Cluster, JobClass, JobSpec, SchedulerConfig
from ilucid.core.policies import (
    DEFAULT_PROFILE,
    make_policy,
    needs_estimates,
    tier_overrides,
)
from ilucid.core.policies.tiered import TierConfig
from ilucid.sim.engine import simulate
from ilucid.sim.estimates import WalkForwardEstimates
from ilucid.sim.forked import forked_map
from ilucid.sim.lucid_world import profiling_world
from ilucid.sim.metrics import percentile, start_prediction_accuracy
from ilucid.sim.replay_types import JobRecord, SimResult

__all__ = [
    "DEFAULT_CHECKPOINT_S",
    "MixedRun",
    "class_summary",
    "run_scenario",
    "size_static_partition",
]

#: Default checkpoint interval of training jobs in mixed scenarios (30 minutes).
DEFAULT_CHECKPOINT_S = 1800.0


def _is_inference(record: JobRecord) -> bool:
    return record.job_class == JobClass.INFERENCE.value


def class_summary(result: SimResult) -> dict[str, Any]:
    """Inference time-to-start and training JCT, split by job class."""
    inference = [r for r in result.records if _is_inference(r)]
    training = [r for r in result.records if not _is_inference(r)]
    starts = sorted(r.queueing_delay for r in inference)
    jcts = sorted(r.jct for r in training)
    queues = sorted(r.queueing_delay for r in training)
    # inference's share while it runs: from its first arrival to its last end
    first = min((r.submit for r in inference), default=0.0)
    last = max((r.end for r in inference), default=0.0)
    inference_gpu_s = sum(r.busy_gpu_seconds for r in inference)
    span = max(last - first, 1.0)
    summary: dict[str, Any] = {
        "policy": result.policy,
        "inference_jobs": len(inference),
        "p50_tts": percentile(starts, 50),
        "p99_tts": percentile(starts, 99),
        "max_tts": starts[-1] if starts else math.nan,
        "inference_share": inference_gpu_s / (result.cluster_gpus * span),
        "training_jobs": len(training),
        "avg_jct_training": sum(jcts) / len(jcts) if jcts else math.nan,
        "p99_queue_training": percentile(queues, 99),
        "preemptions": sum(r.preemptions for r in training),
        "lost_gpu_hours": sum(r.lost_work_s * r.num_gpus for r in training) / 3600.0,
        "wall_s": result.wall_s,
    }
    summary.update(start_prediction_accuracy(result.records))
    return summary


@dataclass(frozen=True, slots=True)
class MixedRun:
    label: str
    result: SimResult
    summary: dict[str, Any]


def size_static_partition(
    jobs: Sequence[JobSpec],
    cluster: Cluster,
    target_p99_s: float,
    config: SchedulerConfig | None = None,
) -> tuple[int, float]:
    """Fewest inference nodes with which inference's p99 time-to-start is <= the target.

    In a static partition training never touches the inference nodes, so the
    inference jobs alone decide this; each probe replays only them (fast).
    Returns ``(nodes, p99)``; raises if even ``len(cluster) - 1`` nodes miss it.
    """
    inference = [j for j in jobs if j.job_class is JobClass.INFERENCE]
    if not inference:
        raise ValueError("the scenario has no inference jobs to size a partition for")
    cache: dict[int, float] = {}

    def p99(nodes: int) -> float:
        if nodes not in cache:
            policy = make_policy(f"static-partition:{nodes}")
            result = simulate(inference, cluster, policy, config)
            cache[nodes] = class_summary(result)["p99_tts"]
        return cache[nodes]

    low, high = 1, len(cluster) - 1
    if p99(high) > target_p99_s:
        raise ValueError(
            f"even {high} of {len(cluster)} nodes for inference leave its p99 time-to-start"
            f" at {p99(high):.0f} s > {target_p99_s:.0f} s"
        )
    while low < high:
        middle = (low + high) // 2
        if p99(middle) <= target_p99_s:
            high = middle
        else:
            low = middle + 1
    return low, p99(low)


# -- running a scenario --------------------------------------------------------------
_task_payload: (
    tuple[list[JobSpec], list[JobSpec], Cluster, SchedulerConfig, int, TierConfig] | None
) = None


#: the profiles a scenario's tiers configure
_TIERED = (DEFAULT_PROFILE, "tiered")


def _run_task(task: tuple[str, str, bool]) -> MixedRun:
    label, policy_name, training_only = task
    assert _task_payload is not None
    mixed, training, cluster, config, predict_every, tiers = _task_payload
    jobs = training if training_only else mixed
    # the tiers configure the profile under test, not the baselines beside it
    overrides = tier_overrides(tiers, policy_name) if policy_name in _TIERED else {}
    policy = make_policy(policy_name, BuildContext(overrides=overrides))
    annotator = WalkForwardEstimates(jobs) if needs_estimates(policy_name) else None
    try:
        world = profiling_world(policy_name, annotator)
        result = simulate(
            jobs,
            cluster,
            policy,
            config,
            annotator=annotator,
            world=world,
            predict_every=predict_every if policy_name != "fifo" else 0,
        )
    finally:  # its fit process ends with the replay, however the replay ends
        if annotator is not None:
            annotator.close()
    return MixedRun(label, result, class_summary(result))


def run_scenario(
    jobs: Sequence[JobSpec],
    cluster: Cluster,
    config: SchedulerConfig,
    target_p99_s: float = 60.0,
    predict_every: int | None = None,
    processes: int | None = None,
    on_step: Callable[[str], None] | None = None,
    tiers: TierConfig | None = None,
    policy: str = DEFAULT_PROFILE,
) -> list[MixedRun]:
    """``policy`` (the default profile, or tiered), static partitioning sized to its
    inference p99 (at least to ``target_p99_s``), strict FIFO, and training alone under
    ``policy``."""
    global _task_payload
    mixed = list(jobs)
    training = [j for j in mixed if j.job_class is not JobClass.INFERENCE]
    if not training:
        raise ValueError("the scenario has no training jobs")
    step = on_step or (lambda _text: None)
    every = predict_every if predict_every is not None else max(1, len(mixed) // 2000)
    _task_payload = (mixed, training, cluster, config, every, tiers or TierConfig())
    try:
        step(policy)
        first = _pool_map(
            [(policy, policy, False), (f"training only ({policy})", policy, True)],
            processes,
        )
        tested_p99 = first[0].summary["p99_tts"]
        target = min(target_p99_s, tested_p99) if tested_p99 == tested_p99 else target_p99_s
        step(f"sizing the static partition for inference p99 <= {target:.0f} s")
        try:
            nodes, _ = size_static_partition(mixed, cluster, target, config)
            label = f"static partition ({nodes} nodes)"
        except ValueError as exc:  # no partition reaches the target: show the widest one
            step(str(exc))
            nodes = len(cluster) - 1
            label = f"static partition ({nodes} nodes, misses target)"
        step(f"static-partition:{nodes} and fifo")
        second = _pool_map(
            [
                (label, f"static-partition:{nodes}", False),
                ("strict fifo", "fifo", False),
            ],
            processes,
        )
    finally:
        _task_payload = None
    return [first[0], second[0], second[1], first[1]]


def _pool_map(tasks: list[tuple[str, str, bool]], processes: int | None) -> list[MixedRun]:
    workers = processes if processes is not None else min(len(tasks), os.cpu_count() or 1)
    if workers <= 1:
        return [_run_task(t) for t in tasks]
    return list(forked_map(_run_task, tasks, workers))
