"""A versioned duration model for a scheduler that keeps learning while it runs.

A live scheduler (the service today, a replay later) needs more than a fitted
EBM: it must know *which* model made each estimate, swap in a refitted model
without stopping, say plainly when it has too little history to trust a model,
and never leave a half-written model file behind. :class:`LiveDurationModel`
holds the history of finished jobs (the features' source) and the current
model with its version; :func:`training_set`, :func:`fit_duration_model`,
:func:`save_model` and :func:`load_model` are the pieces a refit worker runs,
in another process, on the same history.

A replay (:class:`ilucid.sim.estimates.WalkForwardEstimates`) keeps one too,
refitted on simulated time; :meth:`LiveDurationModel.estimate_many` is its
batch path (one model call for a week of arrivals, each job explained on
demand), and :func:`fit_duration_model` takes its lighter EBM settings.
"""

from __future__ import annotations

import dataclasses
import math
import os
import pickle
import tempfile
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ilucid.core import JobSpec
from ilucid.estimators.duration import Contribution, EbmDuration
from ilucid.estimators.features import FeatureRow, FeatureStream, History

__all__ = [
    "MEDIAN",
    "NONE",
    "BatchEstimates",
    "DurationEstimate",
    "FinishedJob",
    "LiveDurationModel",
    "fit_duration_model",
    "format_estimate",
    "load_model",
    "model_estimate",
    "save_model",
    "training_set",
]

#: version marker of an estimate that is a median of past jobs, not a model's
MEDIAN = "median"
#: version marker when there is nothing to estimate from (no finished job yet)
NONE = "none"
#: the terms an explanation names; the rest are summed into one "others" term
TOP_TERMS = 5


@dataclass(frozen=True, slots=True)
class FinishedJob:
    """A job that ended well: its request, when it ended, and how long it ran."""

    job: JobSpec
    end: float
    duration: float


@dataclass(frozen=True, slots=True)
class DurationEstimate:
    """One estimate with the model version that made it and why.

    ``version`` is ``"v3"`` for duration model 3, :data:`MEDIAN` for the median
    fallback and :data:`NONE` with no estimate. For a model estimate,
    ``log1p(seconds) == intercept + sum(c.value for c in contributions)``.
    """

    seconds: float | None
    version: str
    intercept: float
    contributions: tuple[Contribution, ...]
    note: str


def format_estimate(estimate: DurationEstimate, top: int = TOP_TERMS) -> str:
    """``estimate 2,310 s by duration model v3 = exp(+7.10 +0.32 [num_gpus=4] ...) - 1``.

    The largest ``top`` terms are named; the rest are one ``[N more terms]``
    term, so the printed numbers still add up to the estimate."""
    if estimate.seconds is None or estimate.version in (MEDIAN, NONE):
        return estimate.note
    parts = [f"{estimate.intercept:+.2f}"]
    ordered = sorted(estimate.contributions, key=lambda c: -abs(c.value))
    for part in ordered[:top]:
        parts.append(f"{part.value:+.2f} [{part.feature_values or part.term}]")
    rest = ordered[top:]
    if rest:
        parts.append(f"{sum(c.value for c in rest):+.2f} [{len(rest)} more terms]")
    return (
        f"estimate {estimate.seconds:,.0f} s by duration model {estimate.version}"
        f" = exp({' '.join(parts)}) - 1"
    )


def model_estimate(model: EbmDuration, version: int, row: FeatureRow) -> DurationEstimate:
    """What duration model ``version`` estimates from ``row``, with its terms and note."""
    intercept, contributions = model.explain_one(row)
    log_total = intercept + sum(c.value for c in contributions)
    seconds = max(0.0, math.expm1(log_total))
    estimate = DurationEstimate(seconds, f"v{version}", intercept, tuple(contributions), "")
    return dataclasses.replace(estimate, note=format_estimate(estimate))


@dataclass(frozen=True, slots=True)
class BatchEstimates:
    """Many jobs' estimates made at one moment, with one model call.

    Either one model (``version`` >= 1) estimated every job, in a single
    ``predict``, or there was none to use (``version == 0``) and each job got
    the median fallback, whose full :class:`DurationEstimate` is in
    ``fallbacks``. :meth:`explain` gives job ``i``'s estimate as
    :meth:`LiveDurationModel.estimate` would have at that moment (with
    ``predict``'s seconds): computing the terms of every job up front would
    cost one model call per job.
    """

    version: int
    model: EbmDuration | None
    rows: list[FeatureRow]
    seconds: list[float | None]
    fallbacks: list[DurationEstimate] = field(default_factory=list)

    def explain(self, index: int) -> DurationEstimate:
        """Job ``index``'s estimate with its version, intercept and terms (or fallback note)."""
        if self.model is None:
            return self.fallbacks[index]
        explained = model_estimate(self.model, self.version, self.rows[index])
        # the seconds the job was given (``predict``'s; the terms add up to them to rounding)
        explained = dataclasses.replace(explained, seconds=self.seconds[index])
        return dataclasses.replace(explained, note=format_estimate(explained))


