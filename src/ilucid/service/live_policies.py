"""The profiles a live service may run, built for a live cluster.

A live scheduler never knows true durations, so only profiles the registry
marks ``live`` qualify. Lucid is built for a small live host: its profiling
pool is one node (the backend's profiler node), allowed to be half the nodes,
and the profiling run lasts ``profile_limit_s``. The ``--tiers`` file (reserve,
quotas, starvation bound) configures ``tiered`` and the default profile alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ilucid.core import Policy, make_policy
from ilucid.core.policies import (
    DEFAULT_PROFILE,
    PROFILES,
    DefaultConfig,
    DefaultPolicy,
    TierConfig,
    TieredPolicy,
    live_cadence,
)
from ilucid.core.policies.lucid import LucidConfig, LucidPolicy

__all__ = ["LIVE_POLICIES", "TIER_PROFILES", "live_policy_factory"]

#: Profiles a live service may run, the default first.
LIVE_POLICIES = (
    DEFAULT_PROFILE,
    *(n for n, e in PROFILES.items() if e.profile.needs.live and n != DEFAULT_PROFILE),
)
#: Profiles a ``--tiers`` file configures.
TIER_PROFILES = (DEFAULT_PROFILE, "tiered")


def live_policy_factory(
    profile_limit_s: float = 300.0, tiers: TierConfig | None = None, profiling: bool = True
) -> Callable[[str], Policy]:
    """``make_policy`` for a live service; refuses profiles that need true durations.

    ``profiling`` is False when the service has no metrics source: a profiling run
    would then measure nothing and only cost the job a restart, so the default
    profile starts jobs straight away (and never packs). A live default profile
    re-plans at every pass: the reconcile loop's ``--interval`` is its cadence,
    where a replay waits for 60 s boundaries.
    """

    def build(name: str) -> Policy:
        if name not in LIVE_POLICIES:
            raise ValueError(f"policy must be one of {', '.join(LIVE_POLICIES)}, not {name!r}")
        if name == "lucid":
            return LucidPolicy(
                LucidConfig(
                    profile_limit_s=profile_limit_s,
                    profiler_nodes=1,
                    profiler_min_nodes=1,
                    profiler_max_nodes=1,
                    profiler_max_share=0.5,
                ),
                "lucid",
            )
        if name == "tiered" and tiers is not None:
            return TieredPolicy(tiers)
        if name == DEFAULT_PROFILE:
            base = DefaultConfig.from_tiers(tiers) if tiers is not None else DefaultConfig()
            limit = profile_limit_s if profiling else None
            return DefaultPolicy(
                live_cadence(dataclasses.replace(base, profile_limit_s=limit), True)
            )
        return make_policy(name)

    return build
