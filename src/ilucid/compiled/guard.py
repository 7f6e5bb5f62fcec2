"""Which scheduling core runs: the compiled one (mypyc) or the Python source.

``make native`` (run by ``make serve``, ``make test`` and the benchmarks)
compiles the replay's hot modules with mypyc into extension modules beside
their sources, and writes a manifest of the sources it compiled, by hash. The
extension modules are the same code: a replay through either gives the same
jobs CSV, byte for byte. They are only trusted while they match: a source
edited since the build, a missing library or ``ILUCID_PURE=1`` makes every
compiled module load from its source instead, all of them together (compiled
modules call each other directly, so a mix would run stale code).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType

__all__ = [
    "MANIFEST",
    "SRC",
    "NativeStatus",
    "install",
    "module_source",
    "source_hash",
    "status",
]

#: the ``src/`` directory: compiled modules and the shared library sit below it
SRC = Path(__file__).resolve().parents[2]
#: written by the build, last: {"modules": {name: sha256 of its source}, "library": file
#: (relative to SRC)}
MANIFEST = Path(__file__).resolve().with_name("manifest.json")


def source_hash(path: Path) -> str:
    """What the manifest records of a compiled module's source."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def module_source(name: str, src_root: Path = SRC) -> Path:
    """``ilucid.core.jobs`` -> ``.../src/ilucid/core/jobs.py``."""
    return src_root.joinpath(*name.split(".")).with_suffix(".py")


class NativeStatus:
    """Whether the compiled core is in use, and if not, why not (one line)."""

    def __init__(self, compiled: bool, detail: str) -> None:
        self.compiled = compiled
        self.detail = detail

    def __str__(self) -> str:
        return f"{'compiled' if self.compiled else 'pure Python'} ({self.detail})"


class _SourceFirst(importlib.abc.MetaPathFinder):
    """Loads the listed modules from their ``.py`` even where an extension module sits."""

    def __init__(self, modules: Mapping[str, Path]) -> None:
        self.modules = dict(modules)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        source = self.modules.get(fullname)
        if source is None:
            return None
        return importlib.util.spec_from_file_location(fullname, source)


_status = NativeStatus(False, "not built: `make native` compiles it")


def _check(
    manifest: Path, src: Path, environ: Mapping[str, str]
) -> tuple[NativeStatus, dict[str, Path]]:
    """The status the manifest gives for the tree under ``src``, and the modules to load
    from source (all listed ones unless the compiled core is fresh and wanted)."""
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
        hashes: dict[str, str] = dict(data["modules"])
        library = src / str(data["library"])
    except FileNotFoundError:
        # extension modules without a manifest are a build this checkout no longer
        # describes (an older release's, or a manifest that moved): never load them
        return NativeStatus(False, "not built: `make native` compiles it"), _strays(src)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return NativeStatus(False, f"{manifest}: unreadable manifest ({exc})"), _strays(src)
    sources = {name: module_source(name, src) for name in hashes}
    if environ.get("ILUCID_PURE", "") not in ("", "0"):
        return NativeStatus(False, "ILUCID_PURE is set"), sources
    if not library.is_file():
        return NativeStatus(False, f"{library.name} is missing: `make native`"), sources
    for name, path in sources.items():
        try:
            fresh = source_hash(path) == hashes[name]
        except OSError:
            fresh = False
        if not fresh:
            return NativeStatus(False, f"{path} changed since the build: `make native`"), sources
    return NativeStatus(True, f"{len(hashes)} modules, mypyc"), {}


def _strays(src: Path) -> dict[str, Path]:
    """Every extension module under ``src/ilucid`` that sits beside its ``.py``."""
    found: dict[str, Path] = {}
    for library in (src / "ilucid").rglob("*.so"):
        source = library.with_name(library.name.split(".", 1)[0] + ".py")
        if source.is_file():
            parts = source.relative_to(src).with_suffix("").parts
            found[".".join(parts)] = source
    return found


def install(
    manifest: Path = MANIFEST, src: Path = SRC, environ: Mapping[str, str] = os.environ
) -> NativeStatus:
    """Decide once, before any compiled module is imported (``ilucid/__init__``)."""
    global _status
    _status, fallback = _check(manifest, src, environ)
    if fallback:
        sys.meta_path.insert(0, _SourceFirst(fallback))
    return _status


def status() -> NativeStatus:
    """The decision :func:`install` took for this process."""
    return _status
