"""The profile registry: one entry per name a user types, with its plugins and needs.

Each entry is a :class:`~ilucid.core.framework.Profile` (the plugins it is made
of, with their arguments, and what it needs from its driver) plus the function
that builds its policy. Drivers ask the registry, never a list of their own:
the simulator whether to supply estimates or a profiler, the service whether a
profile may run live.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from ilucid.core.framework import ExtensionPoint, Needs, PluginRef, Profile
from ilucid.core.policies.default import DefaultConfig, DefaultPolicy
from ilucid.core.policies.lucid import LucidConfig, LucidPolicy
from ilucid.core.policies.ordered import OrderedPolicy, fifo_key, qssf_key, sjf_key
from ilucid.core.policies.preemptive import ReplanningPolicy, estimate_srtf, srtf, tiresias
from ilucid.core.policies.tiered import TierConfig, TieredPolicy
from ilucid.core.scheduler import Policy

__all__ = [
    "DEFAULT_PROFILE",
    "NEEDS_ESTIMATES",
    "POLICIES",
    "PROFILES",
    "PROFILING_POLICIES",
    "BuildOptions",
    "DefaultConfig",
    "DefaultPolicy",
    "LucidConfig",
    "LucidPolicy",
    "OrderedPolicy",
    "ProfileEntry",
    "ReplanningPolicy",
    "TierConfig",
    "TieredPolicy",
    "is_known",
    "live_cadence",
    "make_policy",
    "needs_estimates",
    "needs_forecasts",
    "needs_profiler",
    "profile_entry",
    "register_profile",
]

#: The profile ``serve`` and ``simulate`` run when none is named.
DEFAULT_PROFILE = "ilucid"

Q, A, P, PR, PK, S = (
    ExtensionPoint.QUEUE_ORDER,
    ExtensionPoint.ADMISSION,
    ExtensionPoint.PREEMPTION,
    ExtensionPoint.PROFILING,
    ExtensionPoint.PACKING,
    ExtensionPoint.STARVATION_GUARD,
)


@dataclass(frozen=True, slots=True)
class BuildOptions:
    """Arguments a driver may pass to a profile's builder (None: the profile's default)."""

    tiresias_interval: float | None = None
    tiresias_threshold: float | None = None
    tiers: TierConfig | None = None
    default: DefaultConfig | None = None
    lucid: LucidConfig | None = None
    static_nodes: int = 0
    #: built for a live service, whose reconcile loop paces the passes: profiles that
    #: re-plan on fixed boundaries in replays re-plan at every live pass instead
    live: bool = False


@dataclass(frozen=True, slots=True)
class ProfileEntry:
    profile: Profile
    build: Callable[[BuildOptions], Policy] = field(repr=False)


def _tiresias(options: BuildOptions) -> Policy:
    threshold = 18000.0 if options.tiresias_threshold is None else options.tiresias_threshold
    interval = 60.0 if options.tiresias_interval is None else options.tiresias_interval
    return tiresias(thresholds=(threshold,), interval=interval)


def _ordered(name: str, key: str, backfill: bool = False) -> ProfileEntry:
    keys = {"fifo": fifo_key, "sjf": sjf_key, "qssf": qssf_key}
    plugins = [PluginRef(Q, key), PluginRef(A, "head-of-line" if not backfill else "easy-backfill")]
    needs = Needs(estimates=key == "qssf", oracle=key == "sjf", live=key != "sjf")
    summary = {
        "fifo": "submit order; stops at the first job that does not fit",
        "sjf": "true duration (oracle); stops at the first job that does not fit",
        "qssf": "estimated duration x GPUs (Helios); stops at the first job that does not fit",
    }[key]
    if backfill:
        summary = summary.split(";")[0] + "; EASY backfilling around the head job's reservation"
    return ProfileEntry(
        Profile(name, summary, tuple(plugins), needs),
        lambda _: OrderedPolicy(name, keys[key], backfill=backfill),
    )


def live_cadence(config: DefaultConfig, live: bool) -> DefaultConfig:
    """A live default profile re-plans at every reconcile pass (its boundaries are a
    replay's stand-in for a loop's cadence; a live pass never lands on one exactly)."""
    return dataclasses.replace(config, replan_interval_s=0.0) if live else config


def _tiered(options: BuildOptions) -> Policy:
    if options.static_nodes:
        base = options.tiers or TierConfig()
        return TieredPolicy(dataclasses.replace(base, static_inference_nodes=options.static_nodes))
    return TieredPolicy(options.tiers) if options.tiers is not None else TieredPolicy()


_ENTRIES = [
    _ordered("fifo", "fifo"),
    _ordered("sjf", "sjf"),
    _ordered("fifo-backfill", "fifo", backfill=True),
    _ordered("sjf-backfill", "sjf", backfill=True),
    _ordered("qssf", "qssf"),
    ProfileEntry(
        Profile(
            "lucid",
            "Lucid (ASPLOS'23): profiling pool, estimated GPU-seconds order, indolent packing,"
            " forecast-driven tuner",
            (
                PluginRef(PR, "profiling-pool", {"limit_s": 300.0, "max_gpus": 8}),
                PluginRef(Q, "estimated-gpu-seconds"),
                PluginRef(PK, "indolent", {"max_score": 2.0}),
            ),
            Needs(estimates=True, profiler=True, forecasts=True),
        ),
        lambda o: LucidPolicy(o.lucid or LucidConfig(), "lucid"),
    ),
    ProfileEntry(
        Profile(
            "estimate-srtf",
            "preemptive shortest estimated remaining time, aged 0.2 s per second waited",
            (
                PluginRef(Q, "estimated-remaining", {"aging": 0.2}),
                PluginRef(P, "replan", {"restore_aware": True}),
            ),
            Needs(estimates=True),
        ),
        # aging 0.2: measured p99.9 queueing on ITP cluster04 7.5k s vs 16.3k s without
        lambda _: estimate_srtf("estimate-srtf", aging=0.2),
    ),
    ProfileEntry(
        Profile(
            "srtf",
            "preemptive shortest true remaining time (oracle)",
            (PluginRef(Q, "true-remaining"), PluginRef(P, "replan")),
            Needs(oracle=True, live=False),
        ),
        lambda _: srtf(),
    ),
    ProfileEntry(
        Profile(
            "tiresias",
            "2D-LAS: queue by attained GPU-seconds (18,000 split), FIFO inside; re-plans"
            " every 60 s",
            (
                PluginRef(Q, "las", {"threshold": 18000.0, "interval_s": 60.0}),
                PluginRef(P, "replan"),
            ),
        ),
        _tiresias,
    ),
    ProfileEntry(
        Profile(
            "tiered",
            "inference first with a 20% training reserve; tenant quotas and weighted fair share;"
            " drains nodes for jobs waiting 24 h",
            (
                PluginRef(A, "training-reserve", {"reserve": 0.2}),
                PluginRef(A, "tenant-quota"),
                PluginRef(P, "least-loss", {"for": "inference"}),
                PluginRef(Q, "estimated-gpu-seconds"),
                PluginRef(S, "drain", {"after_s": 86400.0}),
            ),
            Needs(estimates=True),
        ),
        _tiered,
    ),
    ProfileEntry(
        Profile(
            "static-partition",
            "as tiered, but inference only on the last N nodes (static-partition:N); no"
            " preemption (a baseline)",
            (PluginRef(A, "static-partition"), PluginRef(Q, "estimated-gpu-seconds")),
            Needs(estimates=True, live=False),
        ),
        _tiered,
    ),
    ProfileEntry(
        Profile(
            DEFAULT_PROFILE,
            "the default: starvation guard; inference first with a 20% training reserve;"
            " 300 s profiling run of new jobs; preemptive re-plan by attained-GPU-seconds"
            " level, then estimated GPU-seconds left; indolent packing",
            (
                PluginRef(S, "wait-bound", {"after_s": 86400.0}),
                PluginRef(A, "training-reserve", {"reserve": 0.2}),
                PluginRef(A, "tenant-quota"),
                PluginRef(P, "least-loss", {"for": "inference"}),
                PluginRef(Q, "leveled-estimate", {"levels": "1800,18000,180000"}),
                PluginRef(P, "replan", {"restore_aware": True, "lead_per_error": 0.0}),
                PluginRef(PR, "first-run", {"limit_s": 300.0, "max_gpus": 8}),
                PluginRef(PK, "indolent", {"max_score": 2.0, "scan": 64}),
            ),
            Needs(estimates=True, profiler=True),
        ),
        lambda o: DefaultPolicy(live_cadence(o.default or DefaultConfig(), o.live)),
    ),
]

#: Every profile by name.
PROFILES: dict[str, ProfileEntry] = {e.profile.name: e for e in _ENTRIES}


#: Names that build a policy with no argument (``static-partition`` needs ``:N``).
def _no_arguments(entry: ProfileEntry) -> Callable[[], Policy]:
    return lambda: entry.build(BuildOptions())


POLICIES: dict[str, Callable[[], Policy]] = {
    name: _no_arguments(entry) for name, entry in PROFILES.items() if name != "static-partition"
}

#: Profiles that order jobs by a duration estimate the driver must supply.
NEEDS_ESTIMATES = frozenset(n for n, e in PROFILES.items() if e.profile.needs.estimates)
#: Profiles that profile new jobs and tune themselves from a load forecast.
PROFILING_POLICIES = frozenset(n for n, e in PROFILES.items() if e.profile.needs.profiler)


def profile_entry(name: str) -> ProfileEntry:
    """The registry entry of ``name`` (``static-partition:N`` -> ``static-partition``)."""
    base, _, count = name.partition(":")
    if base == "static-partition":
        if not count.isdigit() or int(count) < 1:
            raise ValueError(
                f"{name!r}: say how many nodes serve inference only, e.g. static-partition:4"
            )
        return PROFILES[base]
    entry = PROFILES.get(name)
    if entry is None:
        known = ", ".join(n if n != "static-partition" else "static-partition:N" for n in PROFILES)
        raise ValueError(f"unknown policy {name!r}; known policies: {known}")
    return entry


def make_policy(
    name: str,
    tiresias_interval: float | None = None,
    tiresias_threshold: float | None = None,
    tiers: TierConfig | None = None,
    default: DefaultConfig | None = None,
) -> Policy:
    """Build a profile's policy by name; unknown names list the known ones."""
    entry = profile_entry(name)
    _, _, count = name.partition(":")
    options = BuildOptions(
        tiresias_interval=tiresias_interval,
        tiresias_threshold=tiresias_threshold,
        tiers=tiers,
        default=default,
        static_nodes=int(count) if count else 0,
    )
    return entry.build(options)


def is_known(name: str) -> bool:
    """Whether ``name`` is a registered profile or ``static-partition:N``."""
    try:
        profile_entry(name)
    except ValueError:
        return False
    return True


def needs_estimates(name: str) -> bool:
    """Whether the driver must supply duration estimates to profile ``name``."""
    return profile_entry(name).profile.needs.estimates


def needs_profiler(name: str) -> bool:
    """Whether profile ``name`` profiles new jobs (the driver supplies a profiler)."""
    return profile_entry(name).profile.needs.profiler


def needs_forecasts(name: str) -> bool:
    """Whether profile ``name`` tunes itself from a load forecast the driver supplies."""
    return profile_entry(name).profile.needs.forecasts


def register_profile(entry: ProfileEntry) -> None:
    """Add a site's own profile (read from a file) to the registry, under its own name.

    A name the registry already holds is refused: a file cannot redefine what
    ``fifo`` or the default means. Drivers that fork (the simulator's parallel
    runs) must register before they fork.
    """
    name = entry.profile.name
    base = name.partition(":")[0]
    if base in PROFILES:
        raise ValueError(
            f"profile {name!r} is already registered; give the file's profile a new name"
        )
    PROFILES[name] = entry
    POLICIES[name] = _no_arguments(entry)
