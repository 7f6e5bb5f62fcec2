"""The default profile, ``ilucid``: one scheduler for training and inference.

One pass is a short recipe; every step explains itself:

1. *Starvation guard*: a job that has waited ``starve_after_s`` for its first
   run goes ahead of every order and runs to its end; a preempted job that
   waits ``rewait_after_s`` again gets a slice of ``guard_slice_s``.
2. *Inference first*: pending inference jobs start at once, preempting the
   training jobs that lose the least work, but never past the training
   reserve (:mod:`ilucid.core.policies.inference_tier`).
3. *Training re-plan* (every ``replan_interval_s``): the GPUs inference leaves
   are handed out in the order below; running jobs left out are preempted,
   and a job whose tenant is at its quota ceiling is skipped (admission).
   A new job of up to ``profile_max_gpus`` GPUs first runs a profiling run of
   ``profile_limit_s`` (Lucid); its measured profile comes back through
   ``on_profiled``.
4. *Indolent packing*: a waiting profiled job shares the GPUs of a running
   profiled job of the same GPU count when their sharing scores sum to at most
   2 and their memory fits.

The order (:class:`LeveledEstimateOrder`) is a multi-level queue on attained
GPU-seconds (as Tiresias), ordered inside a level by the estimated remaining
GPU-seconds (as Lucid and Helios' QSSF, on the interpretable estimate). Levels
are what keeps queueing bounded when estimates are poor: a new job runs early
and briefly, so short jobs finish and wide ones are not left behind every
small one. How far a running job is protected from newcomers can follow the
measured quality of the estimates: the median absolute error of recent
walk-forward estimates, in seconds, times ``lead_per_error`` (0 by default:
any lead raised mean JCT on ITP, whose estimates have no rank correlation
with the true durations).
"""

from __future__ import annotations

import functools
import heapq
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from ilucid.core.decision import Reason
from ilucid.core.free_gpus import MAIN_POOL
from ilucid.core.jobs import JobState, JobStatus
from ilucid.core.model import ProfileReport
from ilucid.core.picklable import picklable
from ilucid.core.policies.inference_tier import SERVING_POOL, InferenceTier
from ilucid.core.policies.leveled_order import LeveledEstimateOrder
from ilucid.core.policies.partner_index import PartnerIndex
from ilucid.core.policies.preemptive import ReplanningPolicy
from ilucid.core.policies.router import InferenceRouter
from ilucid.core.policies.start_words import WhyStart
from ilucid.core.policies.tiered import TierConfig
from ilucid.core.quota import QuotaBook, TenantQuota
from ilucid.core.reason_codes import ReasonCode
from ilucid.core.scheduler import SchedulingPass
from ilucid.core.sorted_sums import Entry

__all__ = ["DefaultConfig", "DefaultPlan", "DefaultPolicy"]

#: stale heap entries tolerated beyond twice the live ones before a sweep drops them
_SLACK = 1024


