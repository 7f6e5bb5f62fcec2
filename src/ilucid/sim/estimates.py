"""Duration estimates inside a replay, made by the live service's own component.

A replay keeps a :class:`~ilucid.estimators.live.LiveDurationModel`, the
service's versioned duration model, so a replay predicts what the service
would estimate: the same feature rows (:func:`~ilucid.estimators.live.training_set`'s),
the same fit function (:func:`~ilucid.estimators.live.fit_duration_model`), the same
median fallback, with its wording, below ``min_jobs`` finished jobs, and the same
explanations (intercept plus terms, :func:`~ilucid.estimators.live.format_estimate`).
Each refit installs a new model version; every job's estimate records the
version that made it. Where a replay differs from the service is listed on
:class:`WalkForwardEstimates`.

The estimator is refitted every ``retrain_every`` simulated seconds (a week by
default) on the jobs that had finished *in this simulation* by then, each
described by the features it had at its own submission. Jobs submitted until
the next refit are predicted from their request plus the history known at the
refit, so no prediction can see a job that ends later. (Predicting a week of
arrivals in one batch is the same function applied earlier; it is what keeps
a 100,000-job replay fast.)

Refits are bounded: each learns from the ``max_train`` most recently finished
jobs (a sliding window, :data:`REFIT_WINDOW`) with a lighter EBM than
``ilucid model train`` fits (:data:`REFIT_EBM`: one outer bag, fewer boosting
rounds, coarser pairs), so a refit costs about the same late in a long trace
as early on.
Measured with fifo (which ignores estimates, so every setting sees the same
history), median absolute percentage error of the estimates jobs got at
submission over the whole trace, and the seconds spent fitting (2 busy cores):

======  ===============================  ====================================
trace   before: last 30k, 3 pairs,       now: last 10k, 3 pairs, 1 bag,
        2 bags, 1000 rounds              300 rounds
======  ===============================  ====================================
philly  0.975 (19 refits, 181 s)         0.991 (22 s)
itp-03  0.731 (7 refits, 24 s)           0.675 (12 s; the whole trace < 10k)
itp-04  0.643 (9 refits, 74 s)           0.601 (24 s)
======  ===============================  ====================================

Other settings tried on Philly: the last 5k jobs gave 0.976 but qssf's mean
JCT rose from 209k to 357k s (10k: 217k, 20k: 217k); no pairs (10k, 500
rounds) 0.989, and 0.811 on itp-03.

Pair terms are binned 16 x 16 (``max_interaction_bins``; the EBM's 64 x 64 made
the three pairs half of a refit): a refit costs about 0.3 s instead of 0.5-0.6 s
on 10k Philly jobs. Under the default profile, estimates at submission over the
whole trace (median APE, mean absolute error) and mean JCT, 64 -> 16 bins:

======  ===============  =================  =========================
trace   median APE       MAE s              mean JCT s
======  ===============  =================  =========================
philly  0.962 -> 0.960   168,104 -> 168,084  40,102 -> 40,151 (+0.1%)
itp-01  0.669 -> 0.671   9,676 -> 9,958      21,578 -> 21,591 (+0.1%)
itp-02  0.800 -> 0.841   20,665 -> 21,962    28,140 -> 27,902 (-0.8%)
itp-03  0.777 -> 0.759   21,859 -> 21,378    39,990 -> 40,191 (+0.5%)
itp-04  0.713 -> 0.662   16,717 -> 16,510    20,752 -> 20,746 (-0.0%)
itp-05  0.601 -> 0.691   8,915 -> 7,715      65,379 -> 65,485 (+0.2%)
======  ===============  =================  =========================

As fast but worse somewhere: no pairs (itp-02 +1.0%), 150 rounds (itp-05
+4.0%); 32 x 32 bins, slower, itp-05 +1.1%.

A refit's model is installed one simulated day after the refit began (see
:class:`WalkForwardEstimates`: the fit runs beside the replay meanwhile). Under
the default profile, estimates at submission (median APE, MAE) and mean JCT,
installed at once -> a day later:

======  ===============  ===================  ===========================
trace   median APE       MAE s                mean JCT s
======  ===============  ===================  ===========================
philly  0.960 -> 0.959   168,084 -> 168,132   40,151 -> 40,205 (+0.1%)
itp-01  0.671 -> 0.561   9,958 -> 8,450       21,591 -> 21,526 (-0.3%)
itp-02  0.841 -> 0.841   21,962 -> 20,705     27,902 -> 27,673 (-0.8%)
itp-03  0.759 -> 0.779   21,378 -> 21,955     40,191 -> 41,880 (+4.2%)
itp-04  0.662 -> 0.718   16,510 -> 17,920     20,746 -> 20,758 (+0.1%)
itp-05  0.691 -> 0.514   7,715 -> 6,983       65,485 -> 68,549 (+4.7%)
======  ===============  ===================  ===========================

(itp-05's last refit falls past its last arrival: 6 models instead of 7.) These
tables were measured on an AVX-512 machine before fits took interpret's scalar
path (:mod:`ilucid.estimators.portable`); on it, mean JCT moved by at most 2.3%
(itp-02 27,673 -> 28,314 s, p99.9 queueing 14,302 -> 16,185 s). Estimate
error moves both ways, and mean JCT by up to 4.7%, not in step with the error
(itp-05's estimates improved while its mean JCT rose): the estimates carry little
of the jobs' order (see the default profile), so JCT moves with their values.

Since the replay uses the service's component, a refit's rows are in
``training_set``'s order (submission time) rather than end order. Nothing
else changed (with end order the estimates were bit-identical), but the EBM's
seeded validation split depends on row order, so the models differ a little:
median APE with every job ending at submission + duration, itp-03 0.772 ->
0.758, itp-04 0.724 -> 0.728; qssf's mean JCT, itp-03 164,458 -> 147,968 s,
itp-04 23,565 -> 24,226 s.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import operator
from collections import deque
from collections.abc import Callable, Sequence

from ilucid.core import JobSpec
from ilucid.estimators.duration import EbmDuration
from ilucid.estimators.features import FeatureRow
from ilucid.estimators.fit_process import FitsAside
from ilucid.estimators.live import (
    BatchEstimates,
    DurationEstimate,
    FinishedJob,
    LiveDurationModel,
    fit_duration_model,
)

__all__ = [
    "FIT_ASIDE_FROM",
    "NO_HISTORY_S",
    "REFIT_EBM",
    "REFIT_WINDOW",
    "WalkForwardEstimates",
    "refit_model",
    "with_estimate",
]

WEEK = 7 * 86400.0
#: finished jobs a refit learns from (the most recent ones)
REFIT_WINDOW = 10_000
#: EBM settings of in-replay refits (``ilucid model train`` keeps EbmDuration's defaults)
REFIT_EBM: dict[str, int] = {
    "interactions": 3,
    "outer_bags": 1,
    "max_rounds": 300,
    "smoothing_rounds": 100,
    "max_interaction_bins": 16,
    "n_jobs": 1,  # one bag: nothing to share between processes, and no pool to start
}
#: traces from this many jobs fit in a worker process beside the replay (a smaller one
#: ends before a worker has started: it fits in the replay's process)
FIT_ASIDE_FROM = 5_000
#: what the worker imports before its first fit
_FIT_IMPORTS = ("ilucid.sim.estimates", "interpret.glassbox")
#: the estimate a replay gives when no job has finished yet (the service gives none)
NO_HISTORY_S = 3600.0

Fit = Callable[[list[FeatureRow], list[float]], EbmDuration]

# JobSpec's fields in constructor order: a job's copy with its estimate is built from
# one attrgetter call, twice as fast as dataclasses.replace (once per arrival)
_SPEC_FIELDS = tuple(f.name for f in dataclasses.fields(JobSpec))
if not all(f.init and not f.kw_only for f in dataclasses.fields(JobSpec)):
    raise TypeError("JobSpec's fields must all be positional __init__ arguments")
_SPEC_VALUES = operator.attrgetter(*_SPEC_FIELDS)
_ESTIMATE_AT = _SPEC_FIELDS.index("estimate")


def with_estimate(spec: JobSpec, seconds: float) -> JobSpec:
    """``dataclasses.replace(spec, estimate=seconds)``, faster."""
    values = list(_SPEC_VALUES(spec))
    values[_ESTIMATE_AT] = seconds
    return JobSpec(*values)


def refit_model(rows: list[FeatureRow], durations: list[float]) -> EbmDuration:
    """One in-replay refit: the service's fit function with :data:`REFIT_EBM`."""
    return fit_duration_model(rows, durations, **REFIT_EBM)


