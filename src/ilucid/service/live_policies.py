"""The policies a live service may run, built for a live cluster.

A live scheduler never knows true durations, so only policies that work from
estimates qualify. Lucid is built for a small live host: its profiling pool
is one node (the backend's profiler node), allowed to be half the nodes, and
the profiling run lasts ``profile_limit_s``.
"""

from __future__ import annotations

from collections.abc import Callable

from ilucid.core import Policy, make_policy
from ilucid.core.policies import TierConfig, TieredPolicy
from ilucid.core.policies.lucid import LucidConfig, LucidPolicy

__all__ = ["LIVE_POLICIES", "live_policy_factory"]

#: Policies a live service may run: they need only estimates, never true durations.
LIVE_POLICIES = ("tiered", "fifo", "fifo-backfill", "qssf", "ilucid", "tiresias", "lucid")


def live_policy_factory(
    profile_limit_s: float = 300.0, tiers: TierConfig | None = None
) -> Callable[[str], Policy]:
    """``make_policy`` for a live service; refuses policies that need true durations.

    ``tiers`` (the ``--tiers`` file: reserve, quotas) configures ``tiered``.
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
        return make_policy(name)

    return build
