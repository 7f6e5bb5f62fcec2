"""A sweep's grid: traces x parameter sets x profiles x perturbation seeds.

A grid comes from a TOML file (docs/sweep.md) or from ``ilucid sweep``'s flags;
:meth:`Grid.cells` lists its cells in a fixed order. A cell is one replay, and
``Cell.key`` (trace, profile, parameter set, seed) names it in the result table,
which is how a resumed sweep knows what is already done.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ilucid.settings.tier_settings import read_toml

__all__ = [
    "DEFAULT_PARAMS",
    "METRICS",
    "PERTURBATION_KINDS",
    "TIMINGS",
    "Cell",
    "CellKey",
    "Grid",
    "GridError",
    "Perturbation",
    "Settings",
    "apply_settings",
    "load_grid",
    "parse_seeds",
    "settings_keys",
]

#: the name of the one parameter set a grid without ``[parameters.NAME]`` tables has
DEFAULT_PARAMS = "default"
#: how a seed perturbs durations (sweep/perturb.py)
PERTURBATION_KINDS = ("jitter", "shift")
#: a replay's figures, as the result table holds them (ilucid.sim.metrics.summarize's, and the
#: per-class ones of cells with inference)
METRICS = (
    "jobs",
    "avg_jct",
    "p50_jct",
    "p95_jct",
    "p99_jct",
    "p999_jct",
    "avg_queue",
    "p50_queue",
    "p95_queue",
    "p99_queue",
    "p999_queue",
    "avg_bounded_slowdown",
    "makespan",
    "gpu_util",
    "preemptions",
    "avg_jct_small",
    "avg_jct_large",
    "cluster_gpus",
    "cluster_nodes",
    "events",
    "start_predictions",
    "start_error_median_s",
    "avg_jct_training",
    "p99_tts",
    "inference_share",
    "p99_queue_training",
    "lost_gpu_hours",
)
#: how long a cell took (its replay; the whole cell on its worker): reportable, but they
#: differ between two runs of one cell
TIMINGS = ("wall_s", "elapsed_s")
#: (trace, profile, parameter set, seed)
CellKey = tuple[str, str, str, int]

#: a perturbation's scale when none is given
_DEFAULT_SCALE = {"jitter": 0.01, "shift": 1.0}
_NAME = re.compile(r"^[A-Za-z0-9_.:+-]+$")


class GridError(ValueError):
    """A grid the sweep cannot run; the message names the file, line and field."""


@dataclass(frozen=True, slots=True)
class Perturbation:
    """How seed s > 0 changes each job's duration; seed 0 is always the trace as it is.

    ``jitter``: each duration times ``1 + scale * u``, ``u`` in [-1, 1) drawn from
    sha256(seed:job id), so one seed is one fixed trace on every machine.
    ``shift``: every duration plus ``seed * scale`` seconds (bench/mixed_robustness.py).
    """

    kind: str = "jitter"
    scale: float = 0.01

    def __post_init__(self) -> None:
        if self.kind not in PERTURBATION_KINDS:
            raise ValueError(
                f"kind must be one of {', '.join(PERTURBATION_KINDS)}, got {self.kind!r}"
            )
        if not math.isfinite(self.scale) or self.scale < 0:
            raise ValueError(f"scale must be a finite number >= 0, got {self.scale}")
        if self.kind == "jitter" and self.scale >= 1:
            raise ValueError(f"a jitter scale must be < 1 (durations stay > 0), got {self.scale}")

    @classmethod
    def parse(cls, text: str) -> Perturbation:
        """``jitter:0.01`` or ``shift:1`` (``--perturbation``)."""
        kind, _, scale = text.partition(":")
        try:
            return cls(
                kind.strip(), float(scale) if scale else _DEFAULT_SCALE.get(kind.strip(), 0.01)
            )
        except ValueError as exc:
            raise ValueError(f"perturbation {text!r}: {exc}") from None

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.scale:g}"


@dataclass(frozen=True, slots=True)
class Settings:
    """One parameter set: the cluster, the costs and the policy options of a replay.

    ``None`` means what ``ilucid simulate`` does without the flag: the trace's
    node list, else a cluster sized for offered load 0.85.
    """

    load: float | None = None
    nodes: int | None = None
    gpus_per_node: int = 8
    limit: int | None = None
    overhead_small: float = 40.0
    overhead_large: float = 60.0
    checkpoint_s: float | None = None
    tiresias_interval: float | None = None
    tiresias_threshold: float | None = None
    #: an inference instance list overlaid on the (training) trace, e.g. alibaba-dlrm
    inference: str | None = None
    inference_share: float = 0.10

    def __post_init__(self) -> None:
        if self.load is not None and self.nodes is not None:
            raise ValueError("give either load or nodes, not both")
        positive = {
            "load": self.load,
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "limit": self.limit,
            "checkpoint_s": self.checkpoint_s,
        }
        for name, value in positive.items():
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        if not 0 < self.inference_share < 1:
            raise ValueError(f"inference_share must be in (0, 1), got {self.inference_share}")


#: each setting's TOML type
_SETTING_TYPES: Mapping[str, type] = {
    "load": float,
    "nodes": int,
    "gpus_per_node": int,
    "limit": int,
    "overhead_small": float,
    "overhead_large": float,
    "checkpoint_s": float,
    "tiresias_interval": float,
    "tiresias_threshold": float,
    "inference": str,
    "inference_share": float,
}


@dataclass(frozen=True, slots=True)
class Cell:
    """One replay of the grid."""

    trace: str
    profile: str
    params: str
    seed: int
    settings: Settings = field(default_factory=Settings)
    perturbation: Perturbation = field(default_factory=Perturbation)

    @property
    def key(self) -> CellKey:
        return (self.trace, self.profile, self.params, self.seed)

    @property
    def label(self) -> str:
        params = "" if self.params == DEFAULT_PARAMS else f" [{self.params}]"
        return f"{self.trace} {self.profile}{params} seed {self.seed}"


@dataclass(frozen=True)
class Grid:
    traces: tuple[str, ...]
    profiles: tuple[str, ...]
    seeds: tuple[int, ...] = (0,)
    parameters: Mapping[str, Settings] = field(default_factory=lambda: {DEFAULT_PARAMS: Settings()})
    perturbation: Perturbation = field(default_factory=Perturbation)
    baseline: str | None = None
    metrics: tuple[str, ...] = ("avg_jct",)
    out: Path | None = None

    def __post_init__(self) -> None:
        axes: dict[str, list[Any]] = {
            "traces": list(self.traces),
            "profiles": list(self.profiles),
            "seeds": list(self.seeds),
            "parameters": list(self.parameters),
        }
        for axis, values in axes.items():
            if not values:
                raise ValueError(f"{axis}: none given")
            duplicate = next((v for v in values if values.count(v) > 1), None)
            if duplicate is not None:
                raise ValueError(f"{axis}: {duplicate!r} is named twice")
        if any(s < 0 for s in self.seeds):
            raise ValueError(f"seeds: must be >= 0, got {min(self.seeds)}")
        if self.baseline is not None and self.baseline not in self.profiles:
            raise ValueError(
                f"baseline: {self.baseline!r} is not among the profiles"
                f" ({', '.join(self.profiles)})"
            )
        known = (*METRICS, *TIMINGS)
        unknown = next((m for m in self.metrics if m not in known), None)
        if unknown is not None or not self.metrics:
            raise ValueError(f"metrics: unknown figure {unknown!r}; known: {', '.join(known)}")
        for axis in ("traces", "parameters"):
            bad = next((n for n in axes[axis] if "," in n or not n.strip()), None)
            if bad is not None:
                raise ValueError(f"{axis}: {bad!r} cannot name one (no commas, not empty)")

    def cells(self) -> list[Cell]:
        """Every cell, trace by trace: a trace's cells share a worker's loaded trace."""
        return [
            Cell(trace, profile, params, seed, settings, self.perturbation)
            for trace in self.traces
            for params, settings in self.parameters.items()
            for profile in self.profiles
            for seed in self.seeds
        ]


def parse_seeds(text: str) -> tuple[int, ...]:
    """``1-6`` (inclusive) or ``0,2,5``; 0 is the unperturbed trace."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        low, dash, high = part.partition("-")
        try:
            if dash:
                first, last = int(low), int(high)
                if last < first:
                    raise ValueError
                seeds.extend(range(first, last + 1))
            else:
                seeds.append(int(part))
        except ValueError:
            raise ValueError(
                f"seeds {text!r}: expected whole numbers or ranges such as 1-6"
            ) from None
    if not seeds:
        raise ValueError(f"seeds {text!r}: name at least one seed")
    return tuple(seeds)


