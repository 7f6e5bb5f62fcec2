"""One owner of every move: only the job store writes a job's lifecycle fields.

Issue 30 found ``gpu_indices`` written at six places and ``end_time`` at four,
some without a transition row. Every field a move changes is now written by the
move's handler in :mod:`ilucid.service.job_store`; this test reads the service's
source and fails on an assignment anywhere else, and checks that the handler
table and the lifecycle's table of legal moves describe the same moves.
"""

from __future__ import annotations

import ast
from pathlib import Path

import ilucid
from ilucid.service.job_store import TRANSITIONS
from ilucid.service.lifecycle import LEGAL, Phase

#: the fields of ``JobRow`` a lifecycle move changes
OWNED = {
    "state",
    "gpu_indices",
    "first_start",
    "end_time",
    "exit_code",
    "preemptions",
    "attempts",
    "retry_at",
    "stopping",
    "profile_until",
}
ROOT = Path(ilucid.__file__).resolve().parent


def _writes(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            if (
                isinstance(target, ast.Attribute)
                and target.attr in OWNED
                and not (isinstance(target.value, ast.Name) and target.value.id == "self")
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{target.attr}")
    return found


def test_only_the_job_store_writes_lifecycle_fields() -> None:
    writers = [
        hit
        for folder in ("service", "cli", "backends")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path.name != "job_store.py"
        for hit in _writes(path)
    ]
    assert not writers, "lifecycle fields written outside JobStore:\n" + "\n".join(writers)


def test_the_store_has_one_handler_for_each_legal_move() -> None:
    legal = {(a, b) for a, targets in LEGAL.items() for b in targets if a is not Phase.NEW}
    assert set(TRANSITIONS) == legal
