"""A replay's refits run in a worker process beside it and are installed a fixed
simulated lag later (issue 15's speed goal): the worker changes when wall time is spent,
never what the replay decides."""

from __future__ import annotations

import os

import pytest
from tests.sim.test_replay_estimator import ConstantModel, fit_constant, hourly_jobs, replay

from ilucid.estimators.duration import EbmDuration
from ilucid.estimators.features import FeatureRow
from ilucid.estimators.fit_process import FitsAside
from ilucid.sim.estimates import WalkForwardEstimates

DAY = 86400.0


def test_a_fit_in_the_worker_gives_the_replay_the_same_estimates_as_one_fitted_here() -> None:
    jobs = hourly_jobs(24 * 6, seed=5)
    given = {}
    for aside in (True, False):
        annotator = WalkForwardEstimates(
            jobs, retrain_every=2 * DAY, min_train=30, aside=aside, fit_lag=DAY / 4
        )
        try:
            given[aside] = (replay(annotator, jobs), dict(annotator.model_of))
        finally:
            annotator.close()
    assert given[True][1] == given[False][1]
    assert max(given[True][1].values()) >= 2, "at least two models were fitted and used"
    assert given[True][0] == given[False][0]


def test_jobs_submitted_while_a_model_is_being_fitted_get_the_previous_version() -> None:
    jobs = hourly_jobs(24 * 6)
    fitted: list[int] = []  # rows of each fit

    def fit(rows: list[FeatureRow], durations: list[float]) -> EbmDuration:
        fitted.append(len(rows))
        return fit_constant(rows, durations)

    lag = 5 * 3600.0
    annotator = WalkForwardEstimates(jobs, retrain_every=DAY, min_train=40, fit=fit, fit_lag=lag)
    replay(annotator, jobs)
    assert annotator.version == len(fitted) >= 3
    # each day's refit begins at a day boundary: jobs in its first 5 hours get the
    # version before it, the rest of the day the new one
    by_day: dict[int, list[int]] = {}
    for job in jobs:
        by_day.setdefault(int(job.submit_time // DAY), []).append(annotator.model_of[job.id])
    first_fit_day = next(d for d, versions in sorted(by_day.items()) if max(versions) > 0)
    for day, versions in sorted(by_day.items()):
        if day < first_fit_day:
            continue
        new = versions[5]
        assert versions[:5] == [new - 1] * 5, f"day {day}: {versions}"
        assert versions[5:] == [new] * (len(versions) - 5), f"day {day}: {versions}"


def test_a_lag_of_zero_installs_at_the_refit_and_a_lag_past_the_cadence_is_refused() -> None:
    jobs = hourly_jobs(24 * 3)
    annotator = WalkForwardEstimates(
        jobs, retrain_every=DAY, min_train=20, fit=fit_constant, fit_lag=0
    )
    replay(annotator, jobs)
    last_day = [annotator.model_of[j.id] for j in jobs if j.submit_time >= 2 * DAY]
    assert last_day == [annotator.version] * 24
    with pytest.raises(ValueError, match="fit_lag must be in"):
        WalkForwardEstimates(jobs, retrain_every=DAY, fit_lag=DAY)


def _dies_in_a_worker(parent: int, value: float) -> ConstantModel:
    if os.getpid() != parent:
        os._exit(3)  # the worker dies mid-fit
    model = ConstantModel()
    model.value = value
    return model


def test_a_fit_whose_worker_died_is_fitted_here_instead() -> None:
    fits = FitsAside()
    try:
        result = fits.fit(_dies_in_a_worker, os.getpid(), 42.0)
        model = result()
        assert isinstance(model, ConstantModel) and model.value == 42.0
    finally:
        fits.close()


def test_the_replay_fits_aside_only_for_the_default_fit_on_a_long_trace() -> None:
    short = hourly_jobs(10)
    for annotator, aside in (
        (WalkForwardEstimates(short), False),
        (WalkForwardEstimates(short, aside=True), True),
        (WalkForwardEstimates(short, fit=fit_constant, aside=None), False),
    ):
        try:
            assert (annotator._fits is not None) is aside
        finally:
            annotator.close()