class WalkForwardEstimates:
    """An :class:`~ilucid.sim.replay_types.Annotator` that sets ``JobSpec.estimate``.

    Estimates come from ``self.live``, a :class:`LiveDurationModel` with
    ``min_jobs = min_train``: refit ``n`` installs version ``n`` (refits before
    ``min_train`` jobs have finished fit nothing, as the service refuses them,
    and jobs then get the service's median fallback). ``model_of[job_id]`` is
    the version that estimated a job (0: the fallback); :meth:`explain` and
    :meth:`estimate_of` give its :class:`DurationEstimate`.

    Where the replay differs from the service (``ilucid.service.duration_keeper``):

    * cadence: a refit every ``retrain_every`` *simulated* seconds (a week),
      not every N finished jobs or on demand;
    * installation: as in the service, a refit's model comes from a worker
      process and jobs submitted meanwhile get the previous version; the
      service installs it when the worker is done (wall-clock seconds), the
      replay ``fit_lag`` simulated seconds after the refit began (a seventh of
      the cadence: a day), whatever the worker's speed, so the replay's
      decisions never depend on the machine. With ``aside`` (by default: the
      default fit on a trace of :data:`FIT_ASIDE_FROM` jobs or more) the fit
      runs in a worker process on another core and the replay waits only if it
      is not done by then; otherwise, or where this process may not start one
      (a pool's worker), it fits here, with the same result. The worker is
      spawned, so a script that replays through the library must guard its
      main (``if __name__ == "__main__":``), as Python requires of any spawned
      process; an unguarded one prints Python's error and fits here;
    * a refit learns from the last ``max_train`` finished jobs with the lighter
      :data:`REFIT_EBM` (the service fits every finished job with the EBM's
      defaults), so a long trace's late refits cost no more than early ones;
    * the jobs submitted until a model is installed, and from then until the
      next refit, are estimated in one batch each
      (:meth:`LiveDurationModel.estimate_many`), from the history known then;
      the service estimates each job at its submission, from the history known
      at that moment;
    * a job learns its run time (``JobSpec.duration``); the service records end
      minus first start;
    * with no finished job at all a replay job gets :data:`NO_HISTORY_S`, where
      the service shows no estimate.

    Training rows are each job's features at its own submission, which is what
    ``training_set`` recomputes from the finished jobs (a row sees the jobs that
    had ended before its job was submitted); the replay records them as jobs
    arrive instead of recomputing the whole history at every refit, and orders
    them as ``training_set`` does (submission time, then id).
    """

    def __init__(
        self,
        jobs: Sequence[JobSpec],
        retrain_every: float = WEEK,
        max_train: int = REFIT_WINDOW,
        min_train: int = 50,
        fit: Fit = refit_model,
        fit_lag: float | None = None,
        aside: bool | None = None,
    ) -> None:
        self._jobs = sorted(jobs, key=lambda j: j.submit_time)
        self._submits = [j.submit_time for j in self._jobs]
        self._fit = fit
        self.retrain_every = retrain_every
        self.max_train = max_train
        self.min_train = min_train
        self.live = LiveDurationModel(min_jobs=min_train)
        self._rows: dict[str, FeatureRow] = {}  # features at each job's own submission
        self._finished: list[FinishedJob] = []  # in end order
        self._batch_of: dict[str, tuple[BatchEstimates, int]] = {}
        self._single: dict[str, DurationEstimate] = {}  # jobs no batch knew
        self._made_at: dict[str, float] = {}  # when a batch estimated each job
        self.fit_lag = retrain_every / 7 if fit_lag is None else fit_lag
        if not 0 <= self.fit_lag < retrain_every:
            raise ValueError(f"fit_lag must be in [0, {retrain_every:g}) s, got {self.fit_lag}")
        if aside is None:  # a custom fit may not survive pickling: it runs here
            aside = fit is refit_model and len(jobs) >= FIT_ASIDE_FROM
        self._fits = FitsAside(_FIT_IMPORTS) if aside else None
        self._fitting: tuple[Callable[[], EbmDuration], float] | None = None  # (result, due)
        self._next_fit = -math.inf
        self._submitted = 0
        self.model_of: dict[str, int] = {}  # job id -> model version that estimated it
        self.refits = 0
        self._recent_sorted: list[float] = []
        self._recent_fifo: deque[float] = deque()

    @property
    def version(self) -> int:
        """The current model version (0: none fitted yet)."""
        return self.live.version

    def on_finish(self, spec: JobSpec, end: float) -> None:
        self.live.observe(spec, spec.duration)
        self._finished.append(FinishedJob(spec, end, spec.duration))
        bisect.insort(self._recent_sorted, spec.duration)
        self._recent_fifo.append(spec.duration)
        if len(self._recent_fifo) > 2000:
            old = self._recent_fifo.popleft()
            del self._recent_sorted[bisect.bisect_left(self._recent_sorted, old)]

    def median_longer_than(self, seconds: float) -> float | None:
        """Median duration of recently finished jobs that ran longer than ``seconds``."""
        values = self._recent_sorted
        first = bisect.bisect_right(values, seconds)
        if first >= len(values):
            return None
        tail = len(values) - first
        middle = first + tail // 2
        if tail % 2:
            return values[middle]
        return (values[middle - 1] + values[middle]) / 2

    def on_submit(self, spec: JobSpec, now: float) -> JobSpec:
        if self._fitting is not None and now >= self._fitting[1]:
            self._install(now)
        if now >= self._next_fit:
            self._refit(now)
        self._rows[spec.id] = self.live.features(spec)
        found = self._batch_of.get(spec.id)
        if found is not None:
            batch, index = found
            seconds = batch.seconds[index]
        else:  # a job the batch did not know (not in the trace list): estimated alone
            single = self.live.estimate(spec)
            self._single[spec.id] = single
            self.model_of[spec.id] = self.live.version if single.version.startswith("v") else 0
            seconds = single.seconds
        self._submitted += 1
        if self._submitted >= len(self._jobs) and self._fitting is None:
            self.close()  # the last arrival: nothing left to fit for
        return with_estimate(spec, NO_HISTORY_S if seconds is None else seconds)

    def training_rows(self) -> tuple[list[FeatureRow], list[float]]:
        """The next refit's rows and durations: the last ``max_train`` finished jobs,
        each as it was at its submission, in ``training_set``'s order."""
        window = sorted(
            self._finished[-self.max_train :], key=lambda f: (f.job.submit_time, f.job.id)
        )
        return [self._rows[f.job.id] for f in window], [f.duration for f in window]

    def _refit(self, now: float) -> None:
        """Start a fit on the recent history (due ``fit_lag`` from now); until then,
        arrivals get the current model."""
        self.refits += 1
        self._next_fit = now + self.retrain_every
        until = self._next_fit
        if self.live.finished_jobs >= self.min_train:
            rows, durations = self.training_rows()
            if self._fits is not None:
                result = self._fits.fit(self._fit, rows, durations)
            else:
                model = self._fit(rows, durations)
                result = lambda: model  # noqa: E731
            until = now + self.fit_lag
            self._fitting = (result, until)
            if self.fit_lag == 0:
                self._install(now)
                return
        self._estimate_batch(now, until)

    def _install(self, now: float) -> None:
        """The pending fit's model becomes the next version; arrivals until the next
        refit get it."""
        assert self._fitting is not None
        result, _ = self._fitting
        self._fitting = None
        self.live.install(result(), self.live.version + 1)
        self._estimate_batch(now, self._next_fit)

    def _estimate_batch(self, start: float, end: float) -> None:
        """Estimate the jobs submitted in ``[start, end)`` with one model call."""
        first = bisect.bisect_left(self._submits, start)
        last = bisect.bisect_left(self._submits, end)
        jobs = self._jobs[first:last]
        batch = self.live.estimate_many(jobs)
        for index, job in enumerate(jobs):
            self._batch_of[job.id] = (batch, index)
            self._made_at[job.id] = start
            self.model_of[job.id] = batch.version

    def close(self) -> None:
        """Stop the fitting process, if one was started, and wait until it has exited (a
        fit still running is dropped; a later refit fits here). The last arrival closes it
        too; whoever makes an annotator closes it when its replay ends, however it ends
        (``with WalkForwardEstimates(...) as annotator``)."""
        self._fitting = None
        if self._fits is not None:
            self._fits.close()
            self._fits = None

    def __enter__(self) -> WalkForwardEstimates:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def estimate_of(self, job_id: str) -> DurationEstimate | None:
        """A job's estimate with the model version that made it, its intercept and
        terms (log(1 + s)), or the fallback's note; None for a job not yet estimated."""
        found = self._batch_of.get(job_id)
        if found is not None:
            batch, index = found
            return batch.explain(index)
        return self._single.get(job_id)

    def made_at(self, job_id: str) -> float | None:
        """When the job's estimate was made: the refit (or model installation) whose
        batch held it, from the history known then; None for a job estimated alone,
        at its submission."""
        return self._made_at.get(job_id) if job_id in self._batch_of else None

    def explain(self, job_id: str) -> DurationEstimate | None:
        """The service's kind of explanation of a job's estimate (:meth:`estimate_of`)."""
        return self.estimate_of(job_id)
