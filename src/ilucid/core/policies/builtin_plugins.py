"""The built-in plugins: each one's typed arguments and how it is built.

A plugin's arguments are a dataclass that reads and checks itself
(``decode``), as kube-scheduler's ``FitArgs``; its factory gets the decoded
arguments, the build context and the plugins of the profile built before it.
A plan (built last) assembles the training lane from the parts it is given:
the ``replan``, ``fair-share`` and ``lucid`` plans run their phases inside one
walk (their measured speed depends on it) and take their settings from the
arguments of the plugins listed beside them; ``in-order`` calls each phase's
plugin objects in turn.
"""

from __future__ import annotations

from collections.abc import Sequence

from ilucid.core.arg_reader import NoArgs
from ilucid.core.decision import Reason
from ilucid.core.framework import (
    BuildContext,
    Part,
    Phase,
    PluginBase,
    PluginSpec,
    QueueOrder,
    built_as,
)
from ilucid.core.jobs import JobState
from ilucid.core.policies.builtin_args import (
    AgingArgs,
    BackfillArgs,
    DrainArgs,
    EstimateRemainingArgs,
    FirstRunArgs,
    IndolentArgs,
    InferenceArgs,
    LasArgs,
    LeveledArgs,
    ProfilingPoolArgs,
    QuotaArgs,
    ReplanArgs,
    RuleArgs,
    StaticPartitionArgs,
    TunedPackingArgs,
    WaitBoundArgs,
)
from ilucid.core.policies.default import DefaultConfig, DefaultPlan
from ilucid.core.policies.in_order import InOrderPlan
from ilucid.core.policies.inference_tier import InferenceTier
from ilucid.core.policies.lucid import LucidConfig, LucidPolicy
from ilucid.core.policies.ordered import OrderedPolicy, QueueKey, fifo_key, qssf_key, sjf_key
from ilucid.core.policies.preemptive import ReplanningPolicy
from ilucid.core.policies.replan_orders import EstimateOrder, SrtfOrder, TiresiasOrder
from ilucid.core.policies.rule import RuleOrder
from ilucid.core.policies.tiered import TierConfig, TieredPlan
from ilucid.core.quota import QuotaBook
from ilucid.core.rules import PriorityRule

__all__ = ["PLUGINS", "KeyOrder", "TenantQuotaFilter", "WaitBound"]

INF, S, A, Q, PR, PK, PL = (
    Phase.INFERENCE,
    Phase.STARVATION_GUARD,
    Phase.ADMISSION,
    Phase.QUEUE_ORDER,
    Phase.PROFILING,
    Phase.PACKING,
    Phase.PLAN,
)


# -- plugin objects the in-order plan calls ------------------------------------------------
class KeyOrder:
    """A queue order from a key function (``fifo``, ``sjf``, ``qssf``)."""

    def __init__(self, name: str, queue_key: QueueKey, what: str) -> None:
        self.name = name
        self.queue_key = queue_key
        self.what = what

    def key(self, job: JobState, now: float) -> float:
        return float(self.queue_key(job)[0])

    def describe(self, job: JobState, now: float) -> str:
        return f"{self.what} {self.key(job, now):,.6g}; lowest first"


class WaitBound(PluginBase):
    """Starvation guard: a job waiting ``after_s`` (``rewait_after_s`` once it ran) is due."""

    def __init__(self, args: WaitBoundArgs) -> None:
        self.name = "wait-bound"
        self.args = args

    def due(self, job: JobState) -> float | None:
        after = self.args.after_s if job.first_start is None else self.args.rewait_after_s
        return job.since + after


class TenantQuotaFilter(PluginBase):
    """Admission: a tenant at its quota ceiling waits (the GPUs its jobs hold are kept)."""

    def __init__(self, args: QuotaArgs) -> None:
        self.name = "tenant-quota"
        self.args = args
        self.book = QuotaBook(args.quotas)

    def refuse(self, job: JobState, now: float) -> Reason | None:
        return self.book.refuse(job.spec.tenant, job.spec.num_gpus)

    def on_started(self, job: JobState, now: float) -> None:
        self.book.add(job.spec.tenant, job.spec.num_gpus)

    def on_preempted(self, job: JobState, now: float) -> None:
        self.book.remove(job.spec.tenant, job.spec.num_gpus)

    def on_finished(self, job: JobState, now: float) -> None:
        self.book.remove(job.spec.tenant, job.spec.num_gpus)


