"""Trace loaders: public cluster traces and ilucid's generic format, with clear errors."""

from ilucid.traces.formats import GENERIC_COLUMNS, Trace
from ilucid.traces.inference import InferenceTrace, load_dlrm, overlay_inference
from ilucid.traces.reader import TraceError
from ilucid.traces.resolve import (
    DEFAULT_LOAD,
    KNOWN_INFERENCE,
    KNOWN_TRACES,
    cluster_for_load,
    load_inference,
    load_trace,
    trace_dir,
)
from ilucid.traces.synthetic import synthetic_trace

__all__ = [
    "DEFAULT_LOAD",
    "GENERIC_COLUMNS",
    "KNOWN_INFERENCE",
    "KNOWN_TRACES",
    "InferenceTrace",
    "Trace",
    "TraceError",
    "cluster_for_load",
    "load_dlrm",
    "load_inference",
    "load_trace",
    "overlay_inference",
    "synthetic_trace",
    "trace_dir",
]
