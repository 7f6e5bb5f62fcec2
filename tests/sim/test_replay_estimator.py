"""A replay's estimates come from the service's component (issue 15): versioned refits,
the service's fallback wording, its training rows and its additive explanations."""

from __future__ import annotations

import heapq
import math
import random
import statistics
from collections.abc import Sequence

import pytest

from ilucid.core import Cluster, JobSpec, make_policy
from ilucid.estimators.duration import Contribution, EbmDuration
from ilucid.estimators.features import FeatureRow
from ilucid.estimators.live import (
    MEDIAN,
    NONE,
    FinishedJob,
    LiveDurationModel,
    format_estimate,
    training_set,
)
from ilucid.sim.engine import simulate
from ilucid.sim.estimates import NO_HISTORY_S, WalkForwardEstimates

DAY = 86400.0
TYPICAL = {"alice": 600.0, "bob": 3600.0, "carol": 20000.0}


class ConstantModel(EbmDuration):
    """A stand-in for the EBM in replay tests: the median duration it learned, for every
    job (fast; its explanation is the intercept alone, so it still adds up)."""

    def __init__(self) -> None:
        super().__init__()
        self.value = 0.0
        self.rows = 0

    def fit(self, rows: Sequence[FeatureRow], durations: Sequence[float]) -> None:
        self.value, self.rows = statistics.median(durations), len(rows)

    def predict(self, rows: Sequence[FeatureRow]) -> list[float]:
        return [self.value] * len(rows)

    def explain_one(self, row: FeatureRow) -> tuple[float, list[Contribution]]:
        return math.log1p(self.value), []


def fit_constant(rows: list[FeatureRow], durations: list[float]) -> EbmDuration:
    model = ConstantModel()
    model.fit(rows, durations)
    return model


def test_a_refit_learns_from_the_most_recent_finished_jobs_only() -> None:
    jobs = [JobSpec(f"j{i}", i * 600.0, 1, 300.0) for i in range(3000)]
    sizes: list[int] = []

    def fit(rows: list[FeatureRow], durations: list[float]) -> EbmDuration:
        sizes.append(len(rows))
        return fit_constant(rows, durations)

    annotator = WalkForwardEstimates(
        jobs, retrain_every=86400.0, max_train=100, min_train=10, fit=fit
    )
    simulate(jobs, Cluster.homogeneous(1, 8), make_policy("qssf"), annotator=annotator)
    assert sizes and max(sizes) == 100
    assert annotator.refits > len(sizes)  # the first refits had too few jobs
    assert annotator.version == len(sizes)  # each refit that fitted is a new version


def hourly_jobs(count: int, seed: int = 3) -> list[JobSpec]:
    """One job an hour; distinct float durations (no two jobs end at the same moment)."""
    rng = random.Random(seed)
    jobs = []
    for index in range(count):
        user = rng.choice(list(TYPICAL))
        gpus = rng.choice([1, 2, 4])
        duration = TYPICAL[user] * gpus * rng.uniform(0.5, 1.5)
        jobs.append(JobSpec(f"j{index:04d}", index * 3600.0, gpus, duration, user=user))
    return jobs


def replay(annotator: WalkForwardEstimates, jobs: list[JobSpec]) -> dict[str, float | None]:
    """Submit each job on time; each ends ``duration`` after its submission (no queueing).
    Returns the estimate each job was given."""
    ends: list[tuple[float, str, JobSpec]] = []
    given: dict[str, float | None] = {}
    for spec in jobs:
        while ends and ends[0][0] <= spec.submit_time:
            end, _, done = heapq.heappop(ends)
            annotator.on_finish(done, end)
        given[spec.id] = annotator.on_submit(spec, spec.submit_time).estimate
        heapq.heappush(ends, (spec.submit_time + spec.duration, spec.id, spec))
    return given


def test_each_refit_is_a_new_version_and_each_job_records_the_version_that_estimated_it() -> None:
    jobs = hourly_jobs(24 * 12)
    fitted: list[ConstantModel] = []

    def fit(rows: list[FeatureRow], durations: list[float]) -> EbmDuration:
        model = fit_constant(rows, durations)
        assert isinstance(model, ConstantModel)
        fitted.append(model)
        return model

    annotator = WalkForwardEstimates(jobs, retrain_every=DAY, min_train=40, fit=fit)
    given = replay(annotator, jobs)
    assert annotator.refits == 12 and annotator.version == len(fitted) >= 9
    versions = [annotator.model_of[job.id] for job in jobs]
    assert versions[:24] == [0] * 24, "the first day: nothing had finished at its refit"
    assert versions == sorted(versions) and versions[-1] == annotator.version
    assert set(versions) == set(range(annotator.version + 1)), "every version estimated jobs"
    for job, version in zip(jobs, versions, strict=True):
        estimate = annotator.estimate_of(job.id)
        assert estimate is not None
        if version == 0:
            assert estimate.version in (MEDIAN, NONE)
            continue
        assert estimate.version == f"v{version}"
        # the estimate the job was given is that version's model's
        assert given[job.id] == fitted[version - 1].value == estimate.seconds


