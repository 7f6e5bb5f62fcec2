"""A site's own priority rule: a small arithmetic expression over job fields.

Operators write rules such as ``estimate * gpus / (1 + waited / 3600)`` in a
profile file. The text is parsed once with :mod:`ast` and compiled into a tree
of closures over a fixed vocabulary: numbers, the job fields below, ``+ - * /
// % **``, comparisons, ``a if cond else b``, ``and``/``or``/``not`` and a few
functions. Nothing else is accepted (no attribute access, no names outside
the vocabulary, no calls to anything else), and nothing is ever passed to
``eval``: a rule can compute, never act.

A rule's value is a priority: lower runs first. A rule that fails on a job
(division by zero, overflow) gives that job +inf, and the reason says why.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ilucid.core.jobs import JobState
from ilucid.core.model import JobClass
from ilucid.core.picklable import picklable

__all__ = ["FIELDS", "FUNCTIONS", "PriorityRule", "RuleError", "job_fields"]

#: the job fields a rule may read, and what each means (all numbers)
FIELDS: Mapping[str, str] = {
    "estimate": "estimated duration, s (the interpretable estimate, or the user's)",
    "gpus": "GPUs asked for",
    "waited": "seconds since the job last queued (submission or preemption)",
    "age": "seconds since submission",
    "attained": "GPU-seconds of service received so far",
    "ran": "seconds of service received so far",
    "remaining": "estimated seconds left: max(0, estimate - ran)",
    "priority": "the user's priority (higher is more important)",
    "preemptions": "times the job was preempted",
    "inference": "1 for an inference job, else 0",
    "best_effort": "1 for a best-effort job, else 0",
    "now": "the clock, s",
}

FUNCTIONS: Mapping[str, Callable[..., float]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "log": math.log,
    "log1p": math.log1p,
    "sqrt": math.sqrt,
    "exp": math.exp,
}

_BINARY: Mapping[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_COMPARE: Mapping[type[ast.cmpop], Callable[[float, float], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
#: a rule longer than this is refused (it is a priority, not a program)
MAX_RULE_CHARS = 500

Node = Callable[[Mapping[str, float]], float]


class RuleError(ValueError):
    """A rule that cannot be used; ``column`` is 1-based where the parser knows it."""

    def __init__(self, message: str, column: int | None = None) -> None:
        super().__init__(message if column is None else f"column {column}: {message}")
        self.column = column


def job_fields(job: JobState, now: float) -> dict[str, float]:
    """The values a rule sees for ``job`` at ``now``."""
    spec = job.spec
    gpus = max(1, spec.num_gpus)
    attained = job.attained_at(now)
    estimate = spec.expected_duration
    ran = attained / gpus
    return {
        "estimate": estimate,
        "gpus": float(spec.num_gpus),
        "waited": max(0.0, now - job.since),
        "age": max(0.0, now - spec.submit_time),
        "attained": attained,
        "ran": ran,
        "remaining": max(0.0, estimate - ran),
        "priority": float(spec.priority),
        "preemptions": float(job.preemptions),
        "inference": 1.0 if spec.job_class is JobClass.INFERENCE else 0.0,
        "best_effort": 1.0 if spec.job_class is JobClass.BEST_EFFORT else 0.0,
        "now": now,
    }


@dataclass(frozen=True, slots=True)
class PriorityRule:
    """A parsed rule: ``value(fields)`` evaluates it; ``names`` are the fields it reads."""

    text: str
    names: tuple[str, ...]
    _root: Node

    @classmethod
    def parse(cls, text: str) -> PriorityRule:
        if not text.strip():
            raise RuleError("the rule is empty")
        if len(text) > MAX_RULE_CHARS:
            raise RuleError(f"the rule is {len(text)} characters; at most {MAX_RULE_CHARS}")
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as exc:
            raise RuleError(f"not an expression: {exc.msg}", exc.offset) from None
        names: list[str] = []
        root = _compile(tree.body, names)
        return cls(text.strip(), tuple(dict.fromkeys(names)), root)

    def value(self, fields: Mapping[str, float]) -> float:
        """The rule's value; +inf when it cannot be computed or is not a finite number."""
        try:
            result = float(self._root(fields))
        except (ArithmeticError, ValueError):
            return math.inf
        return result if math.isfinite(result) else math.inf

    def explain(self, fields: Mapping[str, float]) -> str:
        """``priority 0.5 by rule `...` (estimate=3600, gpus=2)``: the value and its inputs."""
        value = self.value(fields)
        inputs = ", ".join(f"{n}={fields[n]:,.6g}" for n in self.names)
        shown = "cannot be computed (inf)" if math.isinf(value) else f"{value:,.6g}"
        return f"priority {shown} by rule `{self.text}` ({inputs}); lowest first"


