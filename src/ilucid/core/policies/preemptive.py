"""Preemptive policies that re-plan the whole running set: SRTF and Tiresias.

Both follow the Lucid artifact's semantics: order every active job (running
and pending), walk that order handing out the cluster's GPU quota (a job that
does not fit is skipped, not blocking), preempt every running job left out,
then place the chosen pending jobs; one that cannot be placed (fragmentation)
stays pending until the next pass.

A naive walk visits every active job on every pass, which is far too slow for
a 100,000-job trace. Here running and pending jobs live in separate sorted
structures whose keys do not change while a job keeps its status, so a pass
jumps over whole runs of running jobs with one prefix-sum query and visits
only pending jobs small enough for the quota left. The plan can only change
at arrivals, completions and (Tiresias) demotions; passes happen only then.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Iterable, Iterator
from typing import cast

from ilucid.core.decision import Reason
from ilucid.core.free_gpus import FULL_GPU
from ilucid.core.jobs import JobState, JobStatus
from ilucid.core.model import JobSpec
from ilucid.core.policies.plan import PlanBase
from ilucid.core.policies.replan_orders import (
    EstimateOrder,
    ReplanOrder,
    SrtfOrder,
    TiresiasOrder,
)
from ilucid.core.reason_codes import ReasonCode
from ilucid.core.scheduler import SchedulingPass
from ilucid.core.sorted_blocks import SortedBlocks
from ilucid.core.sorted_sums import Entry, SortedSums
from ilucid.core.wait_words import plural

__all__ = [
    "ReplanningPolicy",
    "estimate_srtf",
    "srtf",
    "tiresias",
]

#: crossings re-keyed one heap pop each before the rest due are taken in one sweep
_BULK = 2048
#: stale heap entries tolerated beyond twice the live ones before a sweep drops them
_SLACK = 1024
#: a walk's head in one GPU count's bucket: (entry, GPUs, block, offset)
_Head = tuple[Entry, float, int, int]
#: key of an entry no job has (seqs count from 0) whose value the collector always tracks
_ANCHOR = -1


class ReplanningPolicy(PlanBase):
    """Greedy quota re-planning over a dynamic order (see module docstring)."""

    def __init__(self, name: str, order: ReplanOrder, interval: float = 0.0) -> None:
        self.name = name
        self.order = order
        self.interval = interval
        self._jobs: dict[int, JobState] = {}
        #: every job's entry, and one anchor that keeps the dict tracked by the collector:
        #: a dict of only untracked values (these tuples, once collected) is untracked at a
        #: full collection and tracked again as a young object at its next insert, so the
        #: young collections walk all its entries, 40 ms of a 100 ms pass at 200k jobs
        self._entry: dict[int, Entry] = {_ANCHOR: cast(Entry, (math.nan, []))}
        self._running = SortedSums()
        #: GPUs (a share of one GPU: its fraction) -> sorted pending entries
        self._pending: dict[float, SortedBlocks] = {}
        self._sizes: list[float] = []
        self._pending_count = 0
        self._crossings: list[tuple[float, int, float]] = []  # (time, seq, since)
        #: jobs re-keyed by their own progress -> the one crossing of theirs that counts
        #: (each re-key pushes one; the earlier ones are stale). Other jobs are not in it
        self._measured_due: dict[int, float] = {}
        self._dirty = False
        self._in_pass = False  # inside schedule(): its own preemptions need no re-plan
        self.replans = 0  # passes that re-planned (a subclass acts after them)
        #: while a pass preempts: the jobs it chose ahead of the one stopped, named
        self._taking = ""

    # -- bookkeeping -------------------------------------------------------------
    def _add_pending(self, job: JobState) -> None:
        entry = _weighed(self.order.pending_entry(job), job.spec)
        self._entry[job.seq] = entry
        gpus = entry[-1]
        bucket = self._pending.get(gpus)
        if bucket is None:
            bucket = self._pending[gpus] = SortedBlocks()
            bisect.insort(self._sizes, gpus)
        bucket.add(entry)
        self._pending_count += 1

    def _remove_pending(self, job: JobState) -> None:
        entry = self._entry.pop(job.seq)
        self._pending[entry[-1]].remove(entry)
        self._pending_count -= 1

    def _add_running(self, job: JobState, now: float) -> None:
        entry, crossing = self.order.rekey(job, now)
        entry = _weighed(entry, job.spec)
        self._entry[job.seq] = entry
        self._running.add(entry)
        if self._measured_due and job.seq in self._measured_due:
            self._measured_due[job.seq] = -math.inf if crossing is None else crossing
        if crossing is not None:
            crossings = self._crossings
            heapq.heappush(crossings, (crossing, job.seq, job.since))
            if len(crossings) > 2 * (len(self._jobs) - self._pending_count) + _SLACK:
                # entries of jobs stopped since are stale: drop them in one sweep (what
                # stays pops in the same order), so the heap stays within twice the running
                crossings[:] = [item for item in crossings if self._still_running(item)]
                heapq.heapify(crossings)

    def _still_running(self, item: tuple[float, int, float]) -> bool:
        """Whether a heap entry ``(time, seq, since)`` is of a job running since then."""
        job = self._jobs.get(item[1])
        return (
            job is not None
            and job.status is JobStatus.RUNNING
            and job.since == item[2]
            and not self._superseded(item)
        )

    def _superseded(self, item: tuple[float, int, float]) -> bool:
        """A crossing of a job re-keyed by its progress since it was pushed."""
        due = self._measured_due
        return bool(due) and item[1] in due and due[item[1]] != item[0]

    def rekey_measured(self, job: JobState, now: float) -> None:
        """Re-key a running job whose estimate its own progress just changed; its earlier
        crossings no longer count (one crossing a job, however often it reports)."""
        seq = job.seq
        self._running.remove(self._entry[seq])
        entry, crossing = self.order.rekey(job, now)
        entry = _weighed(entry, job.spec)
        self._entry[seq] = entry
        self._running.add(entry)
        due = self._measured_due
        if crossing is None:
            due[seq] = -math.inf  # none of its crossings counts
        elif due.get(seq) != crossing:  # (the same crossing as before: that entry stands)
            due[seq] = crossing
            heapq.heappush(self._crossings, (crossing, seq, job.since))

    def _demote_crossed(self, now: float) -> bool:
        """Re-key running jobs whose key changes by ``now`` (a threshold crossed, an
        estimate outlived), in the order they fall due. Past ``_BULK`` of them (a cold
        pass re-keys a whole cluster) the rest are taken in one sweep and one sort, not
        one heap pop each: the same entries in the same order, as a new key falling due
        at once waits for the next pass either way."""
        demoted = False
        crossings = self._crossings
        not_yet: list[tuple[float, int, float]] = []
        pop, demote = heapq.heappop, self._demote
        taken = 0
        while crossings and crossings[0][0] <= now:
            taken += 1
            if taken > _BULK:
                due = [item for item in crossings if item[0] <= now]
                crossings[:] = [item for item in crossings if item[0] > now]
                heapq.heapify(crossings)
                due.sort()
                for item in due:
                    if demote(item, now, not_yet):
                        demoted = True
                break
            if demote(pop(crossings), now, not_yet):
                demoted = True
        measured = self._measured_due
        for item in not_yet:
            heapq.heappush(crossings, (item[0] + 1e-6, item[1], item[2]))
            if measured and item[1] in measured:
                measured[item[1]] = item[0] + 1e-6
        return demoted

    def _demote(
        self, item: tuple[float, int, float], now: float, not_yet: list[tuple[float, int, float]]
    ) -> bool:
        """Re-key the job of one crossing due by ``now``; whether its key changed. A key
        due again at once goes to ``not_yet`` (pushed back after the pass's re-keys)."""
        job = self._jobs.get(item[1])
        if job is None or job.status is not JobStatus.RUNNING or job.since != item[2]:
            return False  # stale: finished or preempted since
        if self._measured_due and self._superseded(item):
            return False  # stale: re-keyed by its progress since
        if self._keeps_key(job):
            return False  # its key no longer changes while it runs
        order, entries = self.order, self._entry
        order.refresh(job, now)
        fresh, crossing = order.rekey(job, now)
        fresh = _weighed(fresh, job.spec)
        old = entries[job.seq]
        if fresh == old:
            not_yet.append(item)  # rounding: crosses strictly after this instant
            return False
        running = self._running
        running.remove(old)
        running.add(fresh)
        entries[job.seq] = fresh
        due = self._measured_due
        if due and job.seq in due:
            due[job.seq] = -math.inf if crossing is None else crossing
        if crossing is not None:
            if crossing <= now:  # due again at once: its key is the one just set
                not_yet.append((crossing, job.seq, job.since))
            else:
                heapq.heappush(self._crossings, (crossing, job.seq, job.since))
        return True

    # -- stimuli -----------------------------------------------------------------
    def on_submitted(self, job: JobState, now: float) -> None:
        self._jobs[job.seq] = job
        self._add_pending(job)
        self._dirty = True

    def on_started(self, job: JobState, now: float) -> None:
        self._remove_pending(job)
        self._add_running(job, now)

    def on_preempted(self, job: JobState, now: float) -> None:
        self._running.remove(self._entry.pop(job.seq))
        if self._measured_due:
            self._measured_due.pop(job.seq, None)
        self._add_pending(job)
        if not self._in_pass:  # requeued from outside (a live process vanished): re-plan
            self._dirty = True

    def on_withdrawn(self, job: JobState, now: float) -> None:
        self._remove_pending(job)
        del self._jobs[job.seq]
        self._dirty = True

    def on_finished(self, job: JobState, now: float) -> None:
        self._running.remove(self._entry.pop(job.seq))
        del self._jobs[job.seq]
        if self._measured_due:
            self._measured_due.pop(job.seq, None)
        self.order.observe_finished(job)
        self._dirty = True

    # -- timing --------------------------------------------------------------------
    def _boundary(self, now: float) -> float:
        """The pass time at or after ``now`` (every ``interval`` s of absolute time)."""
        if self.interval <= 0:
            return now
        boundary = math.ceil(now / self.interval) * self.interval
        # floating point may round k * interval just below now: take the next one
        return boundary + self.interval if boundary < now else boundary

    def next_wakeup(self, now: float) -> float | None:
        if self._dirty:
            return self._boundary(now)
        if not self._pending_count:
            return None
        crossings = self._crossings
        while crossings:
            crossing, seq, since = crossings[0]
            job = self._jobs.get(seq)
            if (
                job is not None
                and job.status is JobStatus.RUNNING
                and job.since == since
                and not (self._measured_due and self._superseded(crossings[0]))
            ):
                break
            heapq.heappop(crossings)
        if not crossings:
            return None
        crossing = crossings[0][0]
        wake = self._boundary(crossing)
        if wake <= crossing:  # demotion needs attained > threshold: strictly after
            wake = (
                crossing + self.interval
                if self.interval > 0
                else math.nextafter(crossing, math.inf)
            )
            wake = self._boundary(wake)
        return max(wake, self._boundary_after(now))

    def _boundary_after(self, now: float) -> float:
        """The first pass time strictly after ``now``."""
        if self.interval <= 0:
            return math.nextafter(now, math.inf)
        boundary = self._boundary(now)
        return boundary + self.interval if boundary <= now else boundary

    def pending_order(self) -> Iterator[JobState]:
        for entry in heapq.merge(*self._pending.values()):
            yield self._jobs[int(entry[-2])]

    def queue_position(self, job: JobState, now: float) -> int | None:
        entry = self._entry.get(job.seq)
        if entry is None or job.status is not JobStatus.PENDING:
            return None
        return 1 + sum(b.bisect_left(entry) for b in self._pending.values())

    # -- decisions ---------------------------------------------------------------
    def _next_candidate(self, heads: list[_Head], quota: float) -> Entry | None:
        """The next pending entry in the order that needs at most ``quota`` GPUs.

        ``heads`` holds, for each GPU count still in the walk, the first entry
        after the last candidate (distinct entries: none ties another) and its
        position in its bucket. Quota only shrinks during a walk, so a count that
        no longer fits is dropped for good; only the chosen count's head moves on."""
        pending = self._pending
        while heads:
            entry, gpus, block, offset = heads[0]
            if gpus > quota:
                heapq.heappop(heads)
                continue
            after = pending[gpus].following(block, offset)
            if after is not None:
                heapq.heapreplace(heads, (after[0], gpus, after[1], after[2]))
            else:
                heapq.heappop(heads)
            return entry
        return None

    def _candidate_heads(self, quota: float) -> list[_Head]:
        """A heap of each GPU count's first pending entry ``(entry, gpus, position)``, for
        the counts that fit ``quota``: the walk merges the per-count buckets in order."""
        heads: list[_Head] = []
        pending = self._pending
        for gpus in self._sizes:
            if gpus > quota:
                break
            first = pending[gpus].first()
            if first is not None:
                heads.append((first[0], gpus, first[1], first[2]))
        heapq.heapify(heads)
        return heads

    def schedule(self, step: SchedulingPass) -> None:
        now = step.now
        if self.interval > 0 and now != self._boundary(now):
            return
        if self._crossings and self._demote_crossed(now):
            self._dirty = True
        if not self._dirty:
            return
        self._dirty = False
        self.replans += 1
        chosen, victims = self._walk(step, self._capacity(step))
        jobs = self._jobs
        displaced: dict[int, dict[str, JobState]] = {}  # node -> jobs preempted there now
        self._in_pass = True
        try:
            for entry in victims:
                victim = jobs[int(entry[-2])]
                if victim.placement is not None:
                    for node, _ in victim.placement.parts:
                        displaced.setdefault(node, {})[victim.spec.id] = victim
                self._taking = _takers(chosen, entry, jobs)
                self._preempt(step, victim)
        finally:
            self._in_pass = False
            self._taking = ""
        self._start_chosen(step, chosen, displaced)

    def _walk(self, step: SchedulingPass, quota: float) -> tuple[list[Entry], list[Entry]]:
        """Hand ``quota`` GPUs out in the order: the pending entries chosen to start and
        the running entries to preempt. Between two pending candidates, the running
        entries ordered before the later one are taken as one block by a prefix-sum
        query unless the block does not fit (then one by one)."""
        now = step.now
        running = self._running
        bound, sum_below = self.order.bound, running.cursor().sum_below
        admissible = None if self._admits_all() else self._admissible
        heads = self._candidate_heads(quota)
        chosen: list[Entry] = []
        victims: list[Entry] = []
        low: Entry | None = None
        below_low = 0.0  # GPUs of the running entries before ``low``
        next_candidate = self._next_candidate
        while True:
            candidate = next_candidate(heads, quota)
            if candidate is None:
                high = None
                below_high = running.total
            else:
                high = bound(candidate, now)
                below_high = sum_below(high)
            block = below_high - below_low
            if block <= quota:
                quota -= block
            else:
                rest: Iterable[Entry]
                if running.whole:  # the prefix that fits is taken by exact block sums
                    quota, misfit = running.take_within(low, high, quota)
                    rest = running.iter_range(misfit, high) if misfit is not None else ()
                else:
                    rest = running.iter_range(low, high)
                for entry in rest:
                    if entry[-1] <= quota:
                        quota -= entry[-1]
                    else:
                        victims.append(entry)
            if candidate is None:
                return chosen, victims
            if candidate[-1] <= quota and (admissible is None or admissible(candidate, step)):
                chosen.append(candidate)
                quota -= candidate[-1]
            low, below_low = high, below_high
            if quota <= 0 and not any(head[1] <= 0 for head in heads):  # (none of 0 GPUs)
                # every running job left out needs GPUs: one of none holds none to give
                victims.extend(e for e in running.iter_range(low, None) if e[-1] > 0)
                return chosen, victims

    def _start_chosen(
        self, step: SchedulingPass, chosen: list[Entry], displaced: dict[int, dict[str, JobState]]
    ) -> None:
        """Start the walk's chosen jobs in order. Free GPUs only shrink meanwhile: a
        request that found no room finds none later in the pass (fragmentation), so it
        is not placed again (a cluster that bursts to paid pools decides each job by its
        own expected wait)."""
        no_room: set[tuple[object, ...]] = set()
        remember = not step.bursts
        # a job with measured GPU type speeds may wait for its fastest type: whether it
        # starts is its own (its wait so far), not its request's
        book = step.type_speeds
        waits = book.patience > 0 and bool(book.speeds)
        jobs = self._jobs
        for entry in chosen:
            job = jobs[int(entry[-2])]
            own = waits and job.spec.id in book.speeds
            if no_room and not own and _request(job.spec) in no_room:
                continue
            if self._start(step, job):
                if displaced:
                    _name_displaced(step, job, displaced)
            elif remember and not own:
                no_room.add(_request(job.spec))

    # -- extension hooks (the default profile fills them in) -------------------------
    def _capacity(self, step: SchedulingPass) -> float:
        """GPUs the walk hands out: the whole cluster."""
        return float(step.free.cluster.total_gpus)

    def _admissible(self, entry: Entry, step: SchedulingPass) -> bool:
        """Whether the walk may choose the pending job of ``entry`` (admission filters)."""
        return True

    def _admits_all(self) -> bool:
        """Whether ``_admissible`` says yes to every job (the walk then skips it)."""
        return True

    def _start(self, step: SchedulingPass, job: JobState) -> bool:
        return step.try_start(job, f"{self.name}: within the GPU quota in its order")

    def _preempt(self, step: SchedulingPass, job: JobState) -> None:
        step.preempt(job, f"{self.name}: jobs ahead in its order need its GPUs{self._taking}")

    def _keeps_key(self, job: JobState) -> bool:
        """Whether a running job's key is fixed until it ends (its re-keys are void)."""
        return False


def _takers(chosen: list[Entry], victim: Entry, jobs: dict[int, JobState]) -> str:
    """``: j1, j2, j3 and 4 more``: the jobs of GPUs a pass chose ahead of ``victim`` in
    its order (all it chose, when none is ahead), which its GPUs go to."""
    takers = [c for c in chosen if c[-1] > 0]
    ahead = [c for c in takers if c < victim] or takers
    if not ahead:
        return ""
    named = ", ".join(jobs[int(c[-2])].spec.id for c in ahead[:3])
    more = f" and {len(ahead) - 3:,} more" if len(ahead) > 3 else ""
    return f": {named}{more}"


def _weighed(entry: Entry, spec: JobSpec) -> Entry:
    """``entry`` with the GPUs the walk counts for its job: a share of one GPU counts as
    its fraction (two halves hand out one GPU of the quota, as they take one GPU), not
    as the whole GPU its count says. Weights an order set otherwise (a packed job's
    count) stay."""
    milli = spec.gpu_milli
    if milli >= FULL_GPU or entry[-1] != spec.num_gpus:
        return entry
    return (*entry[:-1], spec.num_gpus * milli / FULL_GPU)


def _request(spec: JobSpec) -> tuple[object, ...]:
    """What the placer looks at: jobs asking the same find room alike."""
    return (
        spec.num_gpus,
        spec.gpu_type,
        spec.gpu_memory_gb,
        spec.shape,
        spec.preferred_gpu_types,
        spec.gpu_milli,
        spec.cpus,
        spec.memory_gb,
    )


def _name_displaced(
    step: SchedulingPass, job: JobState, displaced: dict[int, dict[str, JobState]]
) -> None:
    """A start on GPUs this pass's preemptions freed names the jobs it displaced."""
    assert job.placement is not None
    victims: dict[str, JobState] = {}
    for node, _ in job.placement.parts:
        here = displaced.get(node)
        if here is not None:
            victims.update(here)
    if victims:
        names = ", ".join(
            f"{v.spec.id} ({v.spec.job_class.value}, {plural(v.spec.num_gpus, 'GPU')})"
            for v in victims.values()
        )
        step.add_reason(
            job.spec.id, Reason(ReasonCode.DISPLACED, f"on GPUs freed by preempting {names}")
        )


def estimate_srtf(
    name: str = "ilucid",
    restore_aware: bool = True,
    min_run_s: float = 0.0,
    aging: float = 0.0,
) -> ReplanningPolicy:
    """Preemptive shortest estimated remaining time, estimates refined by attained service."""
    order = EstimateOrder(restore_aware=restore_aware, min_run_s=min_run_s, aging=aging)
    return ReplanningPolicy(name, order)


def srtf() -> ReplanningPolicy:
    """Shortest remaining time first on the true remaining time (oracle, preemptive)."""
    return ReplanningPolicy("srtf", SrtfOrder())


def tiresias(
    thresholds: tuple[float, ...] = (18000.0,),
    interval: float = 60.0,
) -> ReplanningPolicy:
    """Discretised two-dimensional LAS: queue by attained GPU-seconds, FIFO inside a queue."""
    return ReplanningPolicy("tiresias", TiresiasOrder(tuple(sorted(thresholds))), interval)