@dataclass(frozen=True, slots=True)
class DefaultConfig:
    """Every knob of the default profile, with its default (the same everywhere)."""

    #: attained GPU-seconds at which a job moves one level down (Tiresias' idea, three
    #: steps): measured on ITP 01-05, one threshold (18,000) gave 34.0k/39.3k/70.6k s mean
    #: JCT on ITP 01/02/03, these three 30.5k/37.7k/70.5k s and p99.9 queueing 3-20k s
    levels: tuple[float, ...] = (1800.0, 18000.0, 180000.0)
    #: the starvation guard: a job never started that has waited this long is served
    #: first and not preempted by other training until it ends
    starve_after_s: float = 86400.0
    #: a preempted job that has waited this long again is served first for a slice of
    #: ``guard_slice_s``, then goes back to its level. Protecting it to the end instead
    #: (as a first start) turned ITP-02 into FIFO for long jobs: mean JCT 31.9k -> 80.8k s
    rewait_after_s: float = 7 * 86400.0
    guard_slice_s: float = 3600.0
    reserve_training: float = 0.2
    quotas: Mapping[str, TenantQuota] = field(default_factory=dict)
    preemption_limit: int | None = None
    #: seconds of protection per second of median estimate error (see the module docstring)
    lead_per_error: float = 0.0
    #: finished jobs whose estimate errors decide the lead
    error_window: int = 1000
    #: training is re-planned at most every this many seconds of absolute time (as
    #: Tiresias): events in between wait for the next boundary. Inference is admitted
    #: at every pass. 0: at every event
    replan_interval_s: float = 60.0
    #: profiling (Lucid): a new job of at most ``profile_max_gpus`` GPUs first runs this
    #: long; its measured profile (sharing score, memory, refined estimate) comes back
    #: through ``on_profiled``. None: no profiling, hence no packing
    profile_limit_s: float | None = 300.0
    profile_max_gpus: int = 8
    #: reports looked at before profiling stops for good when none measured a sharing
    #: score (a cluster whose profiler sees nothing: each run would only cost a restore)
    profile_probe: int = 20
    #: indolent packing: a waiting profiled job may share the GPUs of a running profiled
    #: job of the same GPU count when their sharing scores sum to at most 2 and their
    #: memory fits; pending jobs looked at per pass for a partner
    pack_scan: int = 64
    assume_gpu_memory_gb: float = 32.0

    @classmethod
    def from_tiers(cls, tiers: TierConfig) -> DefaultConfig:
        """The settings a tiers file (``--tiers``) gives ``tiered`` that the default shares:
        the training reserve, tenant quotas, the starvation bound, the preemption limit."""
        return cls(
            reserve_training=tiers.reserve_training,
            quotas=tiers.quotas,
            starve_after_s=tiers.starve_after_s,
            preemption_limit=tiers.preemption_limit,
        )

    def __post_init__(self) -> None:
        if any(b <= a for a, b in zip(self.levels, self.levels[1:], strict=False)):
            raise ValueError(f"levels must increase, got {self.levels}")
        if any(t <= 0 for t in self.levels):
            raise ValueError(f"levels must be > 0 GPU-seconds, got {self.levels}")
        guard = {
            "starve_after_s": self.starve_after_s,
            "rewait_after_s": self.rewait_after_s,
            "guard_slice_s": self.guard_slice_s,
        }
        for name, value in guard.items():
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        if not 0.0 <= self.reserve_training < 1.0:
            raise ValueError(f"reserve_training must be in [0, 1), got {self.reserve_training}")
        if self.lead_per_error < 0:
            raise ValueError(f"lead_per_error must be >= 0, got {self.lead_per_error}")
        if self.replan_interval_s < 0:
            raise ValueError(f"replan_interval_s must be >= 0, got {self.replan_interval_s}")
        if self.error_window < 1:
            raise ValueError(f"error_window must be >= 1, got {self.error_window}")


