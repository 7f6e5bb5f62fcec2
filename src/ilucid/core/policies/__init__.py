"""The registries: plugins by name, profiles by name, and the one way to build a policy.

A profile is a named list of plugins with their arguments
(:class:`~ilucid.core.framework.Profile`); :func:`make_policy` builds each
plugin from the registry, in order, the plan last, and puts an inference
router in front when the profile has an inference plugin. Drivers (the
simulator, the live service, sweeps, ``whatif``) build only through it; their
own settings (a ``--tiers`` file, ``--tiresias-interval``, being live) are a
:class:`~ilucid.core.framework.BuildContext`, never a branch of their own.

Adding a policy is one module (its plugins' ``PLUGINS``) plus one line in
``_PLUGIN_SETS`` (and a profile in ``_PROFILES`` if it should have a name).
"""

from __future__ import annotations

from collections.abc import Mapping

from ilucid.core.arg_reader import PluginArgError
from ilucid.core.framework import (
    BuildContext,
    Needs,
    Part,
    PluginRef,
    Profile,
    plugin_spec,
    register,
)
from ilucid.core.policies import builtin_plugins
from ilucid.core.policies.builtin_plugins import INF, PK, PL, PR, A, Q, S
from ilucid.core.policies.default import DefaultConfig
from ilucid.core.policies.inference_tier import InferenceTier
from ilucid.core.policies.plan import PlanBase
from ilucid.core.policies.router import InferenceRouter
from ilucid.core.policies.tiered import TierConfig
from ilucid.core.scheduler import Policy

__all__ = [
    "DEFAULT_PROFILE",
    "PROFILES",
    "build_profile",
    "default_plugins",
    "is_known",
    "live_profiles",
    "make_policy",
    "needs_estimates",
    "needs_forecasts",
    "needs_profiler",
    "profile_of",
    "register_profile",
    "tier_overrides",
    "tiresias_overrides",
]

#: The profile ``serve`` and ``simulate`` run when none is named.
DEFAULT_PROFILE = "ilucid"

#: The plugin sets the registry holds: one line per module of plugins.
_PLUGIN_SETS = (builtin_plugins.PLUGINS,)
for _plugins in _PLUGIN_SETS:
    for _spec in _plugins:
        register(_spec)


def _shown(value: float) -> str:
    return f"{value:g}"


def default_plugins(config: DefaultConfig) -> tuple[PluginRef, ...]:
    """The default profile's plugins, each with the arguments ``config`` gives it (the
    default profile and every ``base = "ilucid"`` profile file are built from these)."""
    profiling: tuple[PluginRef, ...] = ()
    if config.profile_limit_s is not None:  # without profiling nothing is packed either
        profiling = (
            PluginRef(
                PR,
                "first-run",
                {
                    "limit_s": config.profile_limit_s,
                    "max_gpus": config.profile_max_gpus,
                    "probe": config.profile_probe,
                },
            ),
            PluginRef(
                PK,
                "indolent",
                {"scan": config.pack_scan, "assume_gpu_memory_gb": config.assume_gpu_memory_gb},
            ),
        )
    inference: dict[str, object] = {"reserve": config.reserve_training}
    if config.preemption_limit is not None:
        inference["preemption_limit"] = config.preemption_limit
    return (
        PluginRef(
            S,
            "wait-bound",
            {
                "after_s": config.starve_after_s,
                "rewait_after_s": config.rewait_after_s,
                "slice_s": config.guard_slice_s,
            },
        ),
        PluginRef(INF, "inference-first", inference),
        PluginRef(A, "tenant-quota", {"quotas": dict(config.quotas)} if config.quotas else {}),
        PluginRef(
            Q,
            "leveled-estimate",
            {
                "levels": ",".join(_shown(t) for t in config.levels),
                "lead_per_error": config.lead_per_error,
                "error_window": config.error_window,
            },
        ),
        *profiling,
        PluginRef(PL, "replan", {"interval_s": config.replan_interval_s}),
    )


def _ordered(name: str, key: str, backfill: bool = False) -> Profile:
    plan = PluginRef(PL, "easy-backfill") if backfill else PluginRef(PL, "head-of-line")
    needs = Needs(estimates=key == "qssf", oracle=key == "sjf", live=key != "sjf")
    summary = {
        "fifo": "submit order; stops at the first job that does not fit",
        "sjf": "true duration (oracle); stops at the first job that does not fit",
        "qssf": "estimated duration x GPUs (Helios); stops at the first job that does not fit",
    }[key]
    if backfill:
        summary = summary.split(";")[0] + "; EASY backfilling around the head job's reservation"
    return Profile(name, summary, (PluginRef(Q, key), plan), needs)