def _compile(node: ast.expr, names: list[str]) -> Node:
    column = _column(node)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise RuleError(f"only numbers may appear as constants, not {node.value!r}", column)
        number = float(node.value)
        return lambda _f: number
    if isinstance(node, ast.Name):
        if node.id not in FIELDS:
            raise RuleError(
                f"unknown field {node.id!r}; fields: {', '.join(FIELDS)}",
                column,
            )
        names.append(node.id)
        key = node.id
        return lambda f: f[key]
    if isinstance(node, ast.BinOp):
        op = _BINARY.get(type(node.op))
        if op is None:
            raise RuleError(f"operator {type(node.op).__name__} is not allowed", column)
        left, right = _compile(node.left, names), _compile(node.right, names)
        return lambda f: op(left(f), right(f))
    if isinstance(node, ast.UnaryOp):
        inner = _compile(node.operand, names)
        if isinstance(node.op, ast.USub):
            return lambda f: -inner(f)
        if isinstance(node.op, ast.UAdd):
            return inner
        if isinstance(node.op, ast.Not):
            return lambda f: 0.0 if inner(f) else 1.0
        raise RuleError(f"operator {type(node.op).__name__} is not allowed", column)
    if isinstance(node, ast.BoolOp):
        parts = [_compile(v, names) for v in node.values]
        if isinstance(node.op, ast.And):
            return lambda f: 1.0 if all(p(f) for p in parts) else 0.0
        return lambda f: 1.0 if any(p(f) for p in parts) else 0.0
    if isinstance(node, ast.Compare):
        return _compile_compare(node, names)
    if isinstance(node, ast.IfExp):
        test, body, other = (_compile(n, names) for n in (node.test, node.body, node.orelse))
        return lambda f: body(f) if test(f) else other(f)
    if isinstance(node, ast.Call):
        return _compile_call(node, names)
    raise RuleError(f"{type(node).__name__} is not allowed in a rule", column)


def _compile_compare(node: ast.Compare, names: list[str]) -> Node:
    first = _compile(node.left, names)
    steps: list[tuple[Callable[[float, float], bool], Node]] = []
    for op, right in zip(node.ops, node.comparators, strict=True):
        compare = _COMPARE.get(type(op))
        if compare is None:
            raise RuleError(f"comparison {type(op).__name__} is not allowed", node.col_offset + 1)
        steps.append((compare, _compile(right, names)))

    def evaluate(f: Mapping[str, float]) -> float:
        left = first(f)
        for compare, right_node in steps:
            right = right_node(f)
            if not compare(left, right):
                return 0.0
            left = right
        return 1.0

    return evaluate


def _compile_call(node: ast.Call, names: list[str]) -> Node:
    column = node.col_offset + 1
    if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
        raise RuleError(f"only these functions may be called: {', '.join(FUNCTIONS)}", column)
    if node.keywords or not node.args:
        raise RuleError(f"{node.func.id}() takes positional numbers only", column)
    function = FUNCTIONS[node.func.id]
    args = [_compile(a, names) for a in node.args]
    return lambda f: float(function(*(a(f) for a in args)))


def _column(node: ast.expr) -> int:
    """1-based column of ``node`` in the rule text."""
    return node.col_offset + 1


picklable(PriorityRule)
