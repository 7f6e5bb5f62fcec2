"""The scheduling framework: the phases of a pass, their Protocols, one plugin registry.

In the manner of kube-scheduler's framework, a profile is a list of plugins,
each named in a registry and built from its own typed arguments; the list *is*
the profile's construction. A pass runs two lanes, in this order:

1. the **inference** lane (:attr:`Phase.INFERENCE`): real-time inference jobs
   start first, preempting training if they must, within the training reserve.
   One router sends every inference job and hook there
   (:mod:`ilucid.core.policies.router`), so no other plugin sees one;
2. the **training** lane, run by the profile's **plan** (:attr:`Phase.PLAN`).
   For each pending job the plan calls the other phases' plugins in a fixed
   order: starvation guards (who must go first), the queue order (who goes
   next), admission filters (may it start now), profiling (a bounded first
   run?), the core's placer (filter and score nodes), packing (share a running
   job's GPUs) and preemption (stop jobs for it).

A plugin implements the Protocol of the phase it takes part in and keeps its
own incremental state through the event hooks of :class:`PluginBase`. Its
arguments are a dataclass with a ``decode(ArgReader)`` classmethod, so a
profile file's values are checked once, by the plugin that uses them.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, TypeVar

from mypy_extensions import mypyc_attr

from ilucid.core.decision import Reason, Words
from ilucid.core.free_gpus import MAIN_POOL, FreeGpus
from ilucid.core.jobs import JobState
from ilucid.core.model import ProfileReport
from ilucid.core.picklable import picklable

__all__ = [
    "PHASE_ORDER",
    "AdmissionFilter",
    "ArgReader",
    "BuildContext",
    "Needs",
    "NoArgs",
    "Packing",
    "Part",
    "PassView",
    "Phase",
    "PluginArgError",
    "PluginBase",
    "PluginRef",
    "PluginSpec",
    "Preemption",
    "Profile",
    "Profiling",
    "QueueOrder",
    "StarvationGuard",
    "VictimChoice",
    "plugin",
    "plugin_spec",
    "register",
    "registered",
]


class Phase(StrEnum):
    """Where in a pass a plugin acts (the ``phase`` of a profile file's plugin)."""

    INFERENCE = "inference"
    STARVATION_GUARD = "starvation_guard"
    ADMISSION = "admission"
    QUEUE_ORDER = "queue_order"
    PROFILING = "profiling"
    PACKING = "packing"
    PREEMPTION = "preemption"
    PLAN = "plan"


#: The order a pass consults the phases in (the plan calls those between its ends).
PHASE_ORDER = (
    Phase.INFERENCE,
    Phase.STARVATION_GUARD,
    Phase.QUEUE_ORDER,
    Phase.ADMISSION,
    Phase.PROFILING,
    Phase.PACKING,
    Phase.PREEMPTION,
    Phase.PLAN,
)


class PassView(Protocol):
    """What a plan may do during one pass (the core's ``SchedulingPass``)."""

    now: float

    @property
    def free(self) -> FreeGpus: ...

    def try_start(
        self,
        job: JobState,
        why: str | Callable[[], Words],
        pool: str = MAIN_POOL,
        limit_s: float | None = None,
    ) -> bool: ...

    def preempt(self, job: JobState, why: str) -> None: ...

    def start_packed(self, job: JobState, partner: JobState, why: str) -> None: ...


@mypyc_attr(allow_interpreted_subclasses=True)  # sites subclass it
class PluginBase:
    """Neutral event hooks: a plugin overrides those its incremental state needs."""

    name: str = ""

    def on_submitted(self, job: JobState, now: float) -> None:
        return None

    def on_started(self, job: JobState, now: float) -> None:
        return None

    def on_preempted(self, job: JobState, now: float) -> None:
        return None

    def on_finished(self, job: JobState, now: float) -> None:
        return None

    def on_withdrawn(self, job: JobState, now: float) -> None:
        return None

    def on_profiled(self, job: JobState, report: ProfileReport, now: float) -> None:
        return None


class QueueOrder(Protocol):
    """Ranks pending jobs: a lower key goes first."""

    @property
    def name(self) -> str: ...

    def key(self, job: JobState, now: float) -> float: ...

    def describe(self, job: JobState, now: float) -> str:
        """The key and the numbers behind it, as a sentence fragment for ``explain``."""
        ...


class AdmissionFilter(Protocol):
    """Refuses a job before any node is looked at (quota, reserve, gang); None admits."""

    @property
    def name(self) -> str: ...

    def refuse(self, job: JobState, now: float) -> Reason | None: ...


@dataclass(frozen=True, slots=True)
class VictimChoice:
    """A running job chosen for preemption, with what stopping it costs."""

    job: JobState
    lost_s: float
    cost_gpu_s: float
    reason: str


class Preemption(Protocol):
    """Chooses which running jobs to stop so that ``job`` can start, or None."""

    @property
    def name(self) -> str: ...

    def victims(
        self, job: JobState, candidates: Iterable[JobState], now: float
    ) -> list[VictimChoice] | None: ...


class Packing(Protocol):
    """Picks a running job whose GPUs ``job`` may share, or None (never pack)."""

    @property
    def name(self) -> str: ...

    def partner(self, job: JobState, running: Iterable[JobState]) -> JobState | None: ...


class Profiling(Protocol):
    """Decides which new jobs first run a bounded profiling run, and for how long."""

    @property
    def name(self) -> str: ...

    def limit_s(self, job: JobState) -> float | None:
        """Seconds of profiling for ``job``, or None to send it straight to the queue."""
        ...


class StarvationGuard(Protocol):
    """Bounds waiting: says when a pending job must be served ahead of the order."""

    @property
    def name(self) -> str: ...

    def due(self, job: JobState) -> float | None:
        """When ``job`` (pending since ``job.since``) starts to starve; None: never."""
        ...


# -- arguments -------------------------------------------------------------------------
class PluginArgError(ValueError):
    """A plugin argument that cannot be used; ``key`` names it (None: the plugin)."""

    def __init__(self, plugin: str, key: str | None, message: str) -> None:
        super().__init__(f"{plugin}: {key}: {message}" if key else f"{plugin}: {message}")
        self.plugin = plugin
        self.key = key
        self.detail = message


class ArgReader:
    """Typed, checked access to one plugin's raw arguments; unknown keys are errors.

    Written out per plugin (``Args.decode``), not read off annotations: a compiled
    core keeps none, and each plugin knows its own bounds."""

    def __init__(self, plugin: str, raw: Mapping[str, object]) -> None:
        self.plugin = plugin
        self._raw = dict(raw)
        self._read: list[str] = []

    def _get(self, key: str) -> object:
        self._read.append(key)
        return self._raw.get(key)

    def _fail(self, key: str, message: str) -> PluginArgError:
        return PluginArgError(self.plugin, key, message)

    def number(
        self, key: str, default: float, low: float | None = None, high: float | None = None
    ) -> float:
        """A finite number in ``[low, high]``."""
        value = self._get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._fail(key, f"must be a number, got {value!r}")
        number = float(value)
        if not math.isfinite(number):
            raise self._fail(key, f"must be finite, got {value!r}")
        if low is not None and number < low:
            raise self._fail(key, f"must be >= {low:g}, got {number:g}")
        if high is not None and number > high:
            raise self._fail(key, f"must be <= {high:g}, got {number:g}")
        return number

    def optional_number(
        self, key: str, default: float | None, low: float | None = None
    ) -> float | None:
        """A number, or ``false`` (None: off)."""
        value = self._raw.get(key, default)
        if value is False or value is None:
            self._read.append(key)
            return None
        return self.number(key, default if default is not None else 0.0, low)

    def integer(self, key: str, default: int, low: int | None = None) -> int:
        value = self._raw.get(key)
        if isinstance(value, float) and value.is_integer():
            self._raw[key] = int(value)
            value = int(value)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            self._read.append(key)
            raise self._fail(key, f"must be a whole number, got {value!r}")
        return int(self.number(key, float(default), None if low is None else float(low)))

    def optional_integer(self, key: str, default: int | None, low: int | None = None) -> int | None:
        value = self._raw.get(key, default)
        if value is False or value is None:
            self._read.append(key)
            return None
        return self.integer(key, default if default is not None else 0, low)

    def flag(self, key: str, default: bool) -> bool:
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._fail(key, f"must be true or false, got {value!r}")
        return value

    def text(self, key: str, default: str, choices: Sequence[str] = ()) -> str:
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, str) or not value.strip():
            raise self._fail(key, f"must be a non-empty string, got {value!r}")
        if choices and value not in choices:
            raise self._fail(key, f"must be one of {', '.join(choices)}, got {value!r}")
        return value

    def numbers(self, key: str, default: tuple[float, ...]) -> tuple[float, ...]:
        """Numbers as a list, or one string ``"a,b,c"``."""
        value = self._get(key)
        if value is None:
            return default
        items: list[object]
        if isinstance(value, str):
            items = [v.strip() for v in value.split(",") if v.strip()]
        elif isinstance(value, list | tuple):
            items = list(value)
        else:
            raise self._fail(key, f"must be a list of numbers, got {value!r}")
        out: list[float] = []
        for item in items:
            try:
                number = float(item) if not isinstance(item, bool) else math.nan  # type: ignore[arg-type]
            except (TypeError, ValueError):
                number = math.nan
            if not math.isfinite(number):
                raise self._fail(key, f"must be a list of finite numbers, got {value!r}")
            out.append(number)
        return tuple(out)

    def table(self, key: str) -> Mapping[str, object]:
        """A mapping (a TOML table), empty when absent."""
        value = self._get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self._fail(key, f"must be a table, got {value!r}")
        return value

    def finish(self) -> None:
        """Refuse any key the plugin did not read, naming the closest it knows."""
        for key in self._raw:
            if key not in self._read:
                close = difflib.get_close_matches(key, self._read, n=1)
                known = ", ".join(sorted(set(self._read))) or "none"
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise self._fail(key, f"unknown argument; {hint}known: {known}")


