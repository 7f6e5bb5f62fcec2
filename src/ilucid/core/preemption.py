"""Choosing which running jobs to preempt so that another can start.

Victims are tried best-effort before training, then smallest first, then
cheapest first, where a victim's cost is the work the cluster loses by
stopping it: its GPUs times (seconds since its last checkpoint + the restore
overhead); remaining ties go to the job with the most work left (it suffers
least, relatively). Size comes before lost work because a preempted job must
wait to start again and a wide one needs whole nodes: on ITP cluster04 with
inference services, ranking by lost work alone preempted just-started
32-GPU jobs for 1-GPU services and left drained nodes idle for days.
Victims are added until the job can be placed, then any victim the placement
does not need is dropped again. The search works on the real free-GPU index
and undoes every change before it returns, so nothing is preempted unless the
caller decides to.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ilucid.core.free_gpus import MAIN_POOL, FreeGpus
from ilucid.core.jobs import JobState
from ilucid.core.model import JobClass, JobSpec
from ilucid.core.picklable import picklable
from ilucid.core.placement import Placer
from ilucid.core.scheduler import SchedulerConfig

__all__ = ["Victim", "choose_victims", "victim_cost"]


@dataclass(frozen=True, slots=True)
class Victim:
    job: JobState
    lost_s: float  # run time since its last checkpoint
    cost_gpu_s: float  # GPUs x (lost + restore overhead)


_TIER = {JobClass.BEST_EFFORT: 0, JobClass.TRAINING: 1, JobClass.INFERENCE: 2}


def victim_cost(job: JobState, now: float, config: SchedulerConfig) -> Victim:
    lost = config.lost_if_stopped(job, now)
    overhead = config.overhead.for_job(job.spec)
    return Victim(job, lost, job.spec.num_gpus * (lost + overhead))


def choose_victims(
    job: JobSpec,
    candidates: Iterable[JobState],
    free: FreeGpus,
    placer: Placer,
    now: float,
    config: SchedulerConfig,
    pool: str = MAIN_POOL,
    max_victims: int = 64,
) -> list[Victim] | None:
    """The cheapest set of ``candidates`` whose GPUs let ``job`` be placed, or None."""
    ranked = sorted(
        (victim_cost(c, now, config) for c in candidates if c.placement is not None),
        key=lambda v: (
            _TIER[v.job.spec.job_class],
            v.job.spec.num_gpus,
            v.cost_gpu_s,
            -v.job.remaining_at(now),
            v.job.seq,
        ),
    )
    freed: list[Victim] = []
    try:
        for victim in ranked[:max_victims]:
            assert victim.job.placement is not None
            free.give_back(victim.job.placement)
            freed.append(victim)
            if placer.place(job, free, pool) is not None:
                break
        else:
            return None
        # drop victims the placement turns out not to need, most expensive first
        needed = list(freed)
        for victim in reversed(freed[:-1]):
            assert victim.job.placement is not None
            free.take(victim.job.placement)
            if placer.place(job, free, pool) is None:
                free.give_back(victim.job.placement)
            else:
                needed.remove(victim)
                freed.remove(victim)
        return needed
    finally:
        for victim in freed:
            assert victim.job.placement is not None
            free.take(victim.job.placement)


picklable(Victim)
