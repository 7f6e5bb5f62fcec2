"""One cell of a sweep: a replay through ``ilucid simulate``'s own path, as a table row.

:func:`run_cell` is what a Dask worker (or the sweep's own process, with
``--workers 0``) runs. It prepares the replay as ``ilucid simulate`` does (the
cluster from the unperturbed trace, jobs no node can hold left out, the restore
overheads) and replays it with :func:`ilucid.sim.runner.run_policies` in the
worker's process, so a cell's figures are those of the simulate command.
"""

from __future__ import annotations

import functools
import math
import os
import socket
import threading
import time
import warnings
from typing import Any

from ilucid.core import Cluster, JobClass, JobSpec, RestoreOverhead, SchedulerConfig
from ilucid.core.placement import never_placeable
from ilucid.core.policies import is_known, tiresias_overrides
from ilucid.settings.profile_file import is_profile_file, resolve_policy
from ilucid.sim.metrics import summarize
from ilucid.sim.runner import run_policies
from ilucid.studies.mixed import class_summary
from ilucid.sweep.grid import Cell, Settings
from ilucid.sweep.perturb import perturb
from ilucid.traces import (
    DEFAULT_LOAD,
    InferenceTrace,
    Trace,
    cluster_for_load,
    load_inference,
    overlay_inference,
)
from ilucid.traces.named import load_named

__all__ = ["CellFailed", "cell_jobs", "resolve_profile", "run_cell"]

#: run_policies keeps its inputs in module globals: one replay at a time per process,
#: even on a worker started with several threads
_REPLAY = threading.Lock()
#: profile files this process has registered, path -> profile name
_RESOLVED: dict[str, str] = {}
_RESOLVING = threading.Lock()


class CellFailed(RuntimeError):
    """A cell whose replay could not run: a missing trace, a bad setting, a policy's error."""


def resolve_profile(name: str) -> str:
    """A profile's registered name; a profile file is read and registered once per process
    (the sweep's and each worker's)."""
    if not is_profile_file(name):
        if not is_known(name):
            raise ValueError(f"unknown profile {name!r} (`ilucid policies` lists them)")
        return name
    with _RESOLVING:
        if name not in _RESOLVED:
            _RESOLVED[name] = resolve_policy(name)
        return _RESOLVED[name]


@functools.lru_cache(maxsize=4)
def _trace(name: str, limit: int | None) -> Trace:
    """A worker reads each trace once, however many of its cells it runs."""
    return load_named(name, limit=limit)


@functools.lru_cache(maxsize=2)
def _inference(name: str) -> InferenceTrace:
    return load_inference(name)


def _cluster(trace: Trace, settings: Settings, basis: list[JobSpec]) -> Cluster:
    """``ilucid simulate``'s choice: --nodes, else the trace's node list, else --load."""
    if settings.nodes is not None:
        return Cluster.homogeneous(settings.nodes, settings.gpus_per_node)
    if settings.load is None and trace.cluster is not None:
        return trace.cluster
    load = DEFAULT_LOAD if settings.load is None else settings.load
    return cluster_for_load(basis, load, settings.gpus_per_node)


def cell_jobs(cell: Cell) -> tuple[list[JobSpec], Cluster]:
    """The jobs a cell replays and its cluster.

    The cluster is sized from the unperturbed trace, so every seed of a trace runs on
    the same cluster and seeds pair across profiles. An inference overlay is added
    after the perturbation (the services' lifetimes stay as recorded).
    """
    trace = _trace(cell.trace, cell.settings.limit)
    settings = cell.settings
    jobs = perturb(trace.jobs, cell.seed, cell.perturbation)
    if settings.inference is None:
        cluster = _cluster(trace, settings, list(trace.jobs))
    else:
        if any(j.job_class is JobClass.INFERENCE for j in trace.jobs):
            raise ValueError(f"{trace.source} has its own inference jobs: drop 'inference'")
        cluster = _cluster(trace, settings, list(trace.jobs))
        services = _inference(settings.inference)
        jobs = overlay_inference(jobs, services, cluster.total_gpus, settings.inference_share)
    refused = never_placeable(jobs, cluster)
    jobs = [j for j in jobs if j.id not in refused]
    if not jobs:
        raise ValueError(f"{trace.source}: no job fits a cluster of {cluster.total_gpus} GPUs")
    return jobs, cluster


def _figures(result: Any) -> dict[str, Any]:
    figures = summarize(result)
    if any(r.job_class == JobClass.INFERENCE.value for r in result.records):
        mixed = class_summary(result)
        figures.update(
            {
                k: mixed[k]
                for k in (
                    "avg_jct_training",
                    "p99_tts",
                    "inference_share",
                    "p99_queue_training",
                    "lost_gpu_hours",
                )
            }
        )
    return {k: v for k, v in figures.items() if not (isinstance(v, float) and math.isnan(v))}


def run_cell(cell: Cell) -> dict[str, Any]:
    """Replay one cell; its figures (``summarize``'s, plus per-class ones when the cell
    has inference jobs), where it ran and how long it took. Raises :class:`CellFailed`."""
    started = time.perf_counter()
    try:
        profile = resolve_profile(cell.profile)
        jobs, cluster = cell_jobs(cell)
        settings = cell.settings
        config = SchedulerConfig(
            RestoreOverhead(settings.overhead_small, settings.overhead_large),
            checkpoint_s=settings.checkpoint_s,
        )
        options: dict[str, Any] = {}
        if settings.tiresias_interval is not None or settings.tiresias_threshold is not None:
            options["overrides"] = tiresias_overrides(
                settings.tiresias_interval, settings.tiresias_threshold
            )
        with _REPLAY, warnings.catch_warnings():
            # in a Dask worker joblib runs the estimators' fits in one job (as in the
            # simulator's forked workers): the same figures, no need to say so per fit
            warnings.filterwarnings("ignore", message="Inside a Dask worker with daemon=True")
            (run,) = run_policies(jobs, cluster, [profile], config, options, processes=1)
    except (ValueError, OSError, RuntimeError) as exc:
        raise CellFailed(str(exc)) from None
    if run.result is None:
        raise CellFailed(str(run.error))
    return {
        **_figures(run.result),
        "worker": f"{socket.gethostname()}:{os.getpid()}",
        "elapsed_s": time.perf_counter() - started,
    }
