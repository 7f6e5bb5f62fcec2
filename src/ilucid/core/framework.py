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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, TypeVar

from mypy_extensions import mypyc_attr

from ilucid.core.arg_reader import ArgReader, NoArgs
from ilucid.core.decision import Reason, Words
from ilucid.core.free_gpus import MAIN_POOL, FreeGpus
from ilucid.core.jobs import JobState
from ilucid.core.model import ProfileReport
from ilucid.core.picklable import picklable

__all__ = [
    "PHASE_ORDER",
    "AdmissionFilter",
    "BuildContext",
    "Needs",
    "Packing",
    "Part",
    "PassView",
    "Phase",
    "PluginBase",
    "PluginRef",
    "PluginSpec",
    "Preemption",
    "Profile",
    "Profiling",
    "QueueOrder",
    "StarvationGuard",
    "VictimChoice",
    "built_as",
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


def built_as(cls: type) -> Callable[[object, BuildContext, Sequence[Part]], object]:
    """The factory of a plugin class: ``Class(args)``."""

    def build(args: object, _context: BuildContext, _parts: Sequence[Part]) -> object:
        return cls(args)

    return build


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
        build: Callable[[object, BuildContext, Sequence[Part]], object]
        build = built_as(target) if isinstance(target, type) else target  # type: ignore[assignment]
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


picklable(VictimChoice, PluginRef, Needs, Profile, BuildContext)