@dataclass(frozen=True, slots=True)
class NoArgs:
    """The arguments of a plugin that takes none."""

    @classmethod
    def decode(cls, reader: ArgReader) -> NoArgs:
        return cls()


# -- building --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class BuildContext:
    """What the driver tells every plugin it builds: being live is context, not a branch.

    ``overrides`` are arguments by plugin name that the driver's own settings give
    (a ``--tiers`` file, ``static-partition:N``); they win over the profile's."""

    name: str = ""
    live: bool = False
    #: a live service without a metrics source: a profiling run would measure nothing
    profiling: bool = True
    overrides: Mapping[str, Mapping[str, object]] = field(default_factory=dict)


@dataclass(slots=True)
class Part:
    """One built plugin of a profile: its place, its decoded arguments, the plugin."""

    ref: PluginRef
    args: Any  # (Any, not object: a compiled dataclass resolves its field types by name)
    plugin: Any


_Spec = TypeVar("_Spec")


@dataclass(slots=True)  # holds functions: never pickled, never a dict key
class PluginSpec:
    """A registry entry: a name, its phase, how to read its arguments, how to build it.

    ``build(args, context, parts)`` receives the plugins of the profile built
    before it (a plan, built last, gets all of them)."""

    name: str
    phase: Phase
    summary: str
    decode: Callable[[ArgReader], object]
    build: Callable[[object, BuildContext, Sequence[Part]], object]

    def args(self, raw: Mapping[str, object]) -> object:
        """``raw`` decoded and checked by the plugin itself."""
        reader = ArgReader(self.name, raw)
        decoded = self.decode(reader)
        reader.finish()
        return decoded

    def defaults(self) -> object:
        return self.args({})