_TIERED_FILL = (
    PluginRef(A, "tenant-quota"),
    PluginRef(Q, "estimated-gpu-seconds", {"aging": 0.0}),
    PluginRef(S, "drain", {"after_s": 86400.0}),
    PluginRef(PL, "fair-share"),
)

_PROFILES = (
    _ordered("fifo", "fifo"),
    _ordered("sjf", "sjf"),
    _ordered("fifo-backfill", "fifo", backfill=True),
    _ordered("sjf-backfill", "sjf", backfill=True),
    _ordered("qssf", "qssf"),
    Profile(
        "lucid",
        "Lucid (ASPLOS'23): profiling pool, estimated GPU-seconds order, indolent packing,"
        " forecast-driven tuner",
        (
            PluginRef(PR, "profiling-pool", {"limit_s": 300.0, "max_gpus": 8}),
            PluginRef(PK, "tuned-indolent", {"when_load_above": 0.8}),
            PluginRef(PL, "lucid"),
        ),
        Needs(estimates=True, profiler=True, forecasts=True),
    ),
    Profile(
        "estimate-srtf",
        "preemptive shortest estimated remaining time, aged 0.2 s per second waited",
        # aging 0.2: measured p99.9 queueing on ITP cluster04 7.5k s vs 16.3k s without
        (PluginRef(Q, "estimated-remaining", {"aging": 0.2}), PluginRef(PL, "replan")),
        Needs(estimates=True),
    ),
    Profile(
        "srtf",
        "preemptive shortest true remaining time (oracle)",
        (PluginRef(Q, "true-remaining"), PluginRef(PL, "replan")),
        Needs(oracle=True, live=False),
    ),
    Profile(
        "tiresias",
        "2D-LAS: queue by attained GPU-seconds (18,000 split), FIFO inside; re-plans every 60 s",
        (
            PluginRef(Q, "las", {"thresholds": "18000"}),
            PluginRef(PL, "replan", {"interval_s": 60.0}),
        ),
    ),
    Profile(
        "tiered",
        "inference first with a 20% training reserve; tenant quotas and weighted fair share;"
        " drains nodes for jobs waiting 24 h",
        (PluginRef(INF, "inference-first", {"reserve": 0.2}), *_TIERED_FILL),
        Needs(estimates=True),
    ),
    Profile(
        "static-partition",
        "as tiered, but inference only on the last N nodes (static-partition:N); no"
        " preemption (a baseline)",
        (PluginRef(INF, "static-partition"), *_TIERED_FILL),
        Needs(estimates=True, live=False),
    ),
    Profile(
        DEFAULT_PROFILE,
        "the default: starvation guard; inference first with a 20% training reserve;"
        " 300 s profiling run of new jobs; preemptive re-plan by attained-GPU-seconds"
        " level, then estimated GPU-seconds left; indolent packing",
        default_plugins(DefaultConfig()),
        Needs(estimates=True, profiler=True),
    ),
)

#: Every profile by name.
PROFILES: dict[str, Profile] = {p.name: p for p in _PROFILES}


def profile_of(name: str) -> Profile:
    """The profile ``name`` (``static-partition:N`` -> ``static-partition``)."""
    base, _, count = name.partition(":")
    if base == "static-partition":
        if not count.isdigit() or int(count) < 1:
            raise ValueError(
                f"{name!r}: say how many nodes serve inference only, e.g. static-partition:4"
            )
        return PROFILES[base]
    profile = PROFILES.get(name)
    if profile is None:
        known = ", ".join(n if n != "static-partition" else "static-partition:N" for n in PROFILES)
        raise ValueError(f"unknown policy {name!r}; known policies: {known}")
    return profile


def build_profile(profile: Profile, context: BuildContext | None = None) -> Policy:
    """Each plugin of ``profile`` from the registry, in order, the plan last; an
    inference plugin puts the router in front (every other job goes to the plan)."""
    context = context or BuildContext()
    if context.name != profile.name:
        context = BuildContext(profile.name, context.live, context.profiling, context.overrides)
    parts: list[Part] = []
    plans = [r for r in profile.plugins if r.point is PL]
    if len(plans) != 1:
        raise ValueError(
            f"profile {profile.name!r} needs exactly one plan plugin, has {len(plans)}"
        )
    for ref in [*(r for r in profile.plugins if r.point is not PL), plans[0]]:
        spec = plugin_spec(ref.name)
        if spec.phase is not ref.point:
            raise ValueError(
                f"profile {profile.name!r}: plugin {ref.name!r} acts at {spec.phase.value},"
                f" not {ref.point.value}"
            )
        raw: dict[str, object] = {
            **ref.args,
            **context.overrides.get(ref.name, {}),
            **context.overrides.get(f"{profile.name}/{ref.name}", {}),
        }
        args = spec.args(raw)
        parts.append(Part(ref, args, spec.build(args, context, tuple(parts))))
    plan = parts[-1].plugin
    tiers = [p.plugin for p in parts if p.ref.point is INF]
    if len(tiers) > 1:
        raise ValueError(f"profile {profile.name!r} has {len(tiers)} inference plugins; one routes")
    if not tiers:
        if not isinstance(plan, PlanBase):
            raise ValueError(f"plan {plans[0].name!r} built no plan")
        return plan
    tier = tiers[0]
    if not isinstance(plan, PlanBase) or not isinstance(tier, InferenceTier):
        raise ValueError(f"profile {profile.name!r}: the inference lane needs a training plan")
    return InferenceRouter(profile.name, tier, plan)


