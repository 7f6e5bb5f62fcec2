"""The arguments of the built-in plugins: one dataclass each, decoding itself.

Each default is the figure measured for it (see the config each plan builds:
``DefaultConfig``, ``TierConfig``, ``LucidConfig``); ``ilucid policies`` shows them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ilucid.core.arg_reader import ArgReader, PluginArgError
from ilucid.core.picklable import picklable
from ilucid.core.quota import TenantQuota
from ilucid.core.rules import PriorityRule, RuleError

__all__ = [
    "AgingArgs",
    "BackfillArgs",
    "DrainArgs",
    "EstimateRemainingArgs",
    "FirstRunArgs",
    "IndolentArgs",
    "InferenceArgs",
    "LasArgs",
    "LeveledArgs",
    "ProfilingPoolArgs",
    "QuotaArgs",
    "ReplanArgs",
    "RuleArgs",
    "StaticPartitionArgs",
    "TunedPackingArgs",
    "WaitBoundArgs",
]


@dataclass(frozen=True, slots=True)
class InferenceArgs:
    reserve: float = 0.2
    preempts: bool = True
    preemption_limit: int | None = None

    @classmethod
    def decode(cls, r: ArgReader) -> InferenceArgs:
        return cls(
            r.number("reserve", 0.2, 0.0, 0.999),
            r.flag("preempts", True),
            r.optional_integer("preemption_limit", None, 0),
        )


@dataclass(frozen=True, slots=True)
class StaticPartitionArgs:
    nodes: int = 1
    reserve: float = 0.2

    @classmethod
    def decode(cls, r: ArgReader) -> StaticPartitionArgs:
        return cls(r.integer("nodes", 1, 1), r.number("reserve", 0.2, 0.0, 0.999))


@dataclass(frozen=True, slots=True)
class QuotaArgs:
    quotas: Mapping[str, TenantQuota] = field(default_factory=dict)

    @classmethod
    def decode(cls, r: ArgReader) -> QuotaArgs:
        quotas: dict[str, TenantQuota] = {}
        for tenant, value in r.table("quotas").items():
            if isinstance(value, TenantQuota):
                quotas[tenant] = value
            elif isinstance(value, Mapping):
                try:
                    quotas[tenant] = TenantQuota(**value)
                except (TypeError, ValueError) as exc:
                    raise PluginArgError(r.plugin, f"quotas.{tenant}", str(exc)) from None
            else:
                raise PluginArgError(r.plugin, f"quotas.{tenant}", "must be a table")
        return cls(quotas)


@dataclass(frozen=True, slots=True)
class WaitBoundArgs:
    after_s: float = 86400.0
    rewait_after_s: float = 7 * 86400.0
    slice_s: float = 3600.0

    @classmethod
    def decode(cls, r: ArgReader) -> WaitBoundArgs:
        return cls(
            r.number("after_s", 86400.0, 1e-9),
            r.number("rewait_after_s", 7 * 86400.0, 1e-9),
            r.number("slice_s", 3600.0, 1e-9),
        )


@dataclass(frozen=True, slots=True)
class DrainArgs:
    after_s: float = 86400.0
    depth: int = 1
    renewals: int = 8
    scan: int = 200

    @classmethod
    def decode(cls, r: ArgReader) -> DrainArgs:
        return cls(
            r.number("after_s", 86400.0, 1e-9),
            r.integer("depth", 1, 0),
            r.integer("renewals", 8, 0),
            r.integer("scan", 200, 1),
        )


@dataclass(frozen=True, slots=True)
class AgingArgs:
    aging: float = 0.0

    @classmethod
    def decode(cls, r: ArgReader) -> AgingArgs:
        return cls(r.number("aging", 0.0, 0.0))


@dataclass(frozen=True, slots=True)
class LasArgs:
    thresholds: tuple[float, ...] = (18000.0,)

    @classmethod
    def decode(cls, r: ArgReader) -> LasArgs:
        thresholds = r.numbers("thresholds", (18000.0,))
        if not thresholds or min(thresholds) <= 0:
            raise PluginArgError(r.plugin, "thresholds", "must be one or more numbers > 0")
        return cls(tuple(sorted(thresholds)))


@dataclass(frozen=True, slots=True)
class EstimateRemainingArgs:
    aging: float = 0.0
    restore_aware: bool = True
    min_run_s: float = 0.0

    @classmethod
    def decode(cls, r: ArgReader) -> EstimateRemainingArgs:
        return cls(
            r.number("aging", 0.0, 0.0),
            r.flag("restore_aware", True),
            r.number("min_run_s", 0.0, 0.0),
        )


@dataclass(frozen=True, slots=True)
class LeveledArgs:
    levels: tuple[float, ...] = (1800.0, 18000.0, 180000.0)
    lead_per_error: float = 0.0
    error_window: int = 1000

    @classmethod
    def decode(cls, r: ArgReader) -> LeveledArgs:
        return cls(
            r.numbers("levels", (1800.0, 18000.0, 180000.0)),
            r.number("lead_per_error", 0.0, 0.0),
            r.integer("error_window", 1000, 1),
        )


@dataclass(frozen=True, slots=True)
class RuleArgs:
    rule: str = "estimate * gpus"

    @classmethod
    def decode(cls, r: ArgReader) -> RuleArgs:
        text = r.text("rule", "estimate * gpus")
        try:
            PriorityRule.parse(text)
        except RuleError as exc:
            raise PluginArgError(r.plugin, "rule", str(exc)) from None
        return cls(text)


@dataclass(frozen=True, slots=True)
class ReplanArgs:
    interval_s: float = 0.0

    @classmethod
    def decode(cls, r: ArgReader) -> ReplanArgs:
        return cls(r.number("interval_s", 0.0, 0.0))


@dataclass(frozen=True, slots=True)
class BackfillArgs:
    depth: int = 200

    @classmethod
    def decode(cls, r: ArgReader) -> BackfillArgs:
        return cls(r.integer("depth", 200, 1))


@dataclass(frozen=True, slots=True)
class FirstRunArgs:
    limit_s: float | None = 300.0
    max_gpus: int = 8
    probe: int = 20

    @classmethod
    def decode(cls, r: ArgReader) -> FirstRunArgs:
        return cls(
            r.optional_number("limit_s", 300.0, 1e-9),
            r.integer("max_gpus", 8, 1),
            r.integer("probe", 20, 1),
        )


@dataclass(frozen=True, slots=True)
class IndolentArgs:
    scan: int = 64
    assume_gpu_memory_gb: float = 32.0

    @classmethod
    def decode(cls, r: ArgReader) -> IndolentArgs:
        return cls(r.integer("scan", 64, 1), r.number("assume_gpu_memory_gb", 32.0, 1e-9))


@dataclass(frozen=True, slots=True)
class ProfilingPoolArgs:
    limit_s: float = 300.0
    max_gpus: int = 8
    nodes: int = 2
    min_nodes: int = 1
    max_nodes: int = 8
    max_share: float = 0.25

    @classmethod
    def decode(cls, r: ArgReader) -> ProfilingPoolArgs:
        return cls(
            r.number("limit_s", 300.0, 1e-9),
            r.integer("max_gpus", 8, 1),
            r.integer("nodes", 2, 1),
            r.integer("min_nodes", 1, 1),
            r.integer("max_nodes", 8, 1),
            r.number("max_share", 0.25, 1e-9, 1.0),
        )


@dataclass(frozen=True, slots=True)
class TunedPackingArgs:
    when_load_above: float = 0.8
    scan: int = 400
    assume_gpu_memory_gb: float = 32.0

    @classmethod
    def decode(cls, r: ArgReader) -> TunedPackingArgs:
        return cls(
            r.number("when_load_above", 0.8, 0.0),
            r.integer("scan", 400, 1),
            r.number("assume_gpu_memory_gb", 32.0, 1e-9),
        )


picklable(
    InferenceArgs,
    StaticPartitionArgs,
    QuotaArgs,
    WaitBoundArgs,
    DrainArgs,
    AgingArgs,
    LasArgs,
    EstimateRemainingArgs,
    LeveledArgs,
    RuleArgs,
    ReplanArgs,
    BackfillArgs,
    FirstRunArgs,
    IndolentArgs,
    ProfilingPoolArgs,
    TunedPackingArgs,
)
