"""One way to turn a ``--trace`` value into a trace: a file, a short name, or ``synthetic``.

Every command that takes ``--trace`` (``simulate``, ``sweep``, ``model``, the studies)
resolves it here, so ``synthetic`` means the same generated trace everywhere.
"""

from __future__ import annotations

from ilucid.traces.formats import Trace
from ilucid.traces.resolve import load_trace
from ilucid.traces.synthetic import synthetic_trace

__all__ = ["SYNTHETIC", "SYNTHETIC_JOBS", "load_named"]

#: the ``--trace`` value that asks for generated data (:mod:`ilucid.traces.synthetic`)
SYNTHETIC = "synthetic"
#: jobs in the synthetic trace unless a limit says otherwise
SYNTHETIC_JOBS = 5000


def load_named(name: str, *, limit: int | None = None, seed: int = 0) -> Trace:
    """``synthetic`` (``limit`` jobs, else :data:`SYNTHETIC_JOBS`, drawn with ``seed``),
    else the trace file or short name, its first ``limit`` jobs."""
    if name == SYNTHETIC:
        return synthetic_trace(jobs=limit or SYNTHETIC_JOBS, seed=seed)
    return load_trace(name, limit=limit)
