"""Run several policies on one trace in parallel processes, each reporting its progress
(the CLI draws it: ``ilucid.cli.progress``)."""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ilucid.core import BuildContext, Cluster, Forecast, JobSpec, SchedulerConfig, make_policy
from ilucid.core.policies import needs_estimates, needs_forecasts, needs_profiler
from ilucid.estimators.live import format_estimate
from ilucid.estimators.profiles import profile_dir
from ilucid.sim.engine import simulate
from ilucid.sim.estimates import NO_HISTORY_S, WalkForwardEstimates
from ilucid.sim.forked import EXIT_WITHIN_S, run_forked
from ilucid.sim.lucid_world import LucidWorld, walk_forward_forecasts
from ilucid.sim.replay_types import SimResult, World

__all__ = ["PolicyRun", "run_policies"]

#: waiting arrivals a replay gives an expected start, to measure it (``--start-predictions``)
DEFAULT_START_PREDICTIONS = 500


@dataclass(frozen=True, slots=True)
class PolicyRun:
    name: str
    result: SimResult | None
    error: str | None = None
    explanation: list[str] | None = None  # estimator and packing detail for --explain


_shared: Any = None
# set before forking so workers inherit the trace instead of unpickling it
_payload: tuple[Sequence[JobSpec], Cluster, SchedulerConfig, dict[str, Any]] | None = None
_lucid_inputs: tuple[Path | None, list[tuple[float, Forecast]]] | None = None


def _init_worker(shared: Any) -> None:
    global _shared
    _shared = shared


def _detail(
    job_id: str | None,
    annotator: WalkForwardEstimates | None,
    world: World | None,
    jobs: Sequence[JobSpec],
) -> list[str] | None:
    """The estimator's contributions and the packing tree's path for one job."""
    if job_id is None:
        return None
    lines: list[str] = []
    if annotator is not None:
        explained = annotator.explain(job_id)
        # the service's wording: "estimate N s by duration model vK = exp(...) - 1",
        # or the median fallback's note
        said = "" if explained is None else format_estimate(explained)
        if explained is None:
            said = "estimate: none made"
        elif explained.seconds is None:
            said += f"; the replay used {NO_HISTORY_S:,.0f} s"
        made, spec = annotator.made_at(job_id), next((j for j in jobs if j.id == job_id), None)
        if made is not None and spec is not None and made < spec.submit_time:
            # a batch's estimate counts the jobs finished at its refit, not at submission
            said = (
                f"estimated at t={made:,.0f}, the refit before its submission at"
                f" t={spec.submit_time:,.0f}: {said}"
            )
        lines.append(said)
    if isinstance(world, LucidWorld):
        spec = next((j for j in jobs if j.id == job_id), None)
        if spec is not None:
            profile = world.profile_of(spec)
            path = world.analyzer.explain_one(profile.features())
            lines.append(f"workload {profile.key} (seeded rule); packing tree: " + "; ".join(path))
    return lines


def _run_one(task: tuple[int, str]) -> PolicyRun:
    index, name = task
    assert _payload is not None

    def progress(fraction: float) -> None:
        if _shared is not None:
            _shared[index] = fraction

    return _replay(name, _payload, _lucid_inputs, progress)


def replay_policy(
    jobs: Sequence[JobSpec],
    cluster: Cluster,
    name: str,
    config: SchedulerConfig | None = None,
) -> PolicyRun:
    """One policy's replay with everything it needs passed in: a task another process
    (a Dask worker) runs on its own."""
    config = config or SchedulerConfig()
    lucid: tuple[Path | None, list[tuple[float, Forecast]]] | None = None
    if needs_profiler(name):
        lucid = (profile_dir(), walk_forward_forecasts(jobs) if needs_forecasts(name) else [])
    return _replay(name, (jobs, cluster, config, {}), lucid, lambda fraction: None)