class FirstRun(PluginBase):
    """Profiling: a job of at most ``max_gpus`` GPUs that never ran first runs ``limit_s``."""

    def __init__(self, args: FirstRunArgs) -> None:
        self.name = "first-run"
        self.args = args

    def limit_s(self, job: JobState) -> float | None:
        if job.first_start is not None or job.spec.num_gpus > self.args.max_gpus:
            return None
        return self.args.limit_s


# -- assembling ----------------------------------------------------------------------------
def _args(parts: Sequence[Part], name: str) -> object | None:
    return next((p.args for p in parts if p.ref.name == name), None)


def _plugins(parts: Sequence[Part], phase: Phase) -> list[object]:
    return [p.plugin for p in parts if p.ref.point is phase]


def _order(parts: Sequence[Part], plan: str) -> object:
    found = _plugins(parts, Q)
    if len(found) != 1:
        raise ValueError(f"plan {plan!r} needs exactly one queue_order plugin, got {len(found)}")
    return found[0]


def _inference(parts: Sequence[Part]) -> InferenceArgs | StaticPartitionArgs | None:
    found = [p.args for p in parts if p.ref.point is INF]
    arg = found[0] if found else None
    assert arg is None or isinstance(arg, InferenceArgs | StaticPartitionArgs)
    return arg


def _inference_tier(args: object, context: BuildContext, parts: Sequence[Part]) -> InferenceTier:
    assert isinstance(args, InferenceArgs)
    return InferenceTier(
        args.reserve, preempts=args.preempts, preemption_limit=args.preemption_limit
    )


def _static_tier(args: object, context: BuildContext, parts: Sequence[Part]) -> InferenceTier:
    assert isinstance(args, StaticPartitionArgs)
    return InferenceTier(args.reserve, static=True)


def _head_of_line(args: object, context: BuildContext, parts: Sequence[Part]) -> object:
    order = _order(parts, "head-of-line")
    if not isinstance(order, KeyOrder):
        raise ValueError("head-of-line orders by fifo, sjf or qssf")
    return OrderedPolicy(context.name, order.queue_key)


def _easy_backfill(args: object, context: BuildContext, parts: Sequence[Part]) -> object:
    assert isinstance(args, BackfillArgs)
    order = _order(parts, "easy-backfill")
    if not isinstance(order, KeyOrder):
        raise ValueError("easy-backfill orders by fifo, sjf or qssf")
    return OrderedPolicy(context.name, order.queue_key, backfill=True, backfill_depth=args.depth)


def _default_config(parts: Sequence[Part], interval: float, context: BuildContext) -> DefaultConfig:
    """The default plan's settings, from the arguments of the plugins listed beside it."""
    guard = _args(parts, "wait-bound") or WaitBoundArgs()
    tier = _inference(parts) or InferenceArgs()
    quota = _args(parts, "tenant-quota") or QuotaArgs()
    levels = _args(parts, "leveled-estimate") or LeveledArgs()
    first = _args(parts, "first-run")
    packing = _args(parts, "indolent") or IndolentArgs()
    assert isinstance(guard, WaitBoundArgs) and isinstance(quota, QuotaArgs)
    assert isinstance(levels, LeveledArgs) and isinstance(packing, IndolentArgs)
    assert first is None or isinstance(first, FirstRunArgs)
    profiling = first is not None and context.profiling
    return DefaultConfig(
        levels=levels.levels,
        starve_after_s=guard.after_s,
        rewait_after_s=guard.rewait_after_s,
        guard_slice_s=guard.slice_s,
        reserve_training=tier.reserve,
        quotas=quota.quotas,
        preemption_limit=tier.preemption_limit if isinstance(tier, InferenceArgs) else None,
        lead_per_error=levels.lead_per_error,
        error_window=levels.error_window,
        replan_interval_s=interval,
        profile_limit_s=first.limit_s if first is not None and profiling else None,
        profile_max_gpus=first.max_gpus if first is not None else 8,
        profile_probe=first.probe if first is not None else 20,
        pack_scan=packing.scan,
        assume_gpu_memory_gb=packing.assume_gpu_memory_gb,
    )


