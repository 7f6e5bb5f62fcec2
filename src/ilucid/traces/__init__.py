"""Trace loaders: public cluster traces and ilucid's generic format, with clear errors."""

from ilucid.traces.formats import GENERIC_COLUMNS, Trace
from ilucid.traces.reader import TraceError
from ilucid.traces.resolve import (
    DEFAULT_LOAD,
    KNOWN_TRACES,
    cluster_for_load,
    load_trace,
    trace_dir,
)
from ilucid.traces.synthetic import synthetic_trace

__all__ = [
    "DEFAULT_LOAD",
    "GENERIC_COLUMNS",
    "KNOWN_TRACES",
    "Trace",
    "TraceError",
    "cluster_for_load",
    "load_trace",
    "synthetic_trace",
    "trace_dir",
]
