"""No job waits forever: drain nodes for the jobs that waited longest, and backfill them.

A policy that favours small or short jobs can leave a large one waiting while
smaller jobs keep taking every GPU that frees. Once a job has waited
``starve_after_s``, main-pool nodes expected to empty soonest are drained for
it: they take no new job except a *backfilled* one, expected (by its duration
estimate) to end before those nodes were expected to be empty, which is
EASY backfilling. Up to ``depth`` of the longest-waiting jobs are drained for at
once, each on its own nodes (its own pool), so one slow drain does not hold up
every other large job behind it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass

from ilucid.core.decision import Reason
from ilucid.core.expected_start import expected_remaining
from ilucid.core.filters import allowed_types
from ilucid.core.free_gpus import MAIN_POOL
from ilucid.core.jobs import JobState, JobStatus
from ilucid.core.picklable import picklable
from ilucid.core.reason_codes import ReasonCode
from ilucid.core.scheduler import SchedulingPass

__all__ = ["DRAINED_POOL_PREFIX", "Drain", "Drainer"]

#: Pools of drained nodes are named ``drained:<id of the job drained for>``.
DRAINED_POOL_PREFIX = "drained:"

StartElsewhere = Callable[[SchedulingPass, JobState, str], bool]


@dataclass(frozen=True, slots=True)
class Drain:
    """Nodes drained for one starving job, and when they were expected to empty."""

    seq: int
    nodes: tuple[int, ...]
    #: the promise backfilled jobs must keep: their estimated end is no later
    until: float
    pool: str
    renewals: int = 0


def _expected_end(job: JobState, now: float) -> float:
    ran = job.attained_at(now) / max(1, job.spec.num_gpus)
    return now + expected_remaining(job.spec.expected_duration, ran)


class Drainer:
    """Who has waited how long, which nodes are drained for whom, and backfilling."""

    def __init__(
        self, starve_after_s: float, depth: int, scan_depth: int, max_renewals: int = 8
    ) -> None:
        self.starve_after_s = starve_after_s
        self.depth = depth
        self.scan_depth = scan_depth
        self.max_renewals = max_renewals
        self.drains: dict[int, Drain] = {}  # oldest first
        # seq -> waiting since, in order of since (jobs queue as the clock runs; a
        # recovering service may queue out of order, which a re-sort fixes lazily)
        self._waiting: dict[int, float] = {}
        self._latest = float("-inf")
        self._unsorted = False

    # -- who waits ---------------------------------------------------------------
    def waiting(self, job: JobState) -> None:
        """``job`` (re)joins the queue now; its wait counts from ``job.since``."""
        self._waiting.pop(job.seq, None)
        self._waiting[job.seq] = job.since
        if job.since < self._latest:
            self._unsorted = True
        self._latest = max(self._latest, job.since)

    def stopped_waiting(self, seq: int) -> None:
        self._waiting.pop(seq, None)

    def _oldest_first(self) -> Iterable[tuple[int, float]]:
        if self._unsorted:
            ordered = sorted(self._waiting.items(), key=lambda kv: (kv[1], kv[0]))
            self._waiting = dict(ordered)
            self._unsorted = False
        return self._waiting.items()

    def starving(
        self, now: float, jobs: Mapping[int, JobState], refused: Callable[[JobState], bool]
    ) -> list[JobState]:
        """Jobs to drain for, longest-waiting first: those already drained for, then
        the oldest past ``starve_after_s`` (skipping any over its tenant's ceiling,
        for whom draining would only idle GPUs), up to ``depth``."""
        chosen = [jobs[seq] for seq in self.drains]
        cutoff = now - self.starve_after_s
        looked = 0
        for seq, since in self._oldest_first():
            if len(chosen) >= self.depth or since > cutoff or looked >= self.scan_depth:
                break
            looked += 1
            if seq in self.drains:
                continue
            job = jobs[seq]
            if not refused(job):
                chosen.append(job)
        return chosen

    # -- draining ----------------------------------------------------------------
    def serve(
        self,
        step: SchedulingPass,
        jobs: Mapping[int, JobState],
        running: Collection[JobState],
        refused: Callable[[JobState], bool],
        start_elsewhere: StartElsewhere,
        explain: Callable[[JobState, Reason], None],
    ) -> None:
        """Start each starving job where it fits, else drain nodes for it."""
        for seq in [s for s in self.drains if not self._still_waiting(jobs.get(s))]:
            self.release(step, seq)
        hours = self.starve_after_s / 3600
        for job in self.starving(step.now, jobs, refused):
            drain = self.drains.get(job.seq)
            if drain is None:
                if start_elsewhere(step, job, f"waited over {hours:g} h; first in line"):
                    continue
                drain = self._drain_for(job, step, running)
                if drain is None:
                    continue
                for index in drain.nodes:
                    step.free.set_pool(index, drain.pool)
                self.drains[job.seq] = drain
            names = ", ".join(step.free.cluster.nodes[i].name for i in drain.nodes)
            why = f"waited over {hours:g} h; started on the nodes drained for it ({names})"
            if step.try_start(job, why, drain.pool):
                self.release(step, job.seq)
                continue
            if step.now >= drain.until and drain.renewals < self.max_renewals:
                # the jobs on these nodes outran their estimates: promise again from what
                # is expected now, or nothing could be backfilled until the last one ends
                self.drains[job.seq] = drain = self._renew(drain, step.now, running)
            explain(
                job,
                Reason(
                    ReasonCode.DRAINING_FOR_STARVING_JOB,
                    f"waited over {hours:g} h: node(s) {names} take no new training job"
                    f" until it fits there, except jobs expected to end by"
                    f" t={drain.until:.0f}, when they are expected to be empty",
                ),
            )

    @staticmethod
    def _still_waiting(job: JobState | None) -> bool:
        return job is not None and job.status is JobStatus.PENDING

    def _drain_for(
        self, job: JobState, step: SchedulingPass, running: Collection[JobState]
    ) -> Drain | None:
        """Main-pool nodes expected to empty soonest that together can hold the job.

        A node empties when its last running job is expected to end (duration
        estimates, never true durations). Choosing by free GPUs instead left
        drained nodes waiting up to ten days on one long job (ITP cluster04).
        """
        free = step.free
        now = step.now
        empty_at: dict[int, float] = {}
        for other in running:
            if other.placement is None or other.status is not JobStatus.RUNNING:
                continue
            end = _expected_end(other, now)
            for index in other.placement.node_indices:
                empty_at[index] = max(empty_at.get(index, now), end)
        types = allowed_types(job.spec, free.cluster)
        nodes = free.cluster.nodes
        candidates = sorted(
            (
                i
                for i, node in enumerate(nodes)
                if free.pool_of[i] == MAIN_POOL and (types is None or node.gpu_type in types)
            ),
            key=lambda i: (empty_at.get(i, now), -free.free[i], i),
        )
        chosen: list[int] = []
        capacity = 0
        for index in candidates:
            chosen.append(index)
            capacity += free.capacity[index]
            if capacity >= job.spec.num_gpus:
                until = max(empty_at.get(i, now) for i in chosen)
                pool = f"{DRAINED_POOL_PREFIX}{job.spec.id}"
                return Drain(job.seq, tuple(chosen), until, pool)
        return None

    @staticmethod
    def _renew(drain: Drain, now: float, running: Collection[JobState]) -> Drain:
        """The drain with its promise moved to when its nodes are now expected to empty.

        Measured on Alibaba v2023 LS/BE (5 x 8 GPUs): with promises that expired
        and stayed expired, drained nodes idled until their slowest job ended, and
        training mean JCT was 81k s; renewed, 22k s (inference p99 unchanged).

        A job past its estimate is expected to run as long again as it has run,
        so each renewal follows it to about twice its run so far. Renewals are
        capped (``max_renewals``, 8: up to ~256 x that run): otherwise jobs
        backfilled there that keep outrunning their estimates could postpone the
        job drained for forever. After the last, nothing more is backfilled and
        the nodes empty for it.
        """
        nodes = set(drain.nodes)
        until = now
        for other in running:
            placement = other.placement
            if placement is None or other.status is not JobStatus.RUNNING:
                continue
            if not nodes.isdisjoint(placement.node_indices):
                until = max(until, _expected_end(other, now))
        return dataclasses.replace(drain, until=until, renewals=drain.renewals + 1)

    def release(self, step: SchedulingPass, seq: int) -> None:
        for index in self.drains.pop(seq).nodes:
            step.free.set_pool(index, MAIN_POOL)

    # -- backfilling -------------------------------------------------------------
    def free_gpus(self, step: SchedulingPass) -> int:
        pools = step.free.pool_free
        return sum(pools.get(drain.pool, 0) for drain in self.drains.values())

    def latest_promise(self) -> float | None:
        return max((d.until for d in self.drains.values()), default=None)

    def can_backfill(self, job: JobState, now: float, latest: float | None) -> bool:
        """Whether ``job`` is expected to end before some drain's promise."""
        return latest is not None and _expected_end(job, now) <= latest

    def backfill(self, step: SchedulingPass, job: JobState, jobs: Mapping[int, JobState]) -> bool:
        """Start ``job`` on drained nodes whose promise it keeps, tightest first."""
        end = _expected_end(job, step.now)
        for drain in sorted(self.drains.values(), key=lambda d: d.until):
            if drain.until < end or drain.seq == job.seq:
                continue
            why = (
                f"backfilled on nodes drained for job {jobs[drain.seq].spec.id}: expected"
                f" to end by t={drain.until:.0f}, before they are expected to be empty"
            )
            if step.try_start(job, why, drain.pool):
                return True
        return False


picklable(Drain)
