"""The live, versioned duration model: fallback wording, versions, additive explanations."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from ilucid.core import JobSpec
from ilucid.estimators.duration import EbmDuration
from ilucid.estimators.live import (
    MEDIAN,
    NONE,
    FinishedJob,
    LiveDurationModel,
    fit_duration_model,
    format_estimate,
    load_model,
    save_model,
    training_set,
)

TYPICAL = {"alice": 60.0, "bob": 600.0, "carol": 3600.0}


def finished_jobs(count: int, seed: int = 5) -> list[FinishedJob]:
    rng = random.Random(seed)
    jobs, now = [], 1.7e9
    for index in range(count):
        now += 30.0
        user = rng.choice(list(TYPICAL))
        gpus = rng.choice([1, 2, 4])
        duration = TYPICAL[user] * gpus * rng.uniform(0.8, 1.2)
        spec = JobSpec(f"j{index}", now, gpus, 0.0, user=user)
        jobs.append(FinishedJob(spec, now + 1.0 + duration, duration))
    return jobs


@pytest.fixture(scope="module")
def fitted() -> tuple[list[FinishedJob], EbmDuration]:
    jobs = finished_jobs(60)
    rows, durations = training_set(jobs)
    return jobs, fit_duration_model(rows, durations)


def test_no_history_says_there_is_no_estimate() -> None:
    live = LiveDurationModel(min_jobs=30)
    estimate = live.estimate(JobSpec("x", 1.7e9, 1, 0.0, user="alice"))
    assert estimate.seconds is None and estimate.version == NONE
    assert estimate.note == (
        "no estimate: no finished job yet; too little history for a model: 0 of 30 finished jobs"
    )


def test_too_little_history_falls_back_to_the_users_median_then_everyones() -> None:
    live = LiveDurationModel(min_jobs=30)
    for index, seconds in enumerate([1000.0, 1800.0, 5000.0]):
        live.observe(JobSpec(f"a{index}", 0.0, 1, 0.0, user="alice"), seconds)
    alice = live.estimate(JobSpec("x", 10.0, 1, 0.0, user="alice"))
    assert alice.version == MEDIAN and alice.seconds == 1800.0
    assert alice.note == (
        "estimate 1,800 s: median of alice's past jobs"
        "; too little history for a model: 3 of 30 finished jobs"
    )
    newcomer = live.estimate(JobSpec("y", 10.0, 1, 0.0, user="dave"))
    assert newcomer.seconds == 1800.0 and "median of all recent past jobs" in newcomer.note


def test_a_model_is_used_only_from_min_jobs_on_and_versions_only_go_up(
    fitted: tuple[list[FinishedJob], EbmDuration],
) -> None:
    jobs, model = fitted
    live = LiveDurationModel(min_jobs=30)
    for item in jobs[:10]:
        live.observe(item.job, item.duration)
    live.install(model, 1)
    assert live.version == 1
    probe = JobSpec("p", jobs[-1].end + 1, 4, 0.0, user="carol")
    assert live.estimate(probe).version == MEDIAN, "10 of 30 jobs: no model yet"
    for item in jobs[10:]:
        live.observe(item.job, item.duration)
    assert live.estimate(probe).version == "v1"
    live.install(model, 2)
    assert live.estimate(probe).version == "v2"
    with pytest.raises(ValueError, match="version 2 is not newer than the current v2"):
        live.install(model, 2)
    with pytest.raises(ValueError, match="version 1"):
        live.install(model, 1)


def test_the_explanation_sums_to_the_prediction_in_log_space(
    fitted: tuple[list[FinishedJob], EbmDuration],
) -> None:
    jobs, model = fitted
    live = LiveDurationModel(min_jobs=30)
    for item in jobs:
        live.observe(item.job, item.duration)
    live.install(model, 3)
    probe = JobSpec("p", jobs[-1].end + 1, 4, 0.0, user="carol")
    estimate = live.estimate(probe)
    assert estimate.seconds is not None
    intercept, parts = live.explain_one(probe)
    total = intercept + sum(p.value for p in parts)
    assert math.isclose(total, math.log1p(estimate.seconds), rel_tol=1e-9, abs_tol=1e-9)
    # and it is the model's own prediction
    (direct,) = model.predict([live.features(probe)])
    assert math.isclose(direct, estimate.seconds, rel_tol=1e-6)
    text = format_estimate(estimate, top=2)
    assert text.startswith(f"estimate {estimate.seconds:,.0f} s by duration model v3 = exp(")
    assert text.endswith(") - 1") and "more terms]" in text
    # the printed terms add up, to their printed precision
    inside = text.split("exp(")[1].removesuffix(") - 1")
    numbers = [float(w) for w in inside.split() if w[0] in "+-"]
    assert abs(sum(numbers) - total) <= 0.005 * len(numbers)
    # the learned signal: carol's 4-GPU jobs run far longer than alice's 1-GPU ones
    short = live.estimate(JobSpec("q", probe.submit_time, 1, 0.0, user="alice")).seconds
    assert short is not None and short < estimate.seconds / 4


def test_training_rows_see_only_jobs_ended_before_their_submission() -> None:
    jobs = finished_jobs(5)
    rows, durations = training_set(reversed(jobs))
    assert durations == [j.duration for j in jobs], "rows come in submission order"
    assert rows[0]["user_count"] == 0.0 and math.isnan(float(rows[0]["recent_median"]))
    for row, item in zip(rows, jobs, strict=True):
        ended = [j for j in jobs if j.end <= item.job.submit_time]
        assert math.isnan(float(row["recent_median"])) == (not ended)


def test_save_is_atomic_and_load_returns_the_version(
    fitted: tuple[list[FinishedJob], EbmDuration], tmp_path: Path
) -> None:
    _, model = fitted
    path = tmp_path / "models" / "duration.pkl"
    save_model(model, 7, path)
    loaded, version = load_model(path)
    assert version == 7 and isinstance(loaded, EbmDuration)
    assert [p.name for p in path.parent.iterdir()] == ["duration.pkl"], "no temporary left"
    (tmp_path / "other.pkl").write_bytes(b"\x80\x04N.")  # pickle of None
    with pytest.raises(ValueError, match="not a versioned ilucid duration model"):
        load_model(tmp_path / "other.pkl")
