"""Which build of the scheduling core this process runs: the wheel's compiled modules
(mypyc, see ``setup.py``) or their Python source. ``ilucid --version`` and every
replay's ``summary.json`` say it, so that a timing or a bug report names the build."""

from __future__ import annotations

import importlib
import importlib.machinery
from pathlib import Path

__all__ = ["compiled_modules", "core_build"]

#: a module every compiled build compiles: the core's scheduler
_PROBE = "ilucid.core.scheduler"


def compiled_modules(package: Path | None = None) -> list[str]:
    """The extension modules installed inside the package, as module names."""
    root = package or Path(__file__).resolve().parents[1]
    found = set()
    for path in root.rglob("*.*"):
        # the most specific suffix first (.cpython-311-x86_64-linux-gnu.so before .so)
        suffixes = importlib.machinery.EXTENSION_SUFFIXES
        suffix = next((s for s in suffixes if path.name.endswith(s)), "")
        if suffix:
            parts = path.relative_to(root.parent).parts
            found.add(".".join([*parts[:-1], path.name[: -len(suffix)]]))
    return sorted(found)


def core_build() -> str:
    """``compiled (mypyc, 32 modules)`` or ``pure Python (...why...)``, one line."""
    probe = importlib.import_module(_PROBE)
    where = str(getattr(probe, "__file__", "") or "")
    if where.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
        return f"compiled (mypyc, {len(compiled_modules())} modules)"
    # short: argparse wraps --version's line at 80 columns
    if compiled_modules():
        return "pure Python (its sources run ahead of the compiled install)"
    return "pure Python (no compiled modules in this install)"
