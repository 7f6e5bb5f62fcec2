"""An EBM fit gives the same model whatever SIMD the CPU offers.

interpret takes the fastest path the CPU has unless told otherwise, and its paths
round differently; a replay's decisions (and the policy table) then depended on
the machine. These tests put the process-wide option back to "any path" before
each fit, as another library in the process could, and check that the fit still
matches the scalar path's.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from interpret.develop import get_option, set_option
from interpret.utils._native import Native
from tests.estimators.test_estimators import synthetic_jobs

from ilucid.estimators import EbmDuration, walk_forward_rows
from ilucid.estimators.forecast import LoadForecaster, load_series
from ilucid.estimators.portable import SCALAR_ONLY


@pytest.fixture
def any_simd() -> Iterator[None]:
    before = get_option("acceleration")
    yield
    set_option("acceleration", before)


def test_scalar_only_is_interprets_no_acceleration_flag() -> None:
    assert Native.AccelerationFlags_NONE == SCALAR_ONLY


def test_a_duration_fit_ignores_the_cpus_simd(any_simd: None) -> None:
    jobs = synthetic_jobs()
    rows = list(walk_forward_rows(jobs))
    durations = [j.duration for j in jobs[:400]]
    predictions = []
    for accel in (Native.AccelerationFlags_ALL, SCALAR_ONLY):
        set_option("acceleration", accel)
        model = EbmDuration()
        model.fit(rows[:400], durations)
        assert get_option("acceleration") == SCALAR_ONLY
        predictions.append(model.predict(rows[400:]))
    assert predictions[0] == predictions[1]


def test_a_load_forecast_fit_ignores_the_cpus_simd(any_simd: None) -> None:
    count, work = load_series(synthetic_jobs(1500))
    forecasts = []
    for accel in (Native.AccelerationFlags_ALL, SCALAR_ONLY):
        set_option("acceleration", accel)
        model = LoadForecaster()
        model.fit(count, work)
        assert get_option("acceleration") == SCALAR_ONLY
        forecasts.append(model.predict_at(count, work, list(range(0, len(work), 7))))
    assert forecasts[0] == forecasts[1]
