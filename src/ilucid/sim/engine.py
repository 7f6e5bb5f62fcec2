"""Event-driven trace replay through the scheduling core.

The simulator is the "world": it owns the virtual clock and the truth about
how much work each job has left, feeds arrivals and completions to the core
and applies its decisions. Time jumps from event to event (a heap, never a
fixed tick), so cost grows with the number of events, not simulated seconds.

:class:`Replay` holds one replay's state; :func:`simulate` is its public entry.
What a replay records (:class:`JobRecord`, :class:`SimResult`, ...) lives in
:mod:`ilucid.sim.replay_types`; import it from there.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Sequence

from ilucid.core import (
    Action,
    Cluster,
    Decision,
    Forecast,
    JobSpec,
    JobState,
    Policy,
    Scheduler,
    SchedulerConfig,
)
from ilucid.sim.explainer import Explainer
from ilucid.sim.progress_reports import JobSteps, ProgressReports
from ilucid.sim.quiet_gc import few_collections
from ilucid.sim.replay_types import (
    Annotator,
    ClusterSeries,
    JobRecord,
    Observer,
    ProgressFn,
    SimResult,
    World,
)

__all__ = ["Replay", "simulate"]

#: Kinds of planned events on the heap: a job's work runs out, or its bounded
#: (profiling) run reaches its limit first, or it reports its progress.
_END, _CUT, _REPORT = 0, 1, 2


def simulate(
    jobs: Sequence[JobSpec],
    cluster: Cluster,
    policy: Policy,
    config: SchedulerConfig | None = None,
    progress: ProgressFn | None = None,
    sample_every: float = 60.0,
    observer: Observer | None = None,
    annotator: Annotator | None = None,
    world: World | None = None,
    forecasts: Sequence[tuple[float, Forecast]] = (),
    explain: str | None = None,
    predict_every: int = 0,
    progress_reports: ProgressReports | None = None,
) -> SimResult:
    """Replay ``jobs`` (sorted by submit time) on ``cluster`` under ``policy``.

    ``world`` supplies what only reality knows: profiling measurements and how
    fast two packed jobs run (without one, profiling reports nothing and
    packed jobs run at full speed). ``forecasts`` are ``(time, Forecast)``
    pairs delivered to the policy's tuner as the clock passes them. With
    ``predict_every = n``, every n-th arrival that has to wait records the
    start time the core expected for it (to measure that forecast's accuracy).
    ``progress_reports`` makes a share of jobs report their steps to the core as
    they run (:mod:`ilucid.sim.progress_reports`).
    """
    return Replay(
        jobs,
        cluster,
        policy,
        config=config,
        progress=progress,
        sample_every=sample_every,
        observer=observer,
        annotator=annotator,
        world=world,
        forecasts=forecasts,
        explain=explain,
        predict_every=predict_every,
        progress_reports=progress_reports,
    ).run()


class _Truth:
    """What only the world knows of one job in the system, in one object (one look-up
    an event, not one per fact). Its progress is settled lazily: ``work`` is what was
    left at ``since``, and ``rate`` says how fast it shrinks since."""

    __slots__ = (
        "base_rate",
        "cut_at",
        "pool",
        "rate",
        "record",
        "report_at",
        "report_token",
        "run_from",
        "run_s",
        "since",
        "spec",
        "steps",
        "version",
        "work",
    )

    def __init__(self, spec: JobSpec, record: JobRecord) -> None:
        self.spec = spec  # as annotated at submission
        self.record = record
        self.work = spec.duration  # solo-seconds of work left as of since
        self.since = 0.0
        self.rate = 1.0  # progress per second: 1 alone, less when packed
        self.base_rate = 1.0  # progress per second alone on its GPU type
        self.cut_at: float | None = None  # end of a bounded (profiling) run
        self.version = 0  # bumped to make planned events stale; -1 once it ended
        self.pool = "main"
        self.steps: JobSteps | None = None  # the steps it reports, if it is one that does
        self.run_s = 0.0  # seconds run, as of run_from
        self.run_from = -1.0  # when its current run began (-1: not running)
        self.report_at = 0.0  # run seconds at its next report
        self.report_token = 0  # bumped when it stops: its planned report is stale


class Replay:
    """One replay: the core's scheduler, the truth about each job, and the clock.

    The core only sees arrivals, completions and profiling reports; the truth it
    must not see (work left, the speed a job really runs at) is kept here, one
    :class:`_Truth` per job in the system, keyed by job id.
    """

    def __init__(
        self,
        jobs: Sequence[JobSpec],
        cluster: Cluster,
        policy: Policy,
        config: SchedulerConfig | None = None,
        progress: ProgressFn | None = None,
        sample_every: float = 60.0,
        observer: Observer | None = None,
        annotator: Annotator | None = None,
        world: World | None = None,
        forecasts: Sequence[tuple[float, Forecast]] = (),
        explain: str | None = None,
        predict_every: int = 0,
        progress_reports: ProgressReports | None = None,
    ) -> None:
        self.wall_start = time.perf_counter()
        self.jobs, self.policy, self.forecasts = jobs, policy, forecasts
        self.config = config or SchedulerConfig()
        self.world = world or World()
        self.progress, self.observer, self.annotator = progress, observer, annotator
        self.explain, self.predict_every = explain, predict_every
        reports = progress_reports
        self.reports = reports if reports is not None and reports.share > 0 else None
        self.scheduler = Scheduler(cluster, policy, config=self.config)
        self.total_gpus = cluster.total_gpus
        self.nodes = cluster.nodes
        self.pool_of_node = [n.labels.get("pool", "main") for n in self.nodes]
        # the truth, per job
        self.records: dict[str, JobRecord] = {}  # every job that arrived
        self.truth: dict[str, _Truth] = {}  # jobs in the system (arrived, not ended)
        # the clock and what is planned
        self.heap: list[tuple[float, int, _Truth, int, int]] = []  # time, tiebreak, ver, kind
        self.tiebreak = 0
        self.next_job = 0
        self.next_forecast = 0
        self.wake: float | None = None
        self.arrived: list[str] = []  # arrivals since the last pass
        # what is measured
        start_time = jobs[0].submit_time if jobs else 0.0
        self.series = ClusterSeries(start=start_time, step=sample_every)
        self.last_time = start_time
        self.busy_total = 0.0  # GPUs held by at least one job, over time
        self.pool_gpu_s: dict[str, float] = {}
        self.power_ups = 0
        self.events = 0
        self.done = 0
        self.waited = 0  # arrivals that could not start at once
        self.report_every = max(1, len(jobs) // 200)
        # the explained job's story, told by an observer
        self.explainer = Explainer(explain) if explain is not None else None

    def run(self) -> SimResult:
        """Advance from moment to moment until every job has finished.

        At each moment: account the state held until it, then completions,
        arrivals and forecasts, then one scheduling pass whose decisions are
        applied (the order of the Lucid artifact). The collector runs rarely."""
        n_jobs = len(self.jobs)
        scheduler = self.scheduler
        # bound once: the loop runs once per moment (200,000 times on Philly)
        next_moment, account, pop_events = self._next_moment, self._account, self._pop_events
        arrivals, apply = self._arrivals, self._apply
        with few_collections():
            while self.done < n_jobs:
                now = next_moment()
                account(now)
                pop_events(now)
                arrivals(now)
                if self.forecasts:
                    self._deliver_forecasts(now)
                decisions = scheduler.schedule(now)
                if self.arrived:
                    self._note_waiting(now)
                if self.explainer is not None:
                    explained = self.explainer.job_id
                    truth = self.truth.get(explained)
                    spec = truth.spec if truth is not None else None
                    self.explainer.on_pass(scheduler, spec, decisions, now)
                apply(decisions, now)
                if scheduler.cloud is not None:
                    self.power_ups += sum(c.up for c in scheduler.take_power_changes())
                self.wake = wake = scheduler.next_wakeup(now)
                if wake is not None and wake <= now:
                    raise RuntimeError(f"{self.policy.name} asked to wake at {wake} <= now {now}")
        if self.progress is not None:
            self.progress(1.0)
        return self._result()

    def _next_moment(self) -> float:
        """The next time anything happens: an arrival, a planned event, a wake-up the
        policy asked for, or a forecast (delivered no earlier than the last moment)."""
        now = float("inf")
        if self.next_job < len(self.jobs):
            now = self.jobs[self.next_job].submit_time
        heap = self.heap
        if heap and heap[0][0] < now:
            now = heap[0][0]
        if self.wake is not None and self.wake < now:
            now = self.wake
        if now == float("inf"):
            stuck = len(self.jobs) - self.done
            raise RuntimeError(
                f"{self.policy.name}: {stuck} job(s) can never start on this cluster"
                f" ({self.total_gpus} GPUs); the first pending is {_first_pending(self.scheduler)}"
            )
        forecasts = self.forecasts
        if self.next_forecast < len(forecasts) and forecasts[self.next_forecast][0] < now:
            now = max(forecasts[self.next_forecast][0], self.last_time)
        return now

    def _account(self, now: float) -> None:
        """Count the cluster state held since the last moment (up to, not including,
        ``now``) into GPU-busy time and the sampled series."""
        free = self.scheduler.free
        busy = self.total_gpus - free.free_total
        self.busy_total += busy * (now - self.last_time)
        self.last_time = now
        series = self.series
        if series.due(now):
            series.fill(now, busy, self.scheduler.pending_count, free.fragmented_free())

    def _pop_events(self, now: float) -> None:
        """Handle every planned event due by ``now``, skipping stale ones (the job was
        preempted or re-planned after the event was planned)."""
        heap = self.heap
        while heap and heap[0][0] <= now:
            _, _, truth, ver, kind = heapq.heappop(heap)
            if kind == _REPORT:
                if truth.report_token == ver and truth.version != -1:
                    self._report(truth, now)
                continue
            if truth.version != ver:
                continue
            self._settle(truth, now)
            if kind == _CUT:
                self._profiling_cut(truth, now)
            else:
                self._end(truth, now)
            self.events += 1

    def _profiling_cut(self, truth: _Truth, now: float) -> None:
        """A profiling run reached its limit: ask the world what it measured and hand
        the report to the core, which decides where the job runs next. The job pays a
        restore overhead to leave the profiler."""
        rec, spec = truth.record, truth.spec
        job_id = spec.id
        truth.cut_at = None
        self._stop_reports(truth, now)
        report = self.world.measure(spec, now - rec.first_start, now)
        rec.profiled_s += now - rec.first_start
        rec.restores += 1
        if self.observer is not None:
            self.observer(now, "profiled", job_id, self.scheduler.jobs[job_id].placement)
        truth.work += self.config.overhead.for_job(spec)
        truth.version += 1
        self.scheduler.profiled(job_id, now, report)
        if self.explainer is not None and job_id == self.explain:
            self.explainer.on_profiled(report, now)

    def _end(self, truth: _Truth, now: float) -> None:
        """A job's work ran out: it finishes, its packing partner (if any) runs alone
        again at full speed, and its per-job truth is forgotten."""
        job_id = truth.spec.id
        truth.record.end = now
        scheduler = self.scheduler
        if self.observer is not None:
            self.observer(now, "finish", job_id, scheduler.jobs[job_id].placement)
        partner = scheduler.partners.get(job_id)
        finished = scheduler.finish(job_id, now)
        if partner is not None:
            self._run_alone(self.truth[partner], now)
        if self.annotator is not None:
            self.annotator.on_finish(finished.spec, now)
        truth.version = -1  # whatever is still planned for it is stale
        del self.truth[job_id]
        self.done += 1

    def _arrivals(self, now: float) -> None:
        """Submit every job whose submit time is due: its record and true work are
        taken from the trace before an annotator adds what a driver would know."""
        jobs, n_jobs, next_job = self.jobs, len(self.jobs), self.next_job
        annotator, progress = self.annotator, self.progress
        while next_job < n_jobs and jobs[next_job].submit_time <= now:
            spec = jobs[next_job]
            next_job += 1
            record = JobRecord(
                spec.id,
                spec.submit_time,
                spec.num_gpus,
                spec.duration,
                spec.job_class.value,
                spec.tenant,
            )
            self.records[spec.id] = record
            work = spec.duration
            if annotator is not None:
                spec = annotator.on_submit(spec, now)
            truth = self.truth[spec.id] = _Truth(spec, record)
            truth.work = work  # the trace's, whatever the annotator made of the spec
            if self.reports is not None:
                truth.steps = self.reports.steps_for(spec.id, work)
            self.scheduler.submit(spec, now)
            self.arrived.append(spec.id)
            self.events += 1
            if progress is not None and next_job % self.report_every == 0:
                progress(next_job / n_jobs)
        self.next_job = next_job

    def _deliver_forecasts(self, now: float) -> None:
        """Hand the policy's tuner every forecast the clock has passed."""
        forecasts = self.forecasts
        while self.next_forecast < len(forecasts) and forecasts[self.next_forecast][0] <= now:
            self.scheduler.forecast(forecasts[self.next_forecast][1], now)
            self.next_forecast += 1

    def _note_waiting(self, now: float) -> None:
        """For each arrival the pass left pending, record why (a countable code) and,
        for every ``predict_every``-th one and the explained job, when the core
        expects it to start (to measure that forecast's accuracy later)."""
        scheduler = self.scheduler
        for job_id in self.arrived:
            job_state = scheduler.jobs.get(job_id)
            if job_state is None or job_state.status.value != "pending":
                continue
            self.records[job_id].wait_reason = scheduler.wait_code(job_id)
            self.waited += 1
            every = self.predict_every
            if job_id == self.explain or (every and self.waited % every == 0):
                self._predict_start(job_id, job_state, now)
        self.arrived.clear()

    def _predict_start(self, job_id: str, job_state: JobState, now: float) -> None:
        """Record the start time the core expects for waiting ``job_id``."""
        scheduler = self.scheduler
        outlook = scheduler.start_range(job_id, now)
        if outlook is None:
            return
        record = self.records[job_id]
        record.predicted_start = outlook.median
        record.predicted_low, record.predicted_high = outlook.low, outlook.high
        record.projected_start = outlook.projected
        if self.explainer is not None and job_id == self.explain:
            position = scheduler.policy.queue_position(job_state, now)
            self.explainer.on_predicted(position, outlook, now)

    def _apply(self, decisions: list[Decision], now: float) -> None:
        """Carry out the pass's decisions in order (holds change nothing here)."""
        observer = self.observer
        for decision in decisions:
            if observer is not None:
                event = "pack" if decision.shares_with is not None else decision.action.value
                observer(now, event, decision.job_id, decision.placement)
            if decision.action is Action.START:
                self._start(decision, now)
            elif decision.action is Action.PREEMPT:
                self._preempt(decision, now)

    def _start(self, decision: Decision, now: float) -> None:
        """Start a job: it progresses at the pace of its slowest GPU type, after any
        paid-pool start-up, until its work runs out or its profiling limit; a packed
        start slows it and its partner by the world's pair speed."""
        placement = decision.placement
        assert placement is not None
        truth = self.truth[decision.job_id]
        rec = truth.record
        if rec.first_start < 0:
            rec.first_start = now
            rec.nodes = "+".join(f"{self.nodes[i].name}:{c}" for i, c in placement.parts)
        if decision.limit_s is None and rec.main_start < 0 and rec.profiled_s > 0:
            rec.main_start = now
        truth.since = now
        rate = 1.0
        if placement.parts:
            truth.pool = self.pool_of_node[placement.parts[0][0]]
            spec, speed, nodes = truth.spec, self.world.speed, self.nodes
            rate = min(speed(spec, nodes[i].gpu_type) for i, _ in placement.parts)
        truth.rate = truth.base_rate = rate
        if decision.startup_s:  # a paid pool's provisioning: held, no progress yet
            truth.work += decision.startup_s
            rec.startup_s += decision.startup_s
        if decision.limit_s is not None:
            truth.cut_at = now + decision.limit_s
        if truth.steps is not None:
            truth.run_from = now
            self._plan_report(truth, now)
        if decision.shares_with is not None:
            other = self.truth[decision.shares_with]
            mine, theirs = self.world.pair_speed(truth.spec, other.spec)
            self._settle(other, now)
            truth.rate = mine * truth.base_rate
            other.rate = theirs * other.base_rate
            rec.packed += 1
            self._plan(other, now)
        self._plan(truth, now)

    def _preempt(self, decision: Decision, now: float) -> None:
        """Stop a job: it will redo the work since its last checkpoint (the core counts
        run time; the work it stands for ran at the job's rate) and pay a restore
        overhead; a packing partner runs alone again at full speed."""
        truth = self.truth[decision.job_id]
        rec = truth.record
        self._settle(truth, now)
        truth.cut_at = None
        self._stop_reports(truth, now)
        rec.preemptions += 1
        rec.restores += 1
        lost_work = decision.lost_s * truth.rate
        rec.lost_work_s += lost_work
        truth.work += lost_work + decision.overhead_s
        truth.version += 1
        if decision.shares_with is not None:
            self._run_alone(self.truth[decision.shares_with], now)

    def _plan_report(self, truth: _Truth, now: float) -> None:
        """Plan a running reporting job's next report, at its next report's run time."""
        ran = truth.run_s + (now - truth.run_from)
        self.tiebreak += 1
        at = now + max(0.0, truth.report_at - ran)
        heapq.heappush(self.heap, (at, self.tiebreak, truth, truth.report_token, _REPORT))

    def _stop_reports(self, truth: _Truth, now: float) -> None:
        """A reporting job stopped: count its run, and its planned report is stale."""
        if truth.steps is not None and truth.run_from >= 0:
            truth.run_s += now - truth.run_from
            truth.run_from = -1.0
            truth.report_token += 1

    def _report(self, truth: _Truth, now: float) -> None:
        """A running job reports the step its work done so far stands for (noisily)."""
        steps, reports = truth.steps, self.reports
        assert steps is not None and reports is not None
        self._settle(truth, now)
        done = max(0.0, truth.record.duration - truth.work)  # (lost work, overheads redo)
        step = steps.report(done, reports.noise)
        self.scheduler.progress(truth.spec.id, now, step, steps.total)
        ran = truth.run_s + (now - truth.run_from)
        truth.report_at = reports.next_report(ran)
        self._plan_report(truth, now)
        self.events += 1

    def _run_alone(self, truth: _Truth, now: float) -> None:
        """A running job lost its packing partner: from ``now`` it runs at its solo pace."""
        self._settle(truth, now)
        truth.rate = truth.base_rate
        self._plan(truth, now)

    def _settle(self, truth: _Truth, now: float) -> None:
        """Bring a job's truth up to ``now``: the GPU time it held and the work it did
        since it was last settled (at its current rate)."""
        ran = now - truth.since
        if ran > 0:
            rec = truth.record
            held = ran * rec.num_gpus
            rec.busy_gpu_seconds += held
            pool = truth.pool
            self.pool_gpu_s[pool] = self.pool_gpu_s.get(pool, 0.0) + held
            done_work = ran * truth.rate
            rec.work_done += done_work
            truth.work = max(0.0, truth.work - done_work)
        truth.since = now

    def _plan(self, truth: _Truth, now: float) -> None:
        """Plan a settled job's next event at its current rate (its end, or its
        profiling cut if sooner); earlier plans for it become stale."""
        truth.version += 1
        end = now + truth.work / truth.rate
        kind = _END
        cut = truth.cut_at
        if cut is not None and cut < end:
            end, kind = cut, _CUT
        self.tiebreak += 1
        heapq.heappush(self.heap, (end, self.tiebreak, truth, truth.version, kind))

    def _result(self) -> SimResult:
        """What the replay measured, in the order jobs arrived. Paid-pool nodes still up
        at the end are billed until their idle release, as the live service would."""
        cloud = self.scheduler.cloud
        bill: dict[str, tuple[float, float]] = {}
        tenants: dict[str, float] = {}
        if cloud is not None:
            cloud.close_all(self.scheduler.jobs.values(), self.last_time)
            bill = cloud.bill(self.last_time)
            tenants = dict(cloud.tenant_cost)
        return SimResult(
            policy=self.policy.name,
            cluster_gpus=self.total_gpus,
            cluster_nodes=len(self.nodes),
            records=list(self.records.values()),
            series=self.series,
            events=self.events,
            wall_s=time.perf_counter() - self.wall_start,
            busy_gpu_seconds=self.busy_total,
            tuner_log=list(self.policy.tuner_log),
            story=self.explainer.story if self.explainer is not None else [],
            waits=self.explainer.waits if self.explainer is not None else {},
            pool_gpu_seconds=self.pool_gpu_s,
            cloud_bill=bill,
            tenant_cloud_cost=tenants,
            power_ups=self.power_ups,
        )


def _first_pending(scheduler: Scheduler) -> str:
    for job in scheduler.pending():
        return f"{job.spec.id} ({job.spec.num_gpus} GPUs)"
    return "none"
