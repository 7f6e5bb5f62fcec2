"""Reason codes: the countable half of a :class:`~ilucid.core.decision.Reason`.

A code is what machines count and filter on (the service's ``ilucid_decisions``
metric, the ``code`` of a job's decisions in the API, the ``wait_reason`` column of
a replay's jobs CSV); the reason's sentence is what people read. Each member
carries its documented meaning: what it says about the job and what an operator
can do about it. ``docs/reason-codes.md`` lists them (a test keeps the two equal).

The values are the strings stored before the codes were an enum, so stored
decisions, API output, metric labels and replays read the same; a new member takes
a new value, never a stored one.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Final

__all__ = ["MEANINGS", "ReasonCode"]


class ReasonCode(StrEnum):
    """Why a job started, stopped or waits, as a code; ``meaning`` documents it."""

    # -- a job started (the code of a start decision) ---------------------------------
    SCHEDULED = "Scheduled"
    PACKED = "Packed"
    BURST = "Burst"
    DISPLACED = "Displaced"
    # -- a running job was stopped (the code of a preempt decision) --------------------
    PREEMPTED = "Preempted"
    # -- a job waits: the core's judgement of the nodes open to it ---------------------
    BEHIND_IN_ORDER = "BehindInOrder"
    INSUFFICIENT_GPUS = "InsufficientGpus"
    FRAGMENTED = "Fragmented"
    NO_PLACEMENT = "NoPlacement"
    TOO_LARGE = "TooLarge"
    UNSCHEDULABLE = "Unschedulable"
    # -- a node refuses a job (a filter's reason, tallied in the sentences above) -----
    GPU_TYPE_MISMATCH = "GpuTypeMismatch"
    INSUFFICIENT_GPU_MEMORY = "InsufficientGpuMemory"
    INSUFFICIENT_HOST = "InsufficientHost"
    # -- a job waits: the policy's own rules ---------------------------------------------
    QUOTA_EXCEEDED = "QuotaExceeded"
    WAITING_FOR_PROFILER = "WaitingForProfiler"
    STARVATION_GUARD = "StarvationGuard"
    DRAINING_FOR_STARVING_JOB = "DrainingForStarvingJob"
    TRAINING_RESERVE = "TrainingReserve"
    INFERENCE_POOL_FULL = "InferencePoolFull"
    NO_PREEMPTIBLE = "NoPreemptible"
    WAITING_FOR_FASTER_TYPE = "WaitingForFasterType"

    @property
    def meaning(self) -> str:
        """What the code says about the job, and what an operator can do."""
        return MEANINGS[self]


#: each code's documented meaning (docs/reason-codes.md repeats it; a test compares)
MEANINGS: Final[Mapping[ReasonCode, str]] = {
    ReasonCode.SCHEDULED: (
        "The job started on the GPUs its decision names; the sentence says why it went"
        " now (the policy's order, free GPUs). Nothing to do."
    ),
    ReasonCode.PACKED: (
        "The job started on the GPUs of a running job and shares them with it"
        " (indolent packing, after profiling judged the pair compatible); both run"
        " somewhat slower until one ends. A profile without packing avoids it."
    ),
    ReasonCode.BURST: (
        "The job started in a paid pool (nodes labelled with the pool's name) because its"
        " expected on-prem wait, priced at value_of_wait per GPU-hour, was worth more"
        " than the pool's price; it holds those GPUs through the pool's start-up. Tune"
        " value_of_wait or the pool's price to burst less or more."
    ),
    ReasonCode.DISPLACED: (
        "Added to a start: the job runs on GPUs this pass freed by preempting the jobs"
        " the sentence names. Look at their Preempted decisions for the cost."
    ),
    ReasonCode.PREEMPTED: (
        "The job was stopped to make room for other work (jobs ahead of it in the policy's"
        " order, inference, a tenant taking back its guaranteed quota, a starving job)"
        " and is pending again; it loses the work since its last checkpoint and pays a"
        " restore overhead when it restarts (both in the sentence). Checkpointing more"
        " often loses less."
    ),
    ReasonCode.BEHIND_IN_ORDER: (
        "The job would fit on free GPUs now, but the policy serves jobs ahead of it first"
        " (its queue order or a reservation). Its sentence names them (the first three,"
        " then how many more) and why the first of them waits; with none ahead it says"
        " the job starts at the policy's next pass (the default profile re-plans every"
        " 60 s)."
    ),
    ReasonCode.INSUFFICIENT_GPUS: (
        "Too few GPUs are free on the nodes open to the job; the sentence says who holds"
        " the busy ones. It starts when running jobs end; asking for fewer GPUs may"
        " start it sooner."
    ),
    ReasonCode.FRAGMENTED: (
        "Enough GPUs are free in total, but spread over nodes so that none (or too few"
        " whole nodes) holds the job's GPUs together. It waits for a node to empty;"
        " a gang shaped to the free GPUs, or fewer GPUs, may start sooner."
    ),
    ReasonCode.NO_PLACEMENT: (
        "Enough GPUs are free on enough nodes, yet the placer finds no set of them that"
        " holds the job together (its shape or topology rules). It waits for a"
        " different set to free."
    ),
    ReasonCode.TOO_LARGE: (
        "The job asks for more GPUs than all the nodes open to it have; it cannot start"
        " while the cluster stays as it is. Resubmit with fewer GPUs or a wider GPU"
        " type, or bring nodes back into service."
    ),
    ReasonCode.UNSCHEDULABLE: (
        "No node may take the job at all: each is in a pool closed to it or refused by"
        " a filter (GPU type, GPU memory, CPUs or memory), as the sentence tallies."
        " Check the job's stated needs against the nodes."
    ),
    ReasonCode.GPU_TYPE_MISMATCH: (
        "A node's GPU type is not one the job asks for (gpu_type, alternatives separated"
        " by a vertical bar). Widen the job's gpu_type if other types would do."
    ),
    ReasonCode.INSUFFICIENT_GPU_MEMORY: (
        "A node's GPUs have less memory than the job states it needs (gpu_memory_gb)."
        " Check the job's statement; only nodes with larger GPUs can take it."
    ),
    ReasonCode.INSUFFICIENT_HOST: (
        "A node lacks the CPUs or host memory the job states (cpus, memory_gb): it has"
        " too few at all, or the nodes with free GPUs (any node, for a job of no GPUs)"
        " have too few left; the sentence names those nodes. Check the job's statement;"
        " it waits for those nodes' jobs to end."
    ),
    ReasonCode.QUOTA_EXCEEDED: (
        "Starting the job would take its tenant past its quota (guaranteed GPUs plus"
        " what it may borrow). It starts when the tenant's own jobs end; an operator"
        " can raise the tenant's quota."
    ),
    ReasonCode.WAITING_FOR_PROFILER: (
        "A new job waits for a slot on the profiling nodes, where each new job first"
        " runs for a short measured run (Lucid). It moves on as profiling runs end."
    ),
    ReasonCode.STARVATION_GUARD: (
        "The job has waited past the guard's bound and is now served ahead of the"
        " policy's order as soon as GPUs free, preempting other training if it must."
        " Nothing to do: this is the bound on how long any job waits."
    ),
    ReasonCode.DRAINING_FOR_STARVING_JOB: (
        "The job has waited past the starvation bound; the nodes the sentence names"
        " take no new training job (except ones expected to end in time) until it"
        " fits there. It starts when they empty."
    ),
    ReasonCode.TRAINING_RESERVE: (
        "An inference job waits because starting it would take inference past its"
        " share and break the reserve of GPUs kept for training. An operator can lower"
        " the reserve."
    ),
    ReasonCode.INFERENCE_POOL_FULL: (
        "An inference job waits: the nodes set apart for inference (static partition)"
        " have too few free GPUs. It starts when an inference service there ends;"
        " more inference nodes (static-partition:N) give it room."
    ),
    ReasonCode.NO_PREEMPTIBLE: (
        "An inference job waits: no GPUs are free and preempting training or"
        " best-effort jobs would free none it could use (some may be spared, having"
        " been preempted too often already). It starts when GPUs free."
    ),
    ReasonCode.WAITING_FOR_FASTER_TYPE: (
        "A slower GPU type has room, but the job runs much faster on another type and"
        " waits for it a while: at most a small share (the scheduler's GPU type patience)"
        " of the extra run time the slower type would cost it. It starts on the faster"
        " type when one frees, or on the slower one once that wait is over. A job that"
        " could move to the faster type later does not wait, unless the queue is crowded:"
        " it starts on the slower type and moves when it pays (see the placement docs)."
    ),
}