def make_policy(name: str = DEFAULT_PROFILE, context: BuildContext | None = None) -> Policy:
    """Build the profile ``name`` (``static-partition:N`` says its N); unknown names list
    the known ones, and an argument a plugin refuses names the plugin and the key."""
    profile = profile_of(name)
    _, _, count = name.partition(":")
    context = context or BuildContext()
    if count:
        overrides = {**context.overrides, "static-partition": {"nodes": int(count)}}
        context = BuildContext(context.name, context.live, context.profiling, overrides)
    try:
        return build_profile(profile, context)
    except PluginArgError as exc:
        raise ValueError(f"profile {profile.name!r}: {exc}") from None


def tier_overrides(tiers: TierConfig, profile: str = "") -> dict[str, Mapping[str, object]]:
    """What a ``--tiers`` file sets, as arguments of the plugins it configures (the
    inference lane, tenant quotas, the starvation bound and drains, the queue's aging);
    with ``profile``, for that profile only (keys ``profile/plugin``)."""
    prefix = f"{profile}/" if profile else ""
    overrides: dict[str, Mapping[str, object]] = {
        "inference-first": {
            "reserve": tiers.reserve_training,
            "preempts": tiers.inference_preempts,
            "preemption_limit": tiers.preemption_limit,
        },
        "static-partition": {"reserve": tiers.reserve_training},
        "tenant-quota": {"quotas": dict(tiers.quotas)},
        "wait-bound": {"after_s": tiers.starve_after_s},
        "drain": {
            "after_s": tiers.starve_after_s,
            "depth": tiers.drain_depth,
            "renewals": tiers.drain_renewals,
            "scan": tiers.scan_depth,
        },
        "estimated-gpu-seconds": {"aging": tiers.aging},
    }
    return {prefix + name: args for name, args in overrides.items()}


def tiresias_overrides(
    interval_s: float | None, threshold: float | None
) -> dict[str, Mapping[str, object]]:
    """``--tiresias-interval`` and ``--tiresias-threshold`` as the arguments of
    tiresias' plugins (its plan's interval, its order's one threshold)."""
    overrides: dict[str, Mapping[str, object]] = {}
    if interval_s is not None:
        overrides["tiresias/replan"] = {"interval_s": interval_s}
    if threshold is not None:
        overrides["tiresias/las"] = {"thresholds": [threshold]}
    return overrides


def is_known(name: str) -> bool:
    """Whether ``name`` is a registered profile or ``static-partition:N``."""
    try:
        profile_of(name)
    except ValueError:
        return False
    return True


def live_profiles() -> tuple[str, ...]:
    """Profiles a live service may run (never one that reads true durations), the
    default first; read when asked, so a site's registered profile is among them."""
    rest = (n for n, p in PROFILES.items() if p.needs.live and n != DEFAULT_PROFILE)
    return (DEFAULT_PROFILE, *rest)


def needs_estimates(name: str) -> bool:
    """Whether the driver must supply duration estimates to profile ``name``."""
    return profile_of(name).needs.estimates


def needs_profiler(name: str) -> bool:
    """Whether profile ``name`` profiles new jobs (the driver supplies a profiler)."""
    return profile_of(name).needs.profiler


def needs_forecasts(name: str) -> bool:
    """Whether profile ``name`` tunes itself from a load forecast the driver supplies."""
    return profile_of(name).needs.forecasts


def register_profile(profile: Profile) -> None:
    """Add a site's own profile (read from a file) under its own name.

    A name the registry already holds is refused: a file cannot redefine what
    ``fifo`` or the default means. Its plugins are built once here, so a profile
    that cannot be built is refused before any driver forks (the simulator's
    workers inherit the registry).
    """
    base = profile.name.partition(":")[0]
    if base in PROFILES:
        raise ValueError(
            f"profile {profile.name!r} is already registered; give the file's profile a new name"
        )
    build_profile(profile)
    PROFILES[profile.name] = profile
