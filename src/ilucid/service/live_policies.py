"""The profiles a live service may run, built through the registry as a live context.

A live scheduler never knows true durations, so only profiles the registry
marks ``live`` qualify (a site's registered profile among them). Being live is
context, not a branch: the replan plan re-plans at every pass, Lucid's profiling
pool is the backend's one profiler node, and without a metrics source no job is
profiled. ``--profile-limit`` sets the profiling run of the built-in profiles;
the ``--tiers`` file configures the default profile and ``tiered``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ilucid.core import BuildContext, Policy
from ilucid.core.policies import DEFAULT_PROFILE, live_profiles, make_policy, tier_overrides
from ilucid.core.policies.tiered import TierConfig

__all__ = ["TIER_PROFILES", "live_context", "live_policy_factory"]

#: Profiles a ``--tiers`` file configures.
TIER_PROFILES = (DEFAULT_PROFILE, "tiered")


def live_context(
    name: str,
    profile_limit_s: float = 300.0,
    tiers: TierConfig | None = None,
    profiling: bool = True,
) -> BuildContext:
    """How the service builds ``name``: its own settings as plugin arguments."""
    overrides: dict[str, Mapping[str, object]] = {
        f"{DEFAULT_PROFILE}/first-run": {"limit_s": profile_limit_s},
        "lucid/profiling-pool": {"limit_s": profile_limit_s},
    }
    if tiers is not None and name in TIER_PROFILES:
        overrides.update(tier_overrides(tiers, name))
    return BuildContext(live=True, profiling=profiling, overrides=overrides)


def live_policy_factory(
    profile_limit_s: float = 300.0, tiers: TierConfig | None = None, profiling: bool = True
) -> Callable[[str], Policy]:
    """Build a live profile by name; refuses profiles that need true durations.

    ``profiling`` is False when the service has no metrics source: a profiling run
    would then measure nothing and only cost the job a restart, so no profile
    profiles (and the default never packs)."""

    def build(name: str) -> Policy:
        allowed = live_profiles()
        if name not in allowed:
            raise ValueError(f"policy must be one of {', '.join(allowed)}, not {name!r}")
        return make_policy(name, live_context(name, profile_limit_s, tiers, profiling))

    return build
