"""The words a waiting job's sentence is made of: pools as users know them, busy GPUs.

Pools are the core's own bookkeeping (a policy moves nodes between them); a user
never chose one, so a sentence names what a pool is *for* ("lent to the
profiler"), never its internal name. The names below are the policies' own
constants, spelled out here because the core cannot import its policies (a
test checks that they agree).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from ilucid.core.free_gpus import MAIN_POOL, UNAVAILABLE_POOL
from ilucid.core.jobs import JobState, JobStatus
from ilucid.core.model import JobClass, JobSpec

__all__ = [
    "DRAINED_PREFIX",
    "INFERENCE_PARTITION",
    "PROFILER",
    "SERVING",
    "UNAVAILABLE",
    "busy_by_class",
    "class_split",
    "plural",
    "pool_open_to",
    "pool_words",
]

#: nodes that serve inference; training uses them when nothing else is free
SERVING = "serving"
#: the static-partition baseline's inference nodes
INFERENCE_PARTITION = "inference"
#: Lucid's profiling nodes
PROFILER = "profiler"
#: nodes kept empty for one starving job: ``drained:<job id>``
DRAINED_PREFIX = "drained:"
#: nodes the cluster manager took out of service (drained, down, cordoned)
UNAVAILABLE = UNAVAILABLE_POOL

#: the order classes are named in a split of busy GPUs
_CLASS_ORDER = (JobClass.TRAINING.value, JobClass.INFERENCE.value, JobClass.BEST_EFFORT.value)


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 GPU``, ``2 GPUs``, ``0 GPUs``."""
    return f"{count:,} {word if count == 1 else (many or word + 's')}"


def pool_open_to(job: JobSpec, pool: str) -> bool:
    """Whether ``job`` may start on a node of ``pool`` (as the policies place jobs).

    Every policy with an inference tier lets training fall back onto serving
    nodes; a drained node waits for the one job it was drained for.
    """
    if pool in (MAIN_POOL, SERVING):
        return True
    if pool == INFERENCE_PARTITION:
        return job.job_class is JobClass.INFERENCE
    return pool == DRAINED_PREFIX + job.id


def pool_words(pool: str) -> str:
    """What nodes of a closed pool are doing, to follow a node count: ``2 lent to ...``."""
    if pool == PROFILER:
        return "lent to the profiler (new jobs' first short runs)"
    if pool == INFERENCE_PARTITION:
        return "kept for inference (static partition)"
    if pool == UNAVAILABLE:
        return "out of service (drained, cordoned or down in the cluster manager)"
    if pool.startswith(DRAINED_PREFIX):
        return f"kept empty for {pool.removeprefix(DRAINED_PREFIX)}, which has waited longest"
    if pool == SERVING:
        return "serving inference"
    if pool.endswith(":off"):  # ilucid.core.cloud.OFF_SUFFIX (imported there from here)
        paid = pool.removesuffix(":off")
        return f"powered down in paid pool {paid} (brought up for bursts)"
    return f"in pool {pool} (nodes labelled pool={pool})"


def busy_by_class(jobs: Iterable[JobState], partners: Mapping[str, str]) -> dict[int, Counter[str]]:
    """GPUs running jobs hold, per node index and job class (a packed pair, a shared GPU
    counted once)."""
    held: dict[int, Counter[str]] = {}
    shared: set[tuple[int, int]] = set()
    for job in jobs:
        if job.status is not JobStatus.RUNNING or job.placement is None:
            continue
        partner = partners.get(job.spec.id)
        if partner is not None and partner < job.spec.id:
            continue  # the pair's GPUs are counted with the other job
        share = job.placement.share
        if share is not None:  # a GPU shared by fractions: counted with its first job seen
            where = (job.placement.parts[0][0], share)
            if where in shared:
                continue
            shared.add(where)
        for index, count in job.placement.parts:
            held.setdefault(index, Counter())[job.spec.job_class.value] += count
    return held


def class_split(busy: Mapping[str, int]) -> str:
    """``3 training, 1 inference``: who holds the busy GPUs, training first."""
    known = [f"{busy[c]:,} {c}" for c in _CLASS_ORDER if busy.get(c)]
    known += [f"{n:,} {c}" for c, n in sorted(busy.items()) if n and c not in _CLASS_ORDER]
    return ", ".join(known)