def _replan(args: object, context: BuildContext, parts: Sequence[Part]) -> object:
    """A live service re-plans at every pass: its loop's cadence replaces the boundaries
    a replay waits for (a live pass never lands on one exactly)."""
    assert isinstance(args, ReplanArgs)
    interval = 0.0 if context.live else args.interval_s
    order = _order(parts, "replan")
    if isinstance(order, LeveledArgs):
        return DefaultPlan(_default_config(parts, interval, context), context.name)
    assert isinstance(order, SrtfOrder | TiresiasOrder | EstimateOrder)
    return ReplanningPolicy(context.name, order, interval)


def _fair_share(args: object, context: BuildContext, parts: Sequence[Part]) -> object:
    tier = _inference(parts) or InferenceArgs()
    quota = _args(parts, "tenant-quota") or QuotaArgs()
    aging = _args(parts, "estimated-gpu-seconds") or AgingArgs()
    drain = _args(parts, "drain") or DrainArgs()
    assert isinstance(quota, QuotaArgs) and isinstance(aging, AgingArgs)
    assert isinstance(drain, DrainArgs)
    static = isinstance(tier, StaticPartitionArgs)
    config = TierConfig(
        reserve_training=tier.reserve,
        quotas=quota.quotas,
        aging=aging.aging,
        starve_after_s=drain.after_s,
        drain_depth=drain.depth,
        drain_renewals=drain.renewals,
        scan_depth=drain.scan,
        inference_preempts=tier.preempts if isinstance(tier, InferenceArgs) else True,
        preemption_limit=tier.preemption_limit if isinstance(tier, InferenceArgs) else None,
        static_inference_nodes=tier.nodes if isinstance(tier, StaticPartitionArgs) else 0,
    )
    return TieredPlan(config, context.name or ("static-partition" if static else "tiered"))


def _lucid(args: object, context: BuildContext, parts: Sequence[Part]) -> object:
    """A live host is small: one profiler node (the backend's), up to half the nodes."""
    pool = _args(parts, "profiling-pool") or ProfilingPoolArgs()
    packing = _args(parts, "tuned-indolent")
    assert isinstance(pool, ProfilingPoolArgs)
    assert packing is None or isinstance(packing, TunedPackingArgs)
    tuned = packing or TunedPackingArgs()
    nodes = (
        (1, 1, 1, 0.5)
        if context.live
        else (pool.nodes, pool.min_nodes, pool.max_nodes, pool.max_share)
    )
    config = LucidConfig(
        profile_limit_s=pool.limit_s,
        profile_max_gpus=pool.max_gpus,
        profiler_nodes=nodes[0],
        profiler_min_nodes=nodes[1],
        profiler_max_nodes=nodes[2],
        profiler_max_share=nodes[3],
        packing=packing is not None,
        pack_when_load_above=tuned.when_load_above,
        assume_gpu_memory_gb=tuned.assume_gpu_memory_gb,
        scan_depth=tuned.scan,
    )
    return LucidPolicy(config, context.name)


def _in_order(args: object, context: BuildContext, parts: Sequence[Part]) -> object:
    order = _order(parts, "in-order")
    for phase in (PK, Phase.PREEMPTION):
        if _plugins(parts, phase):
            raise ValueError(
                f"the in-order plan calls no {phase.value} plugin; use the replan plan"
            )
    profiling = _plugins(parts, PR)
    return InOrderPlan(
        context.name,
        order,  # type: ignore[arg-type]
        _plugins(parts, A),  # type: ignore[arg-type]
        _plugins(parts, S),  # type: ignore[arg-type]
        profiling[0] if profiling else None,  # type: ignore[arg-type]
    )


def _given(args: object, context: BuildContext, parts: Sequence[Part]) -> object:
    """A plugin whose arguments its plan reads (the plan runs it inside its walk)."""
    return args


def _key(name: str, key: QueueKey, what: str) -> PluginSpec:
    def build(args: object, context: BuildContext, parts: Sequence[Part]) -> object:
        return KeyOrder(name, key, what)

    return PluginSpec(name, Q, f"queue order: {what}, lowest first", NoArgs.decode, build)


def _las(args: object, context: BuildContext, parts: Sequence[Part]) -> object:
    assert isinstance(args, LasArgs)
    return TiresiasOrder(args.thresholds)


def _remaining(args: object, context: BuildContext, parts: Sequence[Part]) -> object:
    assert isinstance(args, EstimateRemainingArgs)
    return EstimateOrder(
        restore_aware=args.restore_aware, min_run_s=args.min_run_s, aging=args.aging
    )


