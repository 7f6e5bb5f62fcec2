"""Where each public trace comes from and which files its short name expects.

One table for ``ilucid traces`` and docs/traces.md, built from the loaders'
own file names (:data:`KNOWN_TRACES`, :data:`KNOWN_INFERENCE`), so that what
the command lists is what ``load_trace`` opens.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ilucid.traces.resolve import ALIBABA_NODES, KNOWN_INFERENCE, KNOWN_TRACES

__all__ = ["TRACE_SOURCES", "ExpectedFile", "TraceSource", "expected_files", "source_of"]


@dataclass(frozen=True, slots=True)
class TraceSource:
    """A public trace's origin: the repository and path to download, and its licence."""

    folder: str
    repository: str
    download: str
    licence: str


#: by the folder the short names expect inside ILUCID_TRACE_DIR
TRACE_SOURCES: dict[str, TraceSource] = {
    "philly-rfold": TraceSource(
        "philly-rfold",
        "https://github.com/shuoshuc/RFold",
        "WorkloadGen/data/philly_trace.csv (one row per job, converted from"
        " https://github.com/msr-fiddle/philly-traces)",
        "RFold: MIT; the Philly data: CC BY 4.0 (msr-fiddle/philly-traces)",
    ),
    "msft-itp": TraceSource(
        "msft-itp",
        "https://github.com/microsoft/elasticflow-traces",
        "data/raw-traces.tar.gz (one CSV per cluster; ilucid names the first five"
        " cluster01.csv .. cluster05.csv)",
        "MIT",
    ),
    "alibaba-gpu-v2023": TraceSource(
        "alibaba-gpu-v2023",
        "https://github.com/alibaba/clusterdata",
        "cluster-trace-gpu-v2023/csv/openb_pod_list_default.csv and openb_node_list_gpu_node.csv",
        "see the repository (its README allows research or study use; cite ATC'23)",
    ),
    "alibaba-gpu-v2025-dlrm": TraceSource(
        "alibaba-gpu-v2025-dlrm",
        "https://github.com/alibaba/clusterdata",
        "cluster-trace-gpu-v2025/disaggregated_DLRM_trace.csv",
        "see the repository (its README allows research or study use; cite NSDI'25)",
    ),
}


@dataclass(frozen=True, slots=True)
class ExpectedFile:
    """A file a short name reads, relative to the trace folder."""

    relative: str
    required: bool
    role: str


def expected_files(name: str) -> list[ExpectedFile]:
    """The files ``name`` (a trace or inference short name) reads inside the trace folder."""
    if name in KNOWN_TRACES:
        files = [ExpectedFile(KNOWN_TRACES[name], True, "jobs")]
        if name == "alibaba":
            files.append(ExpectedFile(ALIBABA_NODES, False, "nodes, optional"))
        return files
    if name in KNOWN_INFERENCE:
        return [ExpectedFile(KNOWN_INFERENCE[name], True, "inference instances")]
    raise KeyError(f"unknown trace name {name!r}")


def source_of(relative: str) -> TraceSource:
    """The source of a file named relative to the trace folder (by its first folder)."""
    return TRACE_SOURCES[Path(relative).parts[0]]