# -- the TOML file -----------------------------------------------------------------------
_TOP = ("traces", "profiles", "seeds", "baseline", "metrics", "out", "perturbation", "parameters")


class _Locator:
    """The line of a key inside a table, for error messages (tomllib gives lines only for
    syntax errors)."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()

    def line_of(self, table: str | None, key: str) -> int | None:
        section: str | None = None
        for number, line in enumerate(self.lines, start=1):
            header = re.match(r"^\s*\[\s*([^\]]+?)\s*\]", line)
            if header:
                section = header.group(1).replace('"', "").replace(" ", "")
                if table is not None and key == "" and section == table:
                    return number
                continue
            if section == table and re.match(rf"^\s*\"?{re.escape(key)}\"?\s*=", line):
                return number
        return None

    def error(self, table: str | None, key: str, message: str) -> GridError:
        line = self.line_of(table, key)
        if line is None and table is not None:
            line = self.line_of(table, "")
        at = f"{self.path}:{line}" if line is not None else str(self.path)
        name = key if table is None else f"{table}.{key}" if key else table
        return GridError(f"{at}: {name}: {message}")


def _names(where: _Locator, key: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise where.error(None, key, f"must be a list of names, got {value!r}")
    return tuple(value)


def _seeds(where: _Locator, value: object) -> tuple[int, ...]:
    if isinstance(value, str):
        try:
            return parse_seeds(value)
        except ValueError as exc:
            raise where.error(None, "seeds", str(exc)) from None
    if isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        return tuple(value)
    raise where.error(None, "seeds", f"must be a list of whole numbers or '1-6', got {value!r}")


def _typed(where: _Locator, table: str, key: str, value: object, kind: type) -> object:
    # TOML has distinct ints, floats and booleans, but bool is an int in Python
    if not isinstance(value, bool):
        if isinstance(value, kind):
            return value
        if kind is float and isinstance(value, int):
            return float(value)
    names = {str: "a name", int: "a whole number", float: "a number"}
    raise where.error(table, key, f"must be {names[kind]}, got {value!r}")


def _settings(where: _Locator, name: str, table: object) -> Settings:
    section = f"parameters.{name}"
    if not _NAME.match(name):
        raise where.error(section, "", "a parameter set's name is letters, digits and ._:+-")
    if not isinstance(table, dict):
        raise where.error(None, section, "must be a table ([parameters.NAME])")
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in _SETTING_TYPES:
            raise where.error(section, key, f"unknown setting; known: {', '.join(_SETTING_TYPES)}")
        values[key] = _typed(where, section, key, value, _SETTING_TYPES[key])
    try:
        return Settings(**values)
    except ValueError as exc:
        key = next((k for k in values if str(exc).startswith(k)), next(iter(values), ""))
        raise where.error(section, key, str(exc)) from None


def _perturbation(where: _Locator, table: object) -> Perturbation:
    if not isinstance(table, dict):
        raise where.error(None, "perturbation", "must be a table ([perturbation])")
    unknown = next((k for k in table if k not in ("kind", "scale")), None)
    if unknown is not None:
        raise where.error("perturbation", unknown, "unknown setting; known: kind, scale")
    kind = table.get("kind", "jitter")
    scale = table.get("scale", _DEFAULT_SCALE.get(str(kind), 1.0))
    if not isinstance(kind, str):
        raise where.error("perturbation", "kind", f"must be a name, got {kind!r}")
    scale = _typed(where, "perturbation", "scale", scale, float)
    try:
        return Perturbation(kind, float(str(scale)))
    except ValueError as exc:
        key = "kind" if str(exc).startswith("kind") else "scale"
        raise where.error("perturbation", key, str(exc)) from None


def load_grid(path: Path, overrides: Mapping[str, Any] | None = None) -> Grid:
    """Read a grid file; ``overrides`` (flags) replace what the file says.

    ``out`` in the file is relative to the file's folder.
    """
    text, data = read_toml(path, GridError)
    where = _Locator(path, text)
    unknown = next((k for k in data if k not in _TOP), None)
    if unknown is not None:
        raise where.error(None, unknown, f"unknown key; known: {', '.join(_TOP)}")
    values: dict[str, Any] = {}
    for key in ("traces", "profiles", "metrics"):
        if key in data:
            values[key] = _names(where, key, data[key])
    if "seeds" in data:
        values["seeds"] = _seeds(where, data["seeds"])
    for key in ("baseline", "out"):
        if key in data and not isinstance(data[key], str):
            raise where.error(None, key, f"must be a string, got {data[key]!r}")
    if "baseline" in data:
        values["baseline"] = data["baseline"]
    if "out" in data:
        values["out"] = path.parent / data["out"]
    if "perturbation" in data:
        values["perturbation"] = _perturbation(where, data["perturbation"])
    if "parameters" in data:
        tables = data["parameters"]
        if not isinstance(tables, dict) or not tables:
            raise where.error(None, "parameters", "must hold tables ([parameters.NAME])")
        values["parameters"] = {name: _settings(where, name, t) for name, t in tables.items()}
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    for key in ("traces", "profiles"):
        if key not in values:
            raise where.error(None, key, "missing (or give it on the command line)")
    try:
        return Grid(**values)
    except ValueError as exc:
        key, _, message = str(exc).partition(": ")
        raise where.error(None, key, message) from None


def apply_settings(grid: Grid, changes: Mapping[str, Any]) -> Grid:
    """Flags that set a replay setting (``--load``, ``--limit``...) apply to every
    parameter set."""
    given = {k: v for k, v in changes.items() if v is not None}
    if not given:
        return grid
    if "nodes" in given:
        given["load"] = None
    elif "load" in given:
        given["nodes"] = None
    parameters = {name: replace(s, **given) for name, s in grid.parameters.items()}
    return replace(grid, parameters=parameters)


def settings_keys() -> Sequence[str]:
    """The keys a parameter set may hold (the fields of :class:`Settings`)."""
    return tuple(_SETTING_TYPES)
