"""Dataclasses whose ``__init__`` is written out by hand match their fields.

Why written out: the compiled core (the wheel, setup.py) leaves a dataclass's generated
``__init__`` to the interpreter, and a replay builds millions of jobs, placements,
decisions and records; a hand-written one compiles to direct stores, about 15x
faster per object. The price is a second list of the fields, so this test reads
every such class in the package and checks, from the source, that its ``__init__``
takes exactly the fields, in order, with the same defaults, stores each argument
into its own field once, and ends by calling ``__post_init__`` where one exists.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import pickle
from pathlib import Path

import pytest

from ilucid.core.decision import Action, Decision
from ilucid.core.model import JobClass, JobSpec, Placement
from ilucid.core.picklable import REGISTERED
from ilucid.sim.replay_types import JobRecord

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "ilucid"


def _is_dataclass(node: ast.ClassDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Name) and target.id == "dataclass":
            return True
    return False


def _fields(node: ast.ClassDef) -> list[tuple[str, str | None]]:
    fields = []
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            if "ClassVar" in ast.unparse(item.annotation):
                continue
            default = None if item.value is None else ast.unparse(item.value)
            fields.append((item.target.id, default))
    return fields


def _stored(init: ast.FunctionDef) -> list[tuple[str, str]]:
    """(field, argument) for each store: ``object.__setattr__(self, "f", a)`` or
    ``self.f = a``."""
    stores = []
    for statement in init.body:
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            call = statement.value
            if ast.unparse(call.func) == "object.__setattr__":
                name, value = call.args[1], call.args[2]
                assert isinstance(name, ast.Constant)
                stores.append((str(name.value), ast.unparse(value)))
        elif isinstance(statement, ast.Assign):
            (target,) = statement.targets
            if isinstance(target, ast.Attribute) and ast.unparse(target.value) == "self":
                stores.append((target.attr, ast.unparse(statement.value)))
    return stores


def written_inits() -> list[tuple[str, ast.ClassDef, ast.FunctionDef]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and _is_dataclass(node):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                        found.append((f"{path.relative_to(PACKAGE)}:{node.name}", node, item))
    return found


WRITTEN = written_inits()


def test_the_hot_classes_are_among_those_found() -> None:
    names = {name.split(":")[1] for name, _, _ in WRITTEN}
    assert {"JobSpec", "Placement", "Decision", "JobRecord"} <= names


@pytest.mark.parametrize("where", [name for name, _, _ in WRITTEN])
def test_a_written_init_takes_and_stores_exactly_the_fields(where: str) -> None:
    _, cls, init = next(item for item in WRITTEN if item[0] == where)
    fields = _fields(cls)
    arguments = init.args
    assert not arguments.kwonlyargs and arguments.vararg is None and arguments.kwarg is None
    names = [a.arg for a in arguments.args[1:]]
    defaults = [None] * (len(names) - len(arguments.defaults)) + [
        ast.unparse(d) for d in arguments.defaults
    ]
    assert list(zip(names, defaults, strict=True)) == fields, f"{where}: arguments differ"
    assert _stored(init) == [(name, name) for name, _ in fields], f"{where}: stores differ"
    has_post_init = any(
        isinstance(item, ast.FunctionDef) and item.name == "__post_init__" for item in cls.body
    )
    calls_it = ast.unparse(init.body[-1]) == "self.__post_init__()"
    assert has_post_init == calls_it, f"{where}: __post_init__ must end __init__ if defined"


def test_written_inits_behave_as_generated_ones() -> None:
    """Keyword and positional construction, defaults, ``replace`` and validation, in
    whichever core (compiled or pure) this run loaded."""
    spec = JobSpec("j", 1.0, 2, 30.0, tenant="t", estimate=40.0)
    assert spec == JobSpec(id="j", submit_time=1.0, num_gpus=2, duration=30.0, tenant="t",
                           estimate=40.0)  # fmt: skip
    assert (spec.job_class, spec.user, spec.gpu_milli, spec.preferred_gpu_types) == (
        JobClass.TRAINING, "default", 1000, ()
    )  # fmt: skip
    assert dataclasses.replace(spec, estimate=5.0).estimate == 5.0
    with pytest.raises(ValueError, match="num_gpus must be >= 0"):
        JobSpec("bad", 0.0, -1, 1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.estimate = 3.0  # type: ignore[misc]
    placement = Placement(((0, 2),))
    assert (placement.share, placement.milli, placement.num_gpus) == (None, 1000, 2)
    decision = Decision(Action.START, "j", placement, limit_s=60.0)
    assert (decision.reasons, decision.limit_s, decision.lost_s) == ((), 60.0, 0.0)
    record = JobRecord("j", 1.0, 2, 30.0, "training", "t")
    assert (record.first_start, record.main_start, record.wait_reason) == (-1.0, -1.0, "")
    assert [f.name for f in dataclasses.fields(JobRecord)][-1] == "projected_start"
    assert (record.predicted_low, record.predicted_high, record.projected_start) == (-1.0,) * 3


@pytest.mark.parametrize("where", [name for name, _, _ in WRITTEN])
def test_a_class_with_a_written_init_pickles_by_its_fields(where: str) -> None:
    """Compiled, ``__new__`` runs a written ``__init__`` (with no arguments), so the
    default unpickling (``__new__``, then the state) fails: each registers a reducer."""
    path, name = where.split(":")
    module = importlib.import_module("ilucid." + path.removesuffix(".py").replace("/", "."))
    assert getattr(module, name) in REGISTERED


def test_objects_with_written_inits_round_trip_through_pickle() -> None:
    record = JobRecord("j", 1.0, 2, 30.0, "training", "t", first_start=4.0, packed=1)
    spec = JobSpec("j", 1.0, 2, 30.0, estimate=40.0)
    decision = Decision(Action.START, "j", Placement(((0, 2),), milli=500), limit_s=60.0)
    for value in (record, spec, decision):
        assert pickle.loads(pickle.dumps(value)) == value
