"""The package's shape, read from the source (AST, nothing imported): what issue 31 asks
of the extension surface. No module at the package root but ``__init__`` and
``__main__``; no import cycles among ilucid's modules; no re-export shims.

Which imports count towards a cycle: every ``import`` and ``from ... import`` of an ilucid
module anywhere in a module, at module level, under ``if TYPE_CHECKING:`` and inside
functions. A ``TYPE_CHECKING`` import is what keeps a design cycle alive (it is there
because the two modules still need each other's types), and a deferred import inside a
function is a cycle postponed to run time, not removed. Each edge goes to the module the
statement names (``from a.b import c`` -> ``a.b.c`` when that is a module, else ``a.b``);
the parent packages an import runs implicitly (``a/__init__`` for ``a.b``) are not edges,
as import-linter's graph does not count them either.
"""

from __future__ import annotations

import ast
import importlib.machinery
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "ilucid"
#: what may sit at the package root as a module
ROOT_MODULES = {"__init__", "__main__"}


def _module_name(path: Path) -> str:
    """``src/ilucid/core/__init__.py`` -> ``ilucid.core``, ``core/jobs.py`` -> its module."""
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


MODULES = _sources()


@dataclass(frozen=True)
class Edge:
    """One import statement of one ilucid module by another, and where it is."""

    importer: str
    imported: str
    line: int
    where: str  # "module level", "TYPE_CHECKING" or "in a function"

    def __str__(self) -> str:
        path = MODULES[self.importer].relative_to(SRC)
        return f"{self.importer} -> {self.imported} ({path}:{self.line}, {self.where})"


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _base_package(module: str, level: int) -> str:
    """The package a ``from`` import with ``level`` dots is relative to."""
    parts = module.split(".")
    if MODULES[module].name != "__init__.py":
        parts = parts[:-1]
    return ".".join(parts[: len(parts) - (level - 1)])


def _target(module: str, node: ast.Import | ast.ImportFrom, alias: ast.alias) -> str | None:
    """The ilucid module one name of an import statement names, if any."""
    if isinstance(node, ast.Import):
        return alias.name if alias.name in MODULES else None
    base = node.module or ""
    if node.level:
        package = _base_package(module, node.level)
        base = f"{package}.{base}" if base else package
    submodule = f"{base}.{alias.name}"
    if submodule in MODULES:
        return submodule
    return base if base in MODULES else None


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The ilucid modules one import statement names."""
    for alias in node.names:
        if (target := _target(module, node, alias)) is not None:
            yield target


def _walk(node: ast.AST, where: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement below ``node`` with where it sits."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, where
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from _walk(child, "in a function")
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            inner = where if where == "in a function" else "TYPE_CHECKING"
            for statement in child.body:
                yield from _walk(ast.Module(body=[statement], type_ignores=[]), inner)
            for statement in child.orelse:
                yield from _walk(ast.Module(body=[statement], type_ignores=[]), where)
        else:
            yield from _walk(child, where)


def _parse(module: str) -> ast.Module:
    path = MODULES[module]
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def import_graph() -> dict[str, list[Edge]]:
    """Each ilucid module's imports of other ilucid modules."""
    graph: dict[str, list[Edge]] = {module: [] for module in MODULES}
    for module in MODULES:
        for node, where in _walk(_parse(module), "module level"):
            for target in _targets(module, node):
                if target != module:
                    graph[module].append(Edge(module, target, node.lineno, where))
    return graph


def _strongly_connected(graph: dict[str, list[Edge]]) -> list[set[str]]:
    """Tarjan's components of more than one module (iterative: the graph is deep)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted({e.imported for e in graph[root]})))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted({e.imported for e in graph[child]}))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(component)
    return found


def _shortest_path(
    graph: dict[str, list[Edge]], start: str, goal: str, within: set[str]
) -> list[Edge]:
    """The fewest imports leading from ``start`` to ``goal`` inside one component."""
    came: dict[str, Edge | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            break
        for edge in graph[node]:
            if edge.imported in within and edge.imported not in came:
                came[edge.imported] = edge
                queue.append(edge.imported)
    path = []
    node = goal
    while (edge := came[node]) is not None:
        path.append(edge)
        node = edge.importer
    return path[::-1]


def import_cycles(graph: dict[str, list[Edge]]) -> list[list[Edge]]:
    """One shortest cycle through each import edge that lies on a cycle, without repeats
    (a cycle read from any of its modules is the same cycle)."""
    cycles: dict[frozenset[tuple[str, str]], list[Edge]] = {}
    for component in _strongly_connected(graph):
        for module in sorted(component):
            for edge in graph[module]:
                if edge.imported not in component:
                    continue
                cycle = [edge, *_shortest_path(graph, edge.imported, module, component)]
                key = frozenset((e.importer, e.imported) for e in cycle)
                cycles.setdefault(key, cycle)
    return list(cycles.values())


def _render(cycle: list[Edge]) -> str:
    modules = " -> ".join([cycle[0].importer, *(edge.imported for edge in cycle)])
    return modules + "\n    " + "\n    ".join(str(edge) for edge in cycle)


def _declared_all(tree: ast.Module) -> list[str]:
    """The names a module's ``__all__`` lists (literal assignments and ``+=``)."""
    names: list[str] = []
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        if not any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            continue
        value = node.value
        if isinstance(value, ast.List | ast.Tuple):
            names += [e.value for e in value.elts if isinstance(e, ast.Constant)]
    return [name for name in names if isinstance(name, str)]


