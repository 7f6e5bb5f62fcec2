"""The core stays pure: standard library only, no I/O, no clock (see DESIGN.md)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import ilucid.core

CORE = Path(ilucid.core.__file__).parent
FORBIDDEN_STDLIB = {
    "subprocess",
    "socket",
    "threading",
    "asyncio",
    "sqlite3",
    "time",
    "datetime",
    "random",
    "os",
    "io",
    "multiprocessing",
    "logging",
}
FORBIDDEN_CALLS = {"open", "print", "input"}


def core_modules() -> list[Path]:
    return sorted(CORE.rglob("*.py"))


def test_core_imports_only_the_standard_library_and_itself() -> None:
    """And mypy_extensions: a compile hint (mypyc_attr) that does nothing at run time."""
    offenders = []
    for path in core_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if (name.startswith("ilucid.") and not name.startswith("ilucid.core")) or (
                    top not in ("ilucid", "__future__", "mypy_extensions")
                    and (top not in sys.stdlib_module_names or top in FORBIDDEN_STDLIB)
                ):
                    offenders.append(f"{path.name}: {name}")
    assert offenders == []


def test_core_does_no_io() -> None:
    calls = []
    for path in core_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in FORBIDDEN_CALLS
            ):
                calls.append(f"{path.name}:{node.lineno}: {node.func.id}()")
    assert calls == []