class LiveDurationModel:
    """The current duration model, its version, and the finished-job history.

    Thread-safe: one thread may record finished jobs and install models while
    others estimate. Below ``min_jobs`` finished jobs (or before the first
    model) estimates are the user's median duration, else everyone's, and the
    note says so: a model fitted on a handful of jobs would only look precise.
    """

    def __init__(self, min_jobs: int = 30, window: int = 50) -> None:
        if min_jobs < 1:
            raise ValueError(f"min_jobs must be at least 1, not {min_jobs}")
        self.min_jobs = min_jobs
        self._history = History(window)
        self._finished = 0
        self._lock = threading.Lock()
        # swapped as one tuple, so an estimate never pairs a model with another's version
        self._current: tuple[EbmDuration | None, int] = (None, 0)

    @property
    def version(self) -> int:
        """The installed model's version (0: none yet)."""
        return self._current[1]

    @property
    def finished_jobs(self) -> int:
        return self._finished

    def observe(self, job: JobSpec, duration: float) -> None:
        """Record a finished job (call in the order jobs end)."""
        with self._lock:
            self._history.observe(job, duration)
            self._finished += 1

    def install(self, model: EbmDuration, version: int) -> None:
        """Make ``model`` current; versions only go up, so a late, older refit is refused."""
        with self._lock:
            current = self._current[1]
            if version <= current:
                raise ValueError(f"version {version} is not newer than the current v{current}")
            self._current = (model, version)

    def features(self, job: JobSpec) -> FeatureRow:
        """What is known of ``job`` at its submission (its request and finished jobs)."""
        with self._lock:
            return self._history.row(job)

    def estimate(self, job: JobSpec) -> DurationEstimate:
        """The duration of ``job`` by the current model, or the median fallback."""
        row = self.features(job)
        model, version = self._current
        if model is None or self._finished < self.min_jobs:
            return self._median(job, row)
        return model_estimate(model, version, row)

    def estimate_many(self, jobs: Sequence[JobSpec]) -> BatchEstimates:
        """:meth:`estimate` for many jobs at once: one ``predict`` for the whole batch.

        Same model, features, fallback rule and wording as :meth:`estimate`;
        a model's seconds come from ``predict`` rather than summing the
        explanation's terms, so they agree to floating-point rounding."""
        with self._lock:
            rows = [self._history.row(job) for job in jobs]
            model, version = self._current
            finished = self._finished
        if model is None or finished < self.min_jobs:
            fallbacks = [self._median(job, row) for job, row in zip(jobs, rows, strict=True)]
            return BatchEstimates(0, None, rows, [f.seconds for f in fallbacks], fallbacks)
        seconds: list[float | None] = list(model.predict(rows))
        return BatchEstimates(version, model, rows, seconds)

    def explain_one(self, job: JobSpec) -> tuple[float, list[Contribution]]:
        """Intercept and contributions (log(1 + s)) of the estimate for ``job``."""
        estimate = self.estimate(job)
        return estimate.intercept, list(estimate.contributions)

    def _median(self, job: JobSpec, row: FeatureRow) -> DurationEstimate:
        why = (
            f"too little history for a model: {self._finished} of {self.min_jobs} finished jobs"
            if self._finished < self.min_jobs
            else f"no duration model fitted yet: {self._finished} finished jobs"
        )
        for key, whose in (("user_median", f"{job.user}'s"), ("recent_median", "all recent")):
            value = float(row[key])
            if not math.isnan(value):
                contribution = Contribution(key, math.log1p(value), f"{value:g} s")
                # no parentheses: the note is shown inside other sentences
                note = f"estimate {value:,.0f} s: median of {whose} past jobs; {why}"
                return DurationEstimate(value, MEDIAN, 0.0, (contribution,), note)
        return DurationEstimate(None, NONE, 0.0, (), f"no estimate: no finished job yet; {why}")


def training_set(finished: Iterable[FinishedJob]) -> tuple[list[FeatureRow], list[float]]:
    """Rows as each job's features were at its own submission, and their durations.

    Walk-forward (``FeatureStream``): a row sees only jobs that had ended before
    its job was submitted, the same view the live model had when it estimated."""
    jobs = sorted(finished, key=lambda f: (f.job.submit_time, f.job.id))
    stream = FeatureStream()
    rows = []
    for item in jobs:
        rows.append(stream.row(item.job, item.job.submit_time))
        stream.finished(item.job, item.end, item.duration)
    return rows, [item.duration for item in jobs]


def fit_duration_model(
    rows: list[FeatureRow], durations: list[float], **settings: int
) -> EbmDuration:
    """An EBM on one core (a refit runs beside a scheduler that must stay responsive).

    ``settings`` override :class:`EbmDuration`'s defaults (a replay's lighter
    refits, :data:`ilucid.sim.estimates.REFIT_EBM`); the service passes none."""
    if len(rows) != len(durations) or not rows:
        raise ValueError(f"rows: need one duration per row and at least one ({len(rows)} rows)")
    model = EbmDuration(**{"n_jobs": 1, **settings})
    model.fit(rows, durations)
    return model


def save_model(model: EbmDuration, version: int, path: Path) -> None:
    """Write atomically: a temporary file beside ``path``, flushed, then renamed over it.

    A crash at any point leaves either no file or a complete one, never a torn one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            pickle.dump({"kind": "duration", "version": version, "model": model}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def load_model(path: Path) -> tuple[EbmDuration, int]:
    """A model written by :func:`save_model` and its version; refuses other files."""
    with path.open("rb") as handle:
        payload = pickle.load(handle)
    if (
        not isinstance(payload, dict)
        or not isinstance(payload.get("model"), EbmDuration)
        or not isinstance(payload.get("version"), int)
    ):
        raise ValueError(f"{path}: not a versioned ilucid duration model")
    return payload["model"], payload["version"]
