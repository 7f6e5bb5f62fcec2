"""The scheduling framework: one declared Protocol per extension point, and profiles.

In the spirit of kube-scheduler's framework, a pass is a fixed recipe whose
steps are small plugins, each of which only judges and says why:

- *queue order* ranks pending jobs (lower key first) and explains the key;
- *admission filters* refuse a job before placement (quota, reserve, gang);
- *node filters* refuse a node for a job (GPU type, memory, free GPUs);
- *scores* rank the nodes that passed, part by part;
- *preemption* chooses victims, each with the work it loses;
- *packing* picks a running partner whose GPUs a job may share;
- *profiling* decides which new jobs first run a short profiling run;
- *starvation guard* bounds how long any job waits.

A *profile* is a named list of plugins with their arguments, plus what it
needs from its driver (estimates, a profiler, oracle durations) and whether a
live service may run it. Profiles are data: the registry in
:mod:`ilucid.core.profiles` holds one entry per profile, and a site's own
profile can be read from a TOML file. Nothing here is looked up by name at run
time: an optional capability is its own Protocol.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from ilucid.core.decision import Reason
from ilucid.core.jobs import JobState
from ilucid.core.model import JobSpec, Node
from ilucid.core.picklable import picklable

__all__ = [
    "AdmissionFilter",
    "ExtensionPoint",
    "Needs",
    "NodeFilter",
    "Packing",
    "PluginRef",
    "Preemption",
    "Profile",
    "Profiling",
    "QueueOrder",
    "Score",
    "StarvationGuard",
    "VictimChoice",
]


class ExtensionPoint(StrEnum):
    """Where in a pass a plugin acts (the TOML section names of a profile file)."""

    QUEUE_ORDER = "queue_order"
    ADMISSION = "admission"
    NODE_FILTER = "node_filter"
    SCORE = "score"
    PREEMPTION = "preemption"
    PACKING = "packing"
    PROFILING = "profiling"
    STARVATION_GUARD = "starvation_guard"


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


class NodeFilter(Protocol):
    """Refuses one node for one job; None lets the node through to scoring."""

    @property
    def name(self) -> str: ...

    def refuse(self, job: JobSpec, node: Node, free_gpus: int) -> Reason | None: ...


class Score(Protocol):
    """Rates a node that passed every filter; higher is better."""

    @property
    def name(self) -> str: ...

    def score(self, job: JobSpec, node: Node, free_gpus: int) -> float: ...


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


@dataclass(frozen=True, slots=True)
class PluginRef:
    """One plugin of a profile: where it acts, which one, and its arguments."""

    point: ExtensionPoint
    name: str
    args: Mapping[str, float | str | bool] = field(default_factory=dict)

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

    def plugin(self, point: ExtensionPoint) -> PluginRef | None:
        """The first plugin acting at ``point``, if any."""
        return next((p for p in self.plugins if p.point is point), None)


picklable(VictimChoice, PluginRef, Needs, Profile)
