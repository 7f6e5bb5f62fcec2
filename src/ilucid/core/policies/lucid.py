"""The Lucid policy (ASPLOS'23), done honestly, and ilucid's extensions to it.

- **Profiler.** New jobs up to ``profile_max_gpus`` first run on a small
  profiling pool (nodes taken out of the main cluster), smallest first, for at
  most ``profile_limit_s``. A job that finishes there is done; the others
  leave with measured metrics (the driver's :class:`ProfileReport`) and join
  the main queue. Profiling time counts in the job's JCT.
- **Priority.** Estimated duration x GPUs, ascending; a profiled job uses the
  estimate refined with what profiling saw.
- **Indolent packing.** A job that cannot be placed may share the GPUs of a
  running job only if both ask for the same GPU count, both were profiled,
  their sharing scores sum to at most 2, their GPU memory fits, and the tuner
  has packing on.
- **Tuner.** Each load forecast switches packing and resizes the profiling
  pool; every action is logged with the forecast that caused it.

ilucid's switches (all off in ``lucid``): ``starve_after_s`` promotes a job
that has waited that long to a FIFO lane served first, so no job starves.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from dataclasses import dataclass, field

from ilucid.core.filters import allowed_types
from ilucid.core.free_gpus import FreeGpus
from ilucid.core.jobs import JobState, JobStatus
from ilucid.core.model import Forecast, ProfileReport
from ilucid.core.picklable import picklable
from ilucid.core.policies.plan import PlanBase
from ilucid.core.reason_codes import ReasonCode
from ilucid.core.scheduler import SchedulingPass
from ilucid.core.wait_words import PROFILER, plural

__all__ = ["PROFILER_POOL", "LucidConfig", "LucidPolicy", "TunerAction"]

PROFILER_POOL = PROFILER
#: node label (value ``yes``) by which an operator reserves nodes for profiling
PROFILER_LABEL = "ilucid.io/profiler"


@dataclass(frozen=True, slots=True)
class LucidConfig:
    """Every knob of the policy, with the value used when none is given."""

    profile_limit_s: float = 300.0
    profile_max_gpus: int = 8
    profiler_nodes: int = 2
    profiler_min_nodes: int = 1
    profiler_max_nodes: int = 8
    profiler_max_share: float = 0.25  # never more than this share of the nodes
    packing: bool = True
    pack_when_load_above: float = 0.8
    assume_gpu_memory_gb: float = 32.0
    scan_depth: int = 400
    starve_after_s: float | None = None


@dataclass(frozen=True, slots=True)
class TunerAction:
    time: float
    action: str
    forecast: Forecast
    detail: str


@dataclass(slots=True)
class _Profiled:
    report: ProfileReport
    estimate: float


@dataclass(slots=True)
class _State:
    reports: dict[int, _Profiled] = field(default_factory=dict)
    pairs: dict[int, JobState] = field(default_factory=dict)


class LucidPolicy(PlanBase):
    """See the module docstring."""

    def __init__(self, config: LucidConfig | None = None, name: str = "lucid") -> None:
        self.name = name
        self.config = config or LucidConfig()
        self._profile_queue: list[tuple[int, float, int, JobState]] = []
        self._main: list[tuple[float, int, JobState]] = []
        self._main_key: dict[int, float] = {}
        self._main_sizes: Counter[int] = Counter()
        self._types_cache: dict[tuple[str | None, float | None], tuple[str, ...] | None] = {}
        self._starving: list[tuple[float, int, JobState]] = []
        self._state = _State()
        self._packable: dict[int, dict[int, JobState]] = {}  # GPUs -> seq -> running job
        self.packing_on = self.config.packing
        self.profiler_target = self.config.profiler_nodes
        self.tuner_actions: list[TunerAction] = []
        self._pool_ready = False
        self._pending_forecast: tuple[Forecast, float] | None = None
        self._marked: frozenset[int] | None = None  # nodes labelled PROFILER_LABEL
        self._free: FreeGpus | None = None  # the core's free GPUs, seen at the last pass

    @property
    def tuner_log(self) -> list[TunerAction]:
        return self.tuner_actions

    # -- helpers -----------------------------------------------------------------
    def estimate_of(self, job: JobState) -> float:
        profiled = self._state.reports.get(job.seq)
        if profiled is not None:
            return profiled.estimate
        return job.spec.expected_duration

    def priority(self, job: JobState) -> float:
        """Estimated GPU-seconds: lower runs first."""
        return self.estimate_of(job) * max(1, job.spec.num_gpus)

    def _enqueue_main(self, job: JobState) -> None:
        self._main_sizes[job.spec.num_gpus] += 1
        key = self.priority(job)
        self._main_key[job.seq] = key
        bisect.insort(self._main, (key, job.seq, job), key=lambda e: (e[0], e[1]))

    def _dequeue_main(self, job: JobState) -> None:
        self._main_sizes[job.spec.num_gpus] -= 1
        key = self._main_key.pop(job.seq)
        index = bisect.bisect_left(self._main, (key, job.seq), key=lambda e: (e[0], e[1]))
        del self._main[index]

    def _packable_add(self, job: JobState) -> None:
        profiled = self._state.reports.get(job.seq)
        if profiled is None or profiled.report.sharing_score is None:
            return
        self._packable.setdefault(job.spec.num_gpus, {})[job.seq] = job

    def _packable_remove(self, job: JobState) -> None:
        self._packable.get(job.spec.num_gpus, {}).pop(job.seq, None)

    # -- stimuli -----------------------------------------------------------------
    def on_submitted(self, job: JobState, now: float) -> None:
        if (
            0 < job.spec.num_gpus <= self.config.profile_max_gpus
            and self.config.profile_limit_s > 0
        ):
            entry = (job.spec.num_gpus, job.spec.submit_time, job.seq, job)
            bisect.insort(self._profile_queue, entry, key=lambda e: (e[0], e[1], e[2]))
        else:
            self._enqueue_main(job)

    def on_started(self, job: JobState, now: float) -> None:
        pass

    def on_preempted(self, job: JobState, now: float) -> None:
        """Never by its own decision; a live job whose process vanished is requeued here
        (a packed job is never requeued alone: the core refuses that)."""
        self._packable_remove(job)
        self._enqueue_main(job)

    def on_withdrawn(self, job: JobState, now: float) -> None:
        if job.seq in self._main_key:
            self._dequeue_main(job)
        else:
            self._profile_queue[:] = [e for e in self._profile_queue if e[3] is not job]

    def on_adopted(self, job: JobState, now: float) -> None:
        """A job already running when a live service restarts: it keeps its GPUs; if it
        was profiling, the service reports the run with ``Scheduler.profiled`` later."""
        self.on_withdrawn(job, now)  # it left whichever queue its submission put it in

    def on_finished(self, job: JobState, now: float) -> None:
        state = self._state
        self._packable_remove(job)
        partner = state.pairs.pop(job.seq, None)
        if partner is not None:
            del state.pairs[partner.seq]
            if partner.status is JobStatus.RUNNING:
                self._packable_add(partner)  # alone again: may take a new partner
        state.reports.pop(job.seq, None)

    def on_profiled(self, job: JobState, report: ProfileReport, now: float) -> None:
        estimate = report.estimate if report.estimate is not None else self.estimate_of(job)
        self._state.reports[job.seq] = _Profiled(report, estimate)
        self._enqueue_main(job)

    def on_forecast(self, forecast: Forecast, now: float) -> None:
        """The tuner: switch packing and size the profiler from the next hour's demand."""
        self._pending_forecast = (forecast, now)

    def _tune(self, step: SchedulingPass) -> None:
        pending = self._pending_forecast
        if pending is None:
            return
        self._pending_forecast = None
        forecast, now = pending
        free = step.free
        main_gpus = sum(
            free.capacity[i] for i in range(len(free.capacity)) if free.pool_of[i] != PROFILER_POOL
        )
        load = forecast.gpu_seconds / max(1.0, main_gpus * 3600.0)
        if self.config.packing:
            want = load >= self.config.pack_when_load_above
            if want != self.packing_on:
                self.packing_on = want
                self.tuner_actions.append(
                    TunerAction(
                        now,
                        "packing on" if want else "packing off",
                        forecast,
                        f"forecast {forecast.gpu_seconds:,.0f} GPU-s next hour = {load:.0%} of"
                        f" main capacity ({'>=' if want else '<'}"
                        f" {self.config.pack_when_load_above:.0%})",
                    )
                )
        per_node = max(free.capacity) if free.capacity else 1
        gpu_seconds_to_profile = forecast.jobs * self.config.profile_limit_s * 2.0  # 2x headroom
        target = math.ceil(gpu_seconds_to_profile / 3600.0 / per_node)
        target = max(self.config.profiler_min_nodes, min(self.config.profiler_max_nodes, target))
        if target != self.profiler_target:
            self.tuner_actions.append(
                TunerAction(
                    now,
                    f"profiler {self.profiler_target} -> {target} nodes",
                    forecast,
                    f"forecast {forecast.jobs:,.0f} jobs next hour"
                    f" x {self.config.profile_limit_s:g} s profiling, with 2x headroom",
                )
            )
            self.profiler_target = target

    def _resize_pool(self, step: SchedulingPass) -> None:
        """Move wholly idle nodes between the pools toward the tuner's target.

        The pool never exceeds ``profiler_max_share`` of the nodes, so a small
        cluster (fewer than 4 nodes by default) does not profile at all. Where
        nodes carry the ``PROFILER_LABEL``, only those join the pool.
        """
        free = step.free
        cap = int(len(free.capacity) * self.config.profiler_max_share)
        # only nodes of the commonest GPU type profile, and main keeps at least one of them
        common = self._common_type(free)
        of_common = sum(1 for n in free.cluster.nodes if n.gpu_type == common)
        target = min(self.profiler_target, cap, of_common - 1)
        # the main pool must still hold the largest job waiting for it
        largest = max(
            [g for g, n in self._main_sizes.items() if n > 0]
            + [e[2].spec.num_gpus for e in self._starving],
            default=0,
        )
        per_node = max(free.capacity, default=1)
        room = (sum(free.capacity) - largest) // max(1, per_node)
        target = max(0, min(target, room))
        current = free.pool_nodes(PROFILER_POOL)
        if len(current) < target:
            idle = [i for i in free.wholly_free((common,)) if free.pool_of[i] != PROFILER_POOL]
            if self._marked is None:
                nodes = free.cluster.nodes
                self._marked = frozenset(
                    i for i, n in enumerate(nodes) if n.labels.get(PROFILER_LABEL) == "yes"
                )
            if self._marked:  # the operator set nodes apart for profiling: only those
                idle = [i for i in idle if i in self._marked]
            for index in reversed(idle[-(target - len(current)) :]):
                free.set_pool(index, PROFILER_POOL)
        elif len(current) > target:
            idle = [i for i in current if free.free[i] == free.capacity[i]]
            for index in idle[: len(current) - target]:
                free.set_pool(index, "main")

    @staticmethod
    def _common_type(free: FreeGpus) -> str:
        counts = Counter(n.gpu_type for n in free.cluster.nodes)
        return max(sorted(counts), key=lambda t: counts[t])

    def next_wakeup(self, now: float) -> float | None:
        return None

    def wait_code(self, job: JobState) -> ReasonCode | None:
        if job.seq in self._main_key or any(e[2] is job for e in self._starving):
            return None
        return ReasonCode.WAITING_FOR_PROFILER

    def explain_wait(self, job: JobState, now: float) -> str | None:
        """A new job waits for the profiler: how full it is (its place in the profiling
        queue is the position ``why_pending`` shows)."""
        if self.wait_code(job) is None:
            return None
        line = (
            "smallest jobs first; each new job first runs there for up to"
            f" {self.config.profile_limit_s:g} s"
        )
        nodes = self._free.pool_nodes(PROFILER_POOL) if self._free is not None else []
        if self._free is None or not nodes:
            return f"waiting for a profiling slot ({line})"
        free = self._free
        idle = sum(free.free[i] for i in nodes)
        total = sum(free.capacity[i] for i in nodes)
        verb = "is" if idle == 1 else "are"
        return (
            f"waiting for a profiling slot: {idle} of the profiler's {plural(total, 'GPU')}"
            f" {verb} free and the job needs {job.spec.num_gpus} ({line})"
        )

    def queue_position(self, job: JobState, now: float) -> int | None:
        key = self._main_key.get(job.seq)
        if key is None:
            for position, entry in enumerate(self._profile_queue, start=1):
                if entry[3] is job:
                    return position
            return None
        return 1 + bisect.bisect_left(self._main, (key, job.seq), key=lambda e: (e[0], e[1]))

    # -- decisions ---------------------------------------------------------------
    def schedule(self, step: SchedulingPass) -> None:
        self._free = step.free
        if not self._pool_ready:
            self._pool_ready = True
            self.profiler_target = self.config.profiler_nodes
        self._tune(step)
        self._resize_pool(step)
        self._schedule_profiler(step)
        self._promote_starving(step.now)
        if not self._schedule_starving(step):
            return
        self._schedule_main(step)

    def _profilable(self, job: JobState, free: FreeGpus, pool: list[int]) -> bool:
        """Whether some profiler node could ever hold the job (size, GPU type, memory)."""
        constraint = (job.spec.gpu_type, job.spec.gpu_memory_gb)
        if constraint not in self._types_cache:
            self._types_cache[constraint] = allowed_types(job.spec, free.cluster)
        types = self._types_cache[constraint]
        return any(
            free.capacity[i] >= job.spec.num_gpus
            and (types is None or free.cluster.nodes[i].gpu_type in types)
            for i in pool
        )

    def _schedule_profiler(self, step: SchedulingPass) -> None:
        """Smallest first; stop at the first job the pool cannot take now.

        A job no profiler node could ever hold (too big, wrong GPU type or
        memory) skips profiling and goes straight to the main queue.
        """
        queue = self._profile_queue
        if not queue:
            return
        free = step.free
        pool = free.pool_nodes(PROFILER_POOL)
        limit = self.config.profile_limit_s
        kept: list[tuple[int, float, int, JobState]] = []
        for index, entry in enumerate(queue):
            job = entry[3]
            if not self._profilable(job, free, pool):
                self._enqueue_main(job)
                continue
            if not step.try_start(
                job, f"profiling for up to {limit:g} s (smallest first)", PROFILER_POOL, limit
            ):  # blocked: the rest keep their places (checked when they reach the head)
                kept.extend(queue[index:])
                break
        self._profile_queue = kept

    def _promote_starving(self, now: float) -> None:
        limit = self.config.starve_after_s
        if limit is None or not self._main:
            return
        for _key, _seq, job in list(self._main):
            if now - job.spec.submit_time >= limit:
                self._dequeue_main(job)
                bisect.insort(
                    self._starving, (job.spec.submit_time, job.seq, job), key=lambda e: (e[0], e[1])
                )

    def _schedule_starving(self, step: SchedulingPass) -> bool:
        """Serve starving jobs first, in FIFO order; False if one must still wait."""
        while self._starving:
            job = self._starving[0][2]
            if not step.try_start(
                job, f"waited over {self.config.starve_after_s:g} s: served first"
            ):
                return False
            self._starving.pop(0)
            self._packable_add(job)
        return True

    def _find_partner(self, job: JobState, step: SchedulingPass) -> JobState | None:
        profiled = self._state.reports.get(job.seq)
        if profiled is None or profiled.report.sharing_score is None:
            return None
        score = profiled.report.sharing_score
        memory = profiled.report.gpu_memory_gb or 0.0
        best: tuple[int, float, JobState] | None = None
        nodes = step.free.cluster.nodes
        for other in self._packable.get(job.spec.num_gpus, {}).values():
            other_report = self._state.reports[other.seq].report
            other_score = other_report.sharing_score
            assert other_score is not None and other.placement is not None
            if score + other_score > 2:
                continue
            capacity = min(
                nodes[i].gpu_memory_gb or self.config.assume_gpu_memory_gb
                for i in other.placement.node_indices
            )
            if memory + (other_report.gpu_memory_gb or 0.0) > capacity:
                continue
            candidate = (other_score, other.since, other)
            if best is None or candidate[:2] < best[:2]:
                best = candidate
        return None if best is None else best[2]

    def _schedule_main(self, step: SchedulingPass) -> None:
        free = step.free
        started: list[JobState] = []
        smallest_failure: dict[tuple[str | None, float | None], int] = {}
        packing = self.packing_on and any(self._packable.values())
        for position, (_key, _seq, job) in enumerate(self._main):
            if position >= self.config.scan_depth:
                break
            if free.pool_free.get("main", 0) == 0 and not packing:
                break
            gpus = job.spec.num_gpus
            constraint = (job.spec.gpu_type, job.spec.gpu_memory_gb)
            fits_by_size = gpus < smallest_failure.get(constraint, gpus + 1)
            if fits_by_size and step.try_start(
                job, f"lowest estimated GPU-seconds ({self.priority(job):,.0f}) that fits"
            ):
                started.append(job)
                self._packable_add(job)
                continue
            if fits_by_size:
                smallest_failure[constraint] = gpus
            if packing:
                partner = self._find_partner(job, step)
                if partner is not None:
                    mine = self._state.reports[job.seq].report
                    theirs = self._state.reports[partner.seq].report
                    step.start_packed(
                        job,
                        partner,
                        f"packed with {partner.spec.id}: sharing scores"
                        f" {mine.sharing_score}+{theirs.sharing_score} <= 2, GPU memory"
                        f" {mine.gpu_memory_gb or 0:.1f}+{theirs.gpu_memory_gb or 0:.1f} GB fits",
                    )
                    self._packable_remove(partner)
                    self._state.pairs[job.seq] = partner
                    self._state.pairs[partner.seq] = job
                    started.append(job)
        for job in started:
            self._dequeue_main(job)


picklable(LucidConfig, TunerAction)
