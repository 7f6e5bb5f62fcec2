"""Compile the replay's hot modules with mypyc, beside their sources (``make native``).

The same typed source, compiled: a replay gives the same results in about 3/4 of
the time.
The manifest (``src/ilucid/compiled/manifest.json``, written last) records each
compiled source's hash; ``ilucid.compiled.guard`` loads the extension modules only
while every hash still matches, so an edit never runs stale code. Without a C compiler or
mypyc the build says so and ilucid runs as pure Python (exit status 0; pass
``--strict`` to fail instead).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PACKAGE = SRC / "ilucid"
BUILD = ROOT / "build" / "native"
GROUP = "ilucid_native"

#: the modules a replay spends its time in: all of core, the engine and what it calls per
#: event, and every module that subclasses their classes. Not the modules that import
#: numpy or the EBM: mypyc must type-check what they import, which takes many minutes
MODULES = [
    *(f"core/{p.name}" for p in sorted((PACKAGE / "core").glob("*.py")) if p.name != "__init__.py"),
    *(
        f"core/policies/{p.name}"
        for p in sorted((PACKAGE / "core" / "policies").glob("*.py"))
        if p.name != "__init__.py"
    ),
    "sim/engine.py",
    "sim/explainer.py",
    "sim/replay_types.py",
    "studies/sharded.py",
    "estimators/features.py",
]


def module_name(relative: str) -> str:
    return "ilucid." + relative.removesuffix(".py").replace("/", ".")


def remove_built() -> int:
    """Delete every earlier build's extension modules and the manifest."""
    removed = 0
    for path in [*PACKAGE.rglob("*.so"), *SRC.glob(f"{GROUP}__mypyc*.so")]:
        path.unlink()
        removed += 1
    (PACKAGE / "compiled" / "manifest.json").unlink(missing_ok=True)  # guard.MANIFEST
    return removed


def source_hashes() -> dict[str, str]:
    """What the manifest records: each compiled module's source hash, by module name."""
    from ilucid.compiled.guard import module_source, source_hash

    return {module_name(m): source_hash(module_source(module_name(m), SRC)) for m in MODULES}


def build(jobs: int) -> Path:
    """Compile MODULES in place; the shared library's path."""
    from mypyc.build import mypycify
    from setuptools import setup

    sys.path.insert(0, str(SRC))
    from ilucid.compiled.guard import MANIFEST

    hashes = source_hashes()
    BUILD.mkdir(parents=True, exist_ok=True)
    cwd = os.getcwd()
    os.chdir(SRC)  # mypyc names modules by their path from here
    try:
        # what mypyc type-checks: see mypyc.ini (not pyproject's whole-package settings)
        options = ["--config-file", str(Path(__file__).with_name("mypyc.ini"))]
        extensions = mypycify(
            [*options, *module_paths()], group_name=GROUP, target_dir=str(BUILD / "c")
        )
        setup(
            name="ilucid-native",
            ext_modules=extensions,
            script_args=[
                "--quiet",
                "build_ext",
                "--inplace",
                f"--parallel={jobs}",
                f"--build-temp={BUILD / 'temp'}",
            ],
        )
    finally:
        os.chdir(cwd)
    library = next(SRC.glob(f"{GROUP}__mypyc*.so"))
    if source_hashes() != hashes:
        raise RuntimeError("sources changed during the build: run it again")
    manifest = {"modules": hashes, "library": library.name}
    MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return library


def module_paths() -> list[str]:
    """MODULES as paths from ``src/``, the names mypyc gives the compiled modules."""
    return [f"ilucid/{m}" for m in MODULES]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clean", action="store_true", help="only remove a build")
    parser.add_argument("--strict", action="store_true", help="fail when it cannot compile")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--list", action="store_true", help="print the sources it compiles")
    args = parser.parse_args(argv)
    if args.list:
        print(" ".join(f"src/{path}" for path in module_paths()))
        return 0
    removed = remove_built()
    if args.clean:
        print(f"removed {removed} compiled files: ilucid runs as pure Python")
        return 0
    if shutil.which(os.environ.get("CC", "cc")) is None and shutil.which("gcc") is None:
        print("native: no C compiler found: ilucid runs as pure Python", file=sys.stderr)
        return 1 if args.strict else 0
    started = time.monotonic()
    print(f"native: compiling {len(MODULES)} modules with mypyc (a few minutes) ...", flush=True)
    try:
        library = build(args.jobs)
    except (Exception, SystemExit) as exc:  # a failed compile must leave no partial build
        remove_built()
        print(f"native: build failed ({exc}): ilucid runs as pure Python", file=sys.stderr)
        return 1 if args.strict else 0
    print(f"native: built {library.name} in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
