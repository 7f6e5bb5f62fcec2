"""Resolve a trace name or path, and size a cluster for traces that have none."""

from __future__ import annotations

import math
import os
from pathlib import Path

from ilucid.core import Cluster, JobSpec
from ilucid.traces.formats import (
    Trace,
    load_alibaba,
    load_generic,
    load_helios,
    load_itp,
    load_philly,
)
from ilucid.traces.inference import InferenceTrace, load_dlrm
from ilucid.traces.reader import TraceError, header_names

__all__ = [
    "DEFAULT_LOAD",
    "KNOWN_INFERENCE",
    "KNOWN_TRACES",
    "cluster_for_load",
    "load_inference",
    "load_trace",
    "trace_dir",
]

#: Nominal offered load of the traces' size convention (docs/traces.md).
DEFAULT_LOAD = 0.85

#: Short names resolved inside the trace directory.
KNOWN_TRACES: dict[str, str] = {
    "philly": "philly-rfold/philly_trace.csv",
    **{f"itp-0{i}": f"msft-itp/cluster0{i}.csv" for i in range(1, 6)},
    "alibaba": "alibaba-gpu-v2023/openb_pod_list_default.csv",
}
ALIBABA_NODES = "alibaba-gpu-v2023/openb_node_list_gpu_node.csv"
#: Inference instance lists (not job traces): overlaid on a training trace.
KNOWN_INFERENCE: dict[str, str] = {
    "alibaba-dlrm": "alibaba-gpu-v2025-dlrm/disaggregated_DLRM_trace.csv",
}


def load_inference(name_or_path: str, directory: Path | None = None) -> InferenceTrace:
    """Load an inference instance list by short name (``alibaba-dlrm``) or path."""
    directory = directory or trace_dir()
    if name_or_path in KNOWN_INFERENCE:
        if directory is None:
            raise TraceError(
                name_or_path,
                None,
                None,
                "is a trace name; set ILUCID_TRACE_DIR to the folder holding the public traces",
            )
        path = directory / KNOWN_INFERENCE[name_or_path]
    else:
        path = Path(name_or_path)
    if not path.exists():
        raise TraceError(path, None, None, "inference trace not found")
    return load_dlrm(path)


def trace_dir() -> Path | None:
    """``ILUCID_TRACE_DIR`` when set; the product never requires it."""
    value = os.environ.get("ILUCID_TRACE_DIR")
    return Path(value) if value else None


def _detect(path: Path) -> str:
    names = set(header_names(path))  # refuses binary and non-UTF-8 files with their line
    if "arrival time (sec)" in names:
        return "philly"
    if {"submission_time", "num_gpu"} <= names:
        return "itp"
    if {"gpu_milli", "qos", "creation_time"} <= names:
        return "alibaba"
    if {"vc", "gpu_num", "submit_time"} <= names:
        return "helios"
    if {"id", "submit_time"} <= names:
        return "generic"  # the loader names any missing generic column
    raise TraceError(
        path,
        1,
        None,
        "unknown trace format; expected Philly (RFold), ITP, Alibaba v2023, Helios/Lucid"
        " or the generic columns id,submit_time,num_gpus,duration",
    )


def load_trace(
    name_or_path: str, directory: Path | None = None, *, limit: int | None = None
) -> Trace:
    """Load a trace by short name (inside ``directory`` or ``ILUCID_TRACE_DIR``) or path;
    with ``limit``, only its first ``limit`` jobs, reading no further."""
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be at least 1 job, got {limit}")
    directory = directory or trace_dir()
    if name_or_path in KNOWN_TRACES:
        if directory is None:
            raise TraceError(
                name_or_path,
                None,
                None,
                "is a trace name; set ILUCID_TRACE_DIR to the folder holding the public traces"
                " (docs/traces.md says where to download each and how to lay them out)"
                " or pass a file path",
            )
        path = directory / KNOWN_TRACES[name_or_path]
        if not path.exists():
            raise TraceError(path, None, None, f"trace {name_or_path!r} not found in {directory}")
        if name_or_path == "alibaba":
            trace = load_alibaba(path, directory / ALIBABA_NODES, limit)
        else:
            trace = _load_path(path, limit)
        trace.name = name_or_path
        return trace
    path = Path(name_or_path)
    if not path.exists():
        known = ", ".join(KNOWN_TRACES)
        raise TraceError(path, None, None, f"no such file (known trace names: {known})")
    return _load_path(path, limit)


def _load_path(path: Path, limit: int | None) -> Trace:
    kind = _detect(path)
    if kind == "alibaba":
        sibling = path.parent / Path(ALIBABA_NODES).name
        return load_alibaba(path, sibling if sibling.exists() else None, limit)
    loader = {
        "philly": load_philly,
        "itp": load_itp,
        "helios": load_helios,
        "generic": load_generic,
    }[kind]
    return loader(path, limit)


def cluster_for_load(
    jobs: list[JobSpec], load: float = DEFAULT_LOAD, gpus_per_node: int = 8
) -> Cluster:
    """Nodes so the trace offers ``load`` of the cluster's GPU capacity over its arrival span.

    ``nodes = max(ceil(GPU-seconds / (gpus_per_node * load * span)),
    ceil(largest job / gpus_per_node))`` (the size convention in docs/traces.md).
    """
    if not jobs:
        raise ValueError("cannot size a cluster for an empty trace")
    if load <= 0:
        raise ValueError(f"load must be > 0, got {load}")
    work = sum(j.num_gpus * j.duration for j in jobs)
    span = max(jobs[-1].submit_time - jobs[0].submit_time, 1.0)
    largest = max(j.num_gpus for j in jobs)
    nodes = max(
        math.ceil(work / (gpus_per_node * load * span)),
        math.ceil(largest / gpus_per_node),
        1,
    )
    return Cluster.homogeneous(nodes, gpus_per_node)