_REGISTRY: dict[str, PluginSpec] = {}


def register(spec: PluginSpec) -> PluginSpec:
    """Add ``spec``; a name already registered (to another plugin) is refused."""
    held = _REGISTRY.get(spec.name)
    if held is not None and held != spec:
        raise ValueError(f"plugin {spec.name!r} is already registered ({held.summary})")
    _REGISTRY[spec.name] = spec
    return spec


def plugin(
    name: str, phase: Phase, args: type | None = None, summary: str = ""
) -> Callable[[_Spec], _Spec]:
    """Register a plugin class (built as ``Class(args)``) or factory under ``name``.

    ``args`` is its arguments' dataclass, with a ``decode(ArgReader)`` classmethod;
    None: the plugin takes none. A factory is called ``factory(args, context, parts)``.
    """

    def decorate(target: _Spec) -> _Spec:
        reader: Any = args if args is not None else NoArgs  # a class with ``decode``
        decode: Callable[[ArgReader], object] = reader.decode
        doc = summary or (getattr(target, "__doc__", None) or "").strip().split("\n")[0]
        if isinstance(target, type):
            cls = target

            def build(a: object, _c: BuildContext, _p: Sequence[Part]) -> object:
                return cls(a)

        else:
            build = target  # type: ignore[assignment]
        register(PluginSpec(name, phase, doc, decode, build))
        setattr(target, "plugin_name", name)  # noqa: B010 (``use = "module:Class"`` finds it)
        return target

    return decorate


def plugin_spec(name: str) -> PluginSpec:
    """The registered plugin ``name``; an unknown name lists the closest known."""
    spec = _REGISTRY.get(name)
    if spec is None:
        close = difflib.get_close_matches(name, list(_REGISTRY), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ValueError(f"no plugin named {name!r}{hint} (`ilucid policies` lists them)")
    return spec


def registered() -> Mapping[str, PluginSpec]:
    """Every registered plugin by name."""
    return dict(_REGISTRY)


# -- profiles --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PluginRef:
    """One plugin of a profile: which one, where it acts, and its arguments."""

    point: Phase
    name: str
    args: Mapping[str, object] = field(default_factory=dict)

    def describe(self) -> str:
        args = ", ".join(f"{k}={v}" for k, v in self.args.items())
        return f"{self.point.value}: {self.name}" + (f" ({args})" if args else "")


@dataclass(frozen=True, slots=True)
class Needs:
    """What a profile needs from its driver, and whether a live service may run it."""

    estimates: bool = False
    profiler: bool = False
    forecasts: bool = False  # a load forecast for a tuner
    oracle: bool = False  # reads true durations: replays only
    live: bool = True

    def __post_init__(self) -> None:
        if self.oracle and self.live:
            raise ValueError("a profile that reads true durations cannot run live")


@dataclass(frozen=True, slots=True)
class Profile:
    """A named list of plugins with their arguments and what the profile needs."""

    name: str
    summary: str
    plugins: tuple[PluginRef, ...]
    needs: Needs = field(default_factory=Needs)

    def plugin(self, point: Phase) -> PluginRef | None:
        """The first plugin acting at ``point``, if any."""
        return next((p for p in self.plugins if p.point is point), None)


picklable(VictimChoice, PluginRef, Needs, Profile, BuildContext, NoArgs)