class DefaultPlan(ReplanningPolicy):
    """Starvation guard, then the leveled estimate re-plan, profiling and packing."""

    def __init__(self, config: DefaultConfig | None = None, name: str = "ilucid") -> None:
        self.config = config or DefaultConfig()
        order = LeveledEstimateOrder(
            self.config.levels,
            self.config.lead_per_error,
            self.config.error_window,
            self.config.guard_slice_s,
        )
        super().__init__(name, order, self.config.replan_interval_s)
        self.leveled = order
        self._why: dict[int, Reason] = {}  # starvation reasons
        self._refused: dict[int, Reason] = {}  # quota refusals of the last pass
        self.quotas = QuotaBook(self.config.quotas)
        self._training_running: dict[int, JobState] = {}
        self._due: list[tuple[float, int, float]] = []  # (starves at, seq, queued since)
        self._reports: dict[int, ProfileReport] = {}  # profiled jobs' measurements
        self._pairs: dict[int, JobState] = {}  # packed job -> the job sharing its GPUs
        #: GPUs -> seq -> (running job alone with a sharing score, its score, its GPU memory)
        self._packable: dict[int, dict[int, tuple[JobState, float, float]]] = {}
        self._room: dict[int, float] = {}  # packable job -> GPU memory of its smallest node
        self._partners = PartnerIndex()  # the same jobs, in the order a partner is chosen
        self._profiled = 0  # profiling runs reported
        self._scored = 0  # ... with a sharing score
        self._profiling_off = False

    # -- stimuli -----------------------------------------------------------------
    def _never_served(self, job: JobState) -> bool:
        """Not yet started, or started only for its profiling run."""
        return job.first_start is None or (job.seq in self._reports and job.preemptions == 0)

    def _watch(self, job: JobState) -> None:
        config = self.config
        after = config.starve_after_s if self._never_served(job) else config.rewait_after_s
        due = self._due
        heapq.heappush(due, (job.since + after, job.seq, job.since))
        if len(due) > 2 * self._pending_count + _SLACK:
            # entries of jobs that started since are stale: drop them in one sweep (what
            # stays pops in the same order), so the heap stays within twice the queue
            due[:] = [item for item in due if self._waiting(item)]
            heapq.heapify(due)

    def _waiting(self, item: tuple[float, int, float]) -> bool:
        """Whether a starvation deadline still holds: its job waits since it was set."""
        job = self._jobs.get(item[1])
        return job is not None and job.status is JobStatus.PENDING and job.since == item[2]

    def on_submitted(self, job: JobState, now: float) -> None:
        super().on_submitted(job, now)
        self._watch(job)

    def on_started(self, job: JobState, now: float) -> None:
        self._why.pop(job.seq, None)
        self._refused.pop(job.seq, None)
        super().on_started(job, now)
        self._training_running[job.seq] = job
        self.quotas.add(job.spec.tenant, job.spec.num_gpus)
        if job.seq not in self._pairs:
            self._packable_add(job)

    def on_preempted(self, job: JobState, now: float) -> None:
        super().on_preempted(job, now)
        del self._training_running[job.seq]
        self.quotas.remove(job.spec.tenant, job.spec.num_gpus)
        self._packable_remove(job)
        self._unpair(job, now)
        self._watch(job)

    def on_profiled(self, job: JobState, report: ProfileReport, now: float) -> None:
        """A profiling run ended: keep its measurements; the job queues again at once."""
        self._reports[job.seq] = report
        self._profiled += 1
        if report.sharing_score is not None:
            self._scored += 1
        elif self._profiled >= self.config.profile_probe and not self._scored:
            self._profiling_off = True  # nothing here measures sharing: stop paying for it
        if report.estimate is not None:
            self.leveled.set_estimate(job, report.estimate)
        self.on_preempted(job, now)
        self._dirty = True

    def on_estimate(self, job: JobState, seconds: float, trusted: bool, now: float) -> None:
        """The job's own progress re-estimated its run: a running job is re-keyed at once
        (a packed one keeps its place until its partner ends); once its rate is trusted
        it is placed by what it has left (:class:`LeveledEstimateOrder`)."""
        self.leveled.set_estimate(job, seconds, measured=True, trusted=trusted)
        if job.seq in self._training_running and job.seq not in self.leveled.packed:
            self.rekey_measured(job, now)

    def on_withdrawn(self, job: JobState, now: float) -> None:
        self._why.pop(job.seq, None)
        self._refused.pop(job.seq, None)
        super().on_withdrawn(job, now)
        self.leveled.forget(job.seq)

    def on_finished(self, job: JobState, now: float) -> None:
        self._dirty = True
        super().on_finished(job, now)
        del self._training_running[job.seq]
        self.quotas.remove(job.spec.tenant, job.spec.num_gpus)
        self._packable_remove(job)
        self._reports.pop(job.seq, None)
        self._unpair(job, now)

    def _unpair(self, job: JobState, now: float) -> None:
        """``job`` left the GPUs it shared: its partner runs alone, back in its level."""
        self.leveled.packed.pop(job.seq, None)
        partner = self._pairs.pop(job.seq, None)
        if partner is not None:
            del self._pairs[partner.seq]
            del self.leveled.packed[partner.seq]
            self._rekey(partner, now)
            self._packable_add(partner)

    # -- profiling and packing -------------------------------------------------------
    def _packable_add(self, job: JobState) -> None:
        report = self._reports.get(job.seq)
        if report is not None and report.sharing_score is not None:
            entry = (job, report.sharing_score, report.gpu_memory_gb or 0.0)
            self._packable.setdefault(job.spec.num_gpus, {})[job.seq] = entry
            self._partners.add(job, report.sharing_score, entry[2])

    def _packable_remove(self, job: JobState) -> None:
        self._packable.get(job.spec.num_gpus, {}).pop(job.seq, None)
        self._partners.remove(job)
        self._room.pop(job.seq, None)

    def _rekey(self, job: JobState, now: float) -> None:
        """Recompute a running job's entry (it left or joined a packed pair)."""
        self._running.remove(self._entry[job.seq])
        self._add_running(job, now)

    def _profile_limit(self, job: JobState) -> float | None:
        limit = None if self._profiling_off else self.config.profile_limit_s
        gpus = job.spec.num_gpus
        if limit is None or job.first_start is not None or job.seq in self._reports:
            return None
        return limit if 0 < gpus <= self.config.profile_max_gpus else None

    def _partner_for(self, job: JobState, step: SchedulingPass) -> JobState | None:
        """The running job ``job`` may share GPUs with: sharing scores sum to at most 2
        and memory fits; the lightest, longest-running first."""
        mine = self._reports.get(job.seq)
        if mine is None or mine.sharing_score is None:
            return None
        memory = mine.gpu_memory_gb or 0.0
        room = functools.partial(self._room_of, step)  # (no closure: it would be a cycle)
        return self._partners.best(job.spec.num_gpus, mine.sharing_score, memory, room)

    def _room_of(self, step: SchedulingPass, other: JobState) -> float:
        """GPU memory beside ``other``, kept while it runs."""
        held = self._room.get(other.seq)
        if held is None:
            held = self._room[other.seq] = self._memory_room(other, step)
        return held

    def _memory_room(self, job: JobState, step: SchedulingPass) -> float:
        """GPU memory of the smallest node a running job holds (fixed while it runs)."""
        assert job.placement is not None
        nodes = step.free.cluster.nodes
        assume = self.config.assume_gpu_memory_gb
        return min(nodes[i].gpu_memory_gb or assume for i in job.placement.node_indices)

    def _pack(self, step: SchedulingPass) -> None:
        """Indolent packing: waiting profiled jobs share a running partner's GPUs.

        Only GPU counts some running profiled job has are looked at, each in its
        order, at most ``pack_scan`` profiled jobs a pass."""
        if not self._pending_count:
            return
        chosen: list[JobState] = []
        budget = self.config.pack_scan
        for gpus, partners in self._packable.items():
            if not partners or budget <= 0:
                continue
            wanted = min(budget, 2 * len(partners) + 2)  # a few spares for misfits
            for entry in self._pending.get(gpus, ()):
                seq = int(entry[-2])
                if seq in self._reports:
                    chosen.append(self._jobs[seq])
                    wanted -= 1
                    budget -= 1
                    if wanted <= 0:
                        break
        for job in chosen:
            partner = self._partner_for(job, step)
            if partner is None:
                continue
            mine, theirs = self._reports[job.seq], self._reports[partner.seq]
            self._packable_remove(partner)
            self._pairs[job.seq], self._pairs[partner.seq] = partner, job
            self.leveled.packed[partner.seq] = partner.spec.num_gpus
            self.leveled.packed[job.seq] = 0
            self._rekey(partner, step.now)
            step.start_packed(
                job,
                partner,
                f"{self.name}: packed with {partner.spec.id}: sharing scores"
                f" {mine.sharing_score}+{theirs.sharing_score} <= 2, GPU memory"
                f" {mine.gpu_memory_gb or 0:.1f}+{theirs.gpu_memory_gb or 0:.1f} GB fits",
            )

    # -- timing ------------------------------------------------------------------
    def _next_due(self) -> float | None:
        due = self._due
        while due:
            top = due[0]
            if self._waiting(top):
                return top[0]
            heapq.heappop(due)
        return None

    def next_wakeup(self, now: float) -> float | None:
        wake = super().next_wakeup(now)
        if self._dirty:  # the next boundary already: no starvation is due before it
            return wake
        due = self._next_due()
        if due is not None and self._pending_count:
            due = self._boundary(max(due, math.nextafter(now, math.inf)))
            wake = due if wake is None else min(wake, due)
        return wake

    # -- a pass ------------------------------------------------------------------
    def _promote_starving(self, now: float) -> None:
        while (due := self._next_due()) is not None and due <= now:
            _, seq, _ = heapq.heappop(self._due)
            job = self._jobs[seq]
            self._remove_pending(job)
            self.leveled.starving[seq] = now
            first = self._never_served(job)
            if not first:
                self.leveled.sliced.add(seq)
            self._add_pending(job)
            bound = self.config.starve_after_s if first else self.config.rewait_after_s
            served = (
                "until it ends"
                if first
                else f"for {self.config.guard_slice_s:,.0f} s, then back in its level"
            )
            self._why[seq] = Reason(
                ReasonCode.STARVATION_GUARD,
                f"waited {now - job.since:,.0f} s (guard: {bound:,.0f} s): served ahead of the"
                f" order as soon as GPUs free, preempting other training if it must, {served}",
                {"waited_s": now - job.since},
            )
            self._dirty = True

    def prepare(self, step: SchedulingPass) -> None:
        """Promote starving jobs before inference moves (so it sees them protected)."""
        self._promote_starving(step.now)

    def inference_changed(self) -> None:
        self._dirty = True

    def schedule(self, step: SchedulingPass) -> None:
        replans = self.replans
        super().schedule(step)
        if self.replans != replans and self.config.profile_limit_s is not None:
            self._pack(step)

    def victims(self) -> Iterator[JobState]:
        """Running training jobs inference may stop: all but those sharing GPUs."""
        return iter([j for j in self._training_running.values() if j.seq not in self._pairs])

    def _preempt(self, step: SchedulingPass, job: JobState) -> None:
        """A job sharing GPUs is stopped with its partner: only then are they free."""
        if job.status is not JobStatus.RUNNING:
            return  # stopped already, as a victim's partner
        why = (
            f"{self.name}: {self.leveled.describe(job, step.now)};"
            f" jobs ahead of it in the order need its GPUs{self._taking}"
        )
        partner = self._pairs.get(job.seq)
        if partner is not None:
            step.preempt(partner, f"{why} (it shares them with {job.spec.id})")
        step.preempt(job, why)

    def _keeps_key(self, job: JobState) -> bool:
        order = self.leveled
        return job.seq in order.packed or (
            job.seq in order.starving and job.seq not in order.sliced
        )

    def _capacity(self, step: SchedulingPass) -> float:
        held = self.inference.used if self.inference is not None else 0.0
        return float(step.free.cluster.total_gpus - held)

    def _admits_all(self) -> bool:
        return not self.config.quotas

    def _admissible(self, entry: Entry, step: SchedulingPass) -> bool:
        job = self._jobs[int(entry[-2])]
        refusal = self.quotas.refuse(job.spec.tenant, job.spec.num_gpus)
        if refusal is None:
            self._refused.pop(job.seq, None)
            return True
        self._refused[job.seq] = refusal
        return False

    def _start(self, step: SchedulingPass, job: JobState) -> bool:
        limit = self._profile_limit(job)
        why = WhyStart(self.name, self.leveled, job, step.now, limit, "")
        if step.try_start(job, why, MAIN_POOL, limit):
            return True
        whole = job.spec.gpu_milli == 1000  # (a share of one GPU may join one there)
        if whole and step.free.pool_free.get(SERVING_POOL, 0) < job.spec.num_gpus:
            return False
        serving = " (on a node that also serves inference)"
        why = WhyStart(self.name, self.leveled, job, step.now, limit, serving)
        return step.try_start(job, why, SERVING_POOL, limit)

    # -- questions ---------------------------------------------------------------
    def _reason(self, job: JobState) -> Reason | None:
        return self._why.get(job.seq) or self._refused.get(job.seq)


class DefaultPolicy(InferenceRouter):
    """The default profile built directly: the inference tier and :class:`DefaultPlan`."""

    def __init__(self, config: DefaultConfig | None = None, name: str = "ilucid") -> None:
        plan = DefaultPlan(config, name)
        tier = InferenceTier(
            plan.config.reserve_training, preemption_limit=plan.config.preemption_limit
        )
        super().__init__(name, tier, plan)
        self.config = plan.config
        self.quotas = plan.quotas


picklable(DefaultConfig)