def test_below_min_jobs_the_fallback_and_its_wording_are_the_services() -> None:
    jobs = hourly_jobs(24 * 4)
    annotator = WalkForwardEstimates(jobs, retrain_every=DAY, min_train=1000, fit=fit_constant)
    given = replay(annotator, jobs)
    assert annotator.version == 0, "never 1,000 finished jobs: no model"
    first = annotator.explain(jobs[0].id)
    assert first is not None and first.version == NONE and first.seconds is None
    assert first.note == (
        "no estimate: no finished job yet; too little history for a model: 0 of 1000 finished jobs"
    )
    assert given[jobs[0].id] == NO_HISTORY_S
    # from the second day on: the service's median fallback, made at the day's refit
    service_saw_median = 0
    for job in jobs[24:]:
        refit_at = job.submit_time - job.submit_time % DAY
        service = LiveDurationModel(min_jobs=1000)
        done = sorted(
            (j for j in jobs if j.submit_time + j.duration <= refit_at),
            key=lambda j: (j.submit_time + j.duration, j.id),
        )
        for item in done:
            service.observe(item, item.duration)
        want = service.estimate(job)
        assert annotator.explain(job.id) == want
        assert given[job.id] == (NO_HISTORY_S if want.seconds is None else want.seconds)
        service_saw_median += want.version == MEDIAN
    assert service_saw_median == len(jobs) - 24
    last = annotator.explain(jobs[-1].id)
    assert last is not None and last.note.startswith(f"estimate {last.seconds:,.0f} s: median of ")
    assert last.note.endswith(
        f"; too little history for a model: {len(done)} of 1000 finished jobs"
    )


def test_the_training_rows_are_the_services_training_set() -> None:
    jobs = hourly_jobs(24 * 6)
    annotator = WalkForwardEstimates(jobs, retrain_every=DAY, min_train=40, fit=fit_constant)
    replay(annotator, jobs)
    last = jobs[-1].submit_time
    finished = [
        FinishedJob(j, j.submit_time + j.duration, j.duration)
        for j in jobs
        if j.submit_time + j.duration <= last
    ]
    rows, durations = annotator.training_rows()
    want_rows, want_durations = training_set(finished)
    assert len(rows) == len(finished) > 40
    assert durations == want_durations
    # repr: the rows hold NaN for history a job did not have yet
    assert [repr(r) for r in rows] == [repr(r) for r in want_rows]


@pytest.fixture(scope="module")
def ebm_replay() -> tuple[WalkForwardEstimates, list[JobSpec], dict[str, float | None]]:
    jobs = hourly_jobs(24 * 5, seed=11)
    annotator = WalkForwardEstimates(jobs, retrain_every=2 * DAY, min_train=30)
    return annotator, jobs, replay(annotator, jobs)


def test_explain_is_the_services_explanation_and_adds_up_to_the_estimate(
    ebm_replay: tuple[WalkForwardEstimates, list[JobSpec], dict[str, float | None]],
) -> None:
    annotator, jobs, given = ebm_replay  # the real refit: the light EBM
    assert annotator.version >= 1
    explained = 0
    for job in jobs:
        version = annotator.model_of[job.id]
        estimate = annotator.explain(job.id)
        assert estimate is not None
        if version == 0:
            continue
        explained += 1
        assert estimate.version == f"v{version}" and estimate.seconds is not None
        total = estimate.intercept + sum(c.value for c in estimate.contributions)
        assert math.isclose(total, math.log1p(estimate.seconds), rel_tol=1e-9, abs_tol=1e-9)
        # the batch predicted the same number the explanation adds up to
        seconds = given[job.id]
        assert seconds is not None
        assert math.isclose(seconds, estimate.seconds, rel_tol=1e-9, abs_tol=1e-6)
        text = format_estimate(estimate)
        assert text == estimate.note
        assert text.startswith(f"estimate {estimate.seconds:,.0f} s by duration model v{version}")
    assert explained > len(jobs) // 2