def _rule(args: object, context: BuildContext, parts: Sequence[Part]) -> QueueOrder:
    assert isinstance(args, RuleArgs)
    return RuleOrder(PriorityRule.parse(args.rule))


#: Every built-in plugin (the registry adds them at import).
PLUGINS: tuple[PluginSpec, ...] = (
    PluginSpec(
        "inference-first",
        INF,
        "inference starts at once, preempting the training that loses least, within the"
        " training reserve",
        InferenceArgs.decode,
        _inference_tier,
    ),
    PluginSpec(
        "static-partition",
        INF,
        "inference only on the last N nodes, never preempting (a baseline)",
        StaticPartitionArgs.decode,
        _static_tier,
    ),
    PluginSpec(
        "wait-bound",
        S,
        "a job waiting after_s goes ahead of the order (rewait_after_s once it ran)",
        WaitBoundArgs.decode,
        built_as(WaitBound),
    ),
    PluginSpec(
        "drain",
        S,
        "nodes are drained for the longest-waiting jobs past after_s",
        DrainArgs.decode,
        _given,
    ),
    PluginSpec(
        "tenant-quota",
        A,
        "a tenant at its quota ceiling waits; guarantees are reclaimed",
        QuotaArgs.decode,
        built_as(TenantQuotaFilter),
    ),
    _key("fifo", fifo_key, "submit time"),
    _key("sjf", sjf_key, "true duration (oracle)"),
    _key("qssf", qssf_key, "estimated duration x GPUs"),
    PluginSpec(
        "estimated-gpu-seconds",
        Q,
        "estimated GPU-seconds, plus aging x submit time",
        AgingArgs.decode,
        _given,
    ),
    PluginSpec("las", Q, "attained GPU-seconds by level, FIFO inside", LasArgs.decode, _las),
    PluginSpec(
        "true-remaining",
        Q,
        "true remaining time (oracle)",
        NoArgs.decode,
        lambda a, c, p: SrtfOrder(),
    ),
    PluginSpec(
        "estimated-remaining",
        Q,
        "estimated remaining time, aged per second waited",
        EstimateRemainingArgs.decode,
        _remaining,
    ),
    PluginSpec(
        "leveled-estimate",
        Q,
        "attained-GPU-seconds levels, estimated GPU-seconds left inside a level",
        LeveledArgs.decode,
        _given,
    ),
    PluginSpec("rule", Q, "a priority expression of the job's fields", RuleArgs.decode, _rule),
    PluginSpec(
        "first-run",
        PR,
        "a new job of at most max_gpus GPUs first runs limit_s, measured",
        FirstRunArgs.decode,
        built_as(FirstRun),
    ),
    PluginSpec(
        "profiling-pool",
        PR,
        "Lucid's profiling pool of nodes, sized by the tuner",
        ProfilingPoolArgs.decode,
        _given,
    ),
    PluginSpec(
        "indolent",
        PK,
        "a profiled job shares a running one's GPUs when their scores sum to <= 2",
        IndolentArgs.decode,
        _given,
    ),
    PluginSpec(
        "tuned-indolent",
        PK,
        "indolent packing, on only above a forecast load (Lucid's tuner)",
        TunedPackingArgs.decode,
        _given,
    ),
    PluginSpec(
        "head-of-line",
        PL,
        "start in queue order; stop at the first job that does not fit",
        NoArgs.decode,
        _head_of_line,
    ),
    PluginSpec(
        "easy-backfill",
        PL,
        "queue order with EASY backfilling around the head job's reservation",
        BackfillArgs.decode,
        _easy_backfill,
    ),
    PluginSpec(
        "replan",
        PL,
        "preemptive: hand GPUs out in the order every interval_s, preempt the rest",
        ReplanArgs.decode,
        _replan,
    ),
    PluginSpec(
        "fair-share",
        PL,
        "tenant guarantees, then weighted fair share in the queue order",
        NoArgs.decode,
        _fair_share,
    ),
    PluginSpec(
        "lucid",
        PL,
        "Lucid: profiling pool, estimated GPU-seconds order, forecast-tuned packing",
        NoArgs.decode,
        _lucid,
    ),
    PluginSpec(
        "in-order",
        PL,
        "rank afresh each pass; call guards, admission and profiling; skip what does not fit",
        NoArgs.decode,
        _in_order,
    ),
)
