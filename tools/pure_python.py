"""Run ilucid's Python sources rather than the installed wheel (tests and benchmarks).

``make wheel`` installs the compiled build into the venv; a process whose
``PYTHONPATH`` starts with ``src/`` imports the same modules from their sources. Tests
that patch a compiled class, or read annotations a compiled dataclass does not keep,
run their check again that way.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"


def pure_env(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """``environ`` with ``src/`` first on ``PYTHONPATH``."""
    rest = environ.get("PYTHONPATH", "")
    return {**environ, "PYTHONPATH": os.pathsep.join(p for p in (str(SRC), rest) if p)}


def runs_compiled() -> bool:
    """Whether this process imported the compiled core."""
    from ilucid.cli.core_build import core_build

    return core_build().startswith("compiled")