def _replay(
    name: str,
    payload: tuple[Sequence[JobSpec], Cluster, SchedulerConfig, dict[str, Any]],
    lucid_inputs: tuple[Path | None, list[tuple[float, Forecast]]] | None,
    progress: Callable[[float], None],
) -> PolicyRun:
    jobs, cluster, config, options = payload
    options = dict(options)
    options_explain = {"job": options.pop("explain", None)}
    reports = options.pop("progress_reports", None)
    predictions = int(options.pop("start_predictions", DEFAULT_START_PREDICTIONS))
    if options.pop("no_profiles", False) and lucid_inputs is not None:
        lucid_inputs = (None, lucid_inputs[1])
    annotator: WalkForwardEstimates | None = None
    try:
        policy = make_policy(name, BuildContext(overrides=options.get("overrides", {})))
        annotator = WalkForwardEstimates(jobs) if needs_estimates(name) else None
        world: World | None = None
        forecasts: list[tuple[float, Forecast]] = []
        if needs_profiler(name) and lucid_inputs is not None:
            profiles, all_forecasts = lucid_inputs
            forecasts = all_forecasts if needs_forecasts(name) else []
            if profiles is not None:
                world = LucidWorld.from_directory(profiles, annotator)
        explain = options_explain.get("job")
        result = simulate(
            jobs,
            cluster,
            policy,
            config,
            progress,
            annotator=annotator,
            world=world,
            forecasts=forecasts,
            explain=explain,
            predict_every=max(1, len(jobs) // predictions) if predictions else 0,
            progress_reports=reports,
        )
        return PolicyRun(name, result, explanation=_detail(explain, annotator, world, jobs))
    except (ValueError, RuntimeError) as exc:
        return PolicyRun(name, None, str(exc))
    finally:
        if annotator is not None:
            annotator.close()


def run_policies(
    jobs: Sequence[JobSpec],
    cluster: Cluster,
    policies: Sequence[str],
    config: SchedulerConfig | None = None,
    options: dict[str, Any] | None = None,
    processes: int | None = None,
    on_progress: Callable[[Sequence[float]], None] | None = None,
    exit_within_s: float = EXIT_WITHIN_S,
) -> list[PolicyRun]:
    """Simulate each policy in its own process (``processes=1`` runs in this one); a
    worker that has not exited ``exit_within_s`` after its result fails its replay."""
    config = config or SchedulerConfig()
    options = options or {}
    for name in policies:
        make_policy(name, BuildContext(overrides=options.get("overrides", {})))
    workers = processes if processes is not None else min(len(policies), os.cpu_count() or 1)
    global _payload, _lucid_inputs
    _payload = (jobs, cluster, config, options)
    if any(needs_profiler(p) for p in policies):
        tuned = any(needs_forecasts(p) for p in policies)
        _lucid_inputs = (profile_dir(), walk_forward_forecasts(jobs) if tuned else [])
    tasks = list(enumerate(policies))
    if workers <= 1 or len(policies) == 1:
        shared = [0.0] * len(policies)
        _init_worker(shared)
        runs = []
        for task in tasks:
            runs.append(_run_one(task))
            if on_progress:
                on_progress(shared)
        _init_worker(None)
        _payload = None
        return runs
    shared_array = mp.get_context("fork").Array("d", len(policies), lock=False)
    _init_worker(shared_array)  # the workers, forked, inherit it

    def tick() -> None:
        if on_progress:
            on_progress(list(shared_array))

    # a worker per policy that must exit soon after its result: one stuck in
    # multiprocessing's exit (joining a child that never ends) fails its replay,
    # named, instead of holding the run for ever; one that dies, or whose result
    # cannot be read back, fails the run (WorkerDied, a BrokenProcessPool)
    try:
        runs = [
            outcome.value
            if outcome.stuck is None
            else PolicyRun(outcome.value.name, None, str(outcome.stuck))
            for outcome in run_forked(_run_one, tasks, workers, list(policies), exit_within_s, tick)
        ]
    finally:
        _init_worker(None)
        _payload = None
    if on_progress:
        on_progress([1.0] * len(policies))
    return runs