def _module_level(tree: ast.Module) -> Iterator[ast.stmt]:
    """Statements that run at import, including those under ``if``/``try`` blocks."""
    for node in tree.body:
        yield node
        if isinstance(node, ast.If | ast.Try):
            blocks = [node.body, node.orelse]
            if isinstance(node, ast.Try):
                blocks += [node.finalbody, *(h.body for h in node.handlers)]
            for block in blocks:
                yield from _module_level(ast.Module(body=block, type_ignores=[]))


def reexports(module: str) -> dict[str, str]:
    """The names ``module``'s ``__all__`` lists that it only imports from another ilucid
    module (never defines itself), each with the module it comes from."""
    tree = _parse(module)
    imported: dict[str, str] = {}
    defined: set[str] = set()
    for node in _module_level(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                target = _target(module, node, alias)
                # ``import ilucid.a.b`` binds ``ilucid``, which no module lists
                if target is not None and (alias.asname or isinstance(node, ast.ImportFrom)):
                    imported[alias.asname or alias.name] = target
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                defined |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return {
        name: imported[name]
        for name in _declared_all(tree)
        if name in imported and name not in defined
    }


def test_the_package_root_holds_only_init_and_main() -> None:
    """Every module belongs to a subpackage; data files (``py.typed``) may sit at the root.
    Extension modules count as modules (a compiled one is importable like its source)."""
    suffixes = importlib.machinery.all_suffixes()
    stray = sorted(
        path.name
        for path in PACKAGE.iterdir()
        if path.is_file()
        and any(path.name.endswith(s) for s in suffixes)
        and path.name.split(".")[0] not in ROOT_MODULES
    )
    assert stray == [], f"modules at the root of {PACKAGE}: {stray}; move each into a package"


def test_no_import_cycles_among_ilucid_modules() -> None:
    cycles = import_cycles(import_graph())
    report = "\n".join(_render(cycle) for cycle in cycles)
    assert cycles == [], f"{len(cycles)} import cycles:\n{report}"


def test_no_module_reexports_what_another_ilucid_module_defines() -> None:
    """A package's ``__init__`` may gather its package's names; any other module's
    ``__all__`` lists only what it defines, so each name has one home to import from."""
    shims = {
        module: names
        for module, path in MODULES.items()
        if path.name != "__init__.py" and (names := reexports(module))
    }
    report = "\n".join(
        f"{MODULES[module].relative_to(SRC)}: "
        + ", ".join(f"{name} (from {home})" for name, home in sorted(names.items()))
        for module, names in sorted(shims.items())
    )
    assert shims == {}, f"re-export shims (import these from their home):\n{report}"


# the checks themselves, on small made-up trees: each must find what it is for


def test_the_cycle_search_reports_each_cycle_as_a_path() -> None:
    def edge(a: str, b: str) -> Edge:
        return Edge(a, b, 1, "module level")

    graph = {
        "a": [edge("a", "b")],
        "b": [edge("b", "a"), edge("b", "c")],
        "c": [edge("c", "d")],
        "d": [edge("d", "c"), edge("d", "e")],
        "e": [],
    }
    paths = sorted(
        " -> ".join([c[0].importer, *(e.imported for e in c)]) for c in import_cycles(graph)
    )
    assert paths == ["a -> b -> a", "c -> d -> c"]
    graph["e"].append(edge("e", "a"))
    graph["c"].append(edge("c", "b"))
    components = _strongly_connected(graph)
    assert [sorted(c) for c in components] == [["a", "b", "c", "d", "e"]]
