"""The replay engine stands apart from the studies built on it (issue 31).

``sim/`` holds the engine and what ``ilucid simulate`` needs; the studies live in
``ilucid.studies``. Read from the source (AST), so a lazy import inside a function
counts too, and nothing is imported to check.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "ilucid"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, anywhere in it (``from a import b`` gives ``a`` and
    ``a.b``, as ``b`` may be a submodule)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _sim_modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted((PACKAGE / "sim").rglob("*.py"))}


def test_nothing_under_sim_imports_a_study() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)} imports {name}"
        for path in _sim_modules().values()
        for name in sorted(_imports(path))
        if name == "ilucid.studies" or name.startswith("ilucid.studies.")
    ]
    assert not found, found


def test_every_module_under_sim_serves_the_simulate_command() -> None:
    """Each module in ``sim/`` is reached from ``ilucid simulate``'s imports: a study left
    in ``sim/`` (``mixed``, ``hetero``, ``sharded``, ...) is reached from none."""
    modules = _sim_modules()
    reached = {"ilucid.sim"}  # a package's __init__ runs with any of its modules
    todo = [PACKAGE / "cli" / "simulate.py", modules["ilucid.sim"]]
    while todo:
        for name in _imports(todo.pop()):
            if name in modules and name not in reached:
                reached.add(name)
                todo.append(modules[name])
    assert sorted(set(modules) - reached) == []
    assert {"ilucid.sim.engine", "ilucid.sim.runner", "ilucid.sim.lucid_world"} <= reached


def test_no_module_in_sim_or_the_studies_re_exports_a_name() -> None:
    """``__all__`` lists only what the module itself defines, and the packages'
    ``__init__`` import nothing: each name is imported from where it is defined."""
    shims = []
    for folder in ("sim", "studies"):
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            imported = {
                alias.asname or alias.name.split(".")[0]
                for node in tree.body
                if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in node.names
                if not (isinstance(node, ast.ImportFrom) and node.module == "__future__")
            }
            if path.name == "__init__.py" and imported:
                shims.append(f"{path.relative_to(PACKAGE.parent)} imports {sorted(imported)}")
            for node in tree.body:
                if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
                ):
                    listed = set(ast.literal_eval(node.value))
                    shims.extend(
                        f"{path.relative_to(PACKAGE.parent)} re-exports {name}"
                        for name in sorted(listed & imported)
                    )
    assert not shims, shims
