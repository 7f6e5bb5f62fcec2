"""Estimators: round trips, no look-ahead, readable explanations."""

from __future__ import annotations

import math
import os
import random
from collections.abc import Mapping
from pathlib import Path

import pytest

from ilucid.core import JobSpec
from ilucid.estimators import (
    EbmDuration,
    LightGbmDuration,
    MedianDuration,
    load_estimator,
    walk_forward,
    walk_forward_rows,
)
from ilucid.estimators.features import FeatureStream
from ilucid.estimators.forecast import LoadForecaster, load_series


def synthetic_jobs(count: int = 600, seed: int = 3) -> list[JobSpec]:
    """Users with their own typical durations, so history carries signal."""
    rng = random.Random(seed)
    typical = {f"u{i}": 300.0 * (i + 1) ** 2 for i in range(6)}
    jobs = []
    now = 0.0
    for index in range(count):
        now += rng.expovariate(1 / 300.0)
        user = rng.choice(list(typical))
        gpus = rng.choice([1, 1, 2, 4, 8])
        duration = typical[user] * rng.uniform(0.7, 1.3)
        jobs.append(JobSpec(f"j{index}", round(now), gpus, round(duration), user=user))
    return jobs


@pytest.mark.parametrize("factory", [EbmDuration, LightGbmDuration, MedianDuration])
def test_save_load_round_trip_gives_identical_predictions(factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    jobs = synthetic_jobs()
    rows = list(walk_forward_rows(jobs))
    model = factory()
    model.fit(rows[:400], [j.duration for j in jobs[:400]])
    before = model.predict(rows[400:])
    model.save(tmp_path / "m.pkl")
    again = load_estimator(tmp_path / "m.pkl")
    assert again.predict(rows[400:]) == before
    intercept, parts = again.explain_one(rows[450])
    assert parts, "an explanation lists contributions"
    if factory is EbmDuration:
        # additive model: intercept + contributions is the prediction (log space)
        total = intercept + sum(p.value for p in parts)
        assert math.isclose(math.expm1(total), before[50], rel_tol=1e-6)
        shapes = again.explain_global()
        assert shapes and all(s.importance >= 0 for s in shapes)


def test_ebm_learns_user_history() -> None:
    jobs = synthetic_jobs(900)
    score_ebm, _ = walk_forward(jobs, EbmDuration, retrain_every=20 * 86400.0)
    score_mean, _ = walk_forward(jobs, MedianDuration, retrain_every=20 * 86400.0)
    assert score_ebm.mdape < 0.35
    assert score_ebm.predicted_jobs == score_mean.predicted_jobs == 900 - int(900 * 0.75)


def test_features_cannot_see_jobs_that_finish_later() -> None:
    # a: submitted 0, runs 1,000 s; b: submitted 500 (a still running); c: submitted 2,000.
    a = JobSpec("a", 0, 1, 1000, user="x")
    b = JobSpec("b", 500, 1, 10, user="x")
    c = JobSpec("c", 2000, 1, 10, user="x")
    rows = list(walk_forward_rows([a, b, c]))
    assert rows[1]["user_count"] == 0.0 and math.isnan(float(rows[1]["user_median"]))
    assert rows[2]["user_count"] == 2.0 and rows[2]["user_last"] in (10.0, 1000.0)
    # changing a's duration (the future, as seen from b) leaves b's features untouched
    longer = JobSpec("a", 0, 1, 99_999, user="x")
    assert _same(list(walk_forward_rows([longer, b, c]))[1], rows[1])


def _same(a: Mapping[str, object], b: Mapping[str, object]) -> bool:
    """Equal rows, NaN equal to NaN (a NaN is not always the same object)."""

    def nan(x: object) -> bool:
        return isinstance(x, float) and math.isnan(x)

    return a.keys() == b.keys() and all(a[k] == b[k] or (nan(a[k]) and nan(b[k])) for k in a)


def test_stream_only_counts_completions_once_the_clock_passes_them() -> None:
    stream = FeatureStream()
    job = JobSpec("a", 0, 2, 50)
    stream.finished(job, end=100.0)
    assert math.isnan(float(stream.row(JobSpec("b", 99, 2, 5), 99.0)["size_median"]))
    assert stream.row(JobSpec("c", 100, 2, 5), 100.0)["size_median"] == 50


def test_walk_forward_never_trains_on_unfinished_jobs() -> None:
    seen: list[int] = []

    class Spy(MedianDuration):
        def fit(self, rows, durations):  # type: ignore[no-untyped-def]
            seen.append(len(rows))
            super().fit(rows, durations)

    jobs = [JobSpec(f"j{i}", i * 100.0, 1, 10_000.0) for i in range(40)]
    walk_forward(jobs, Spy, evaluate_from=0.5, retrain_every=1e9)
    # at the cut (t=2,000) no job has run its 10,000 s yet: nothing to learn from
    assert seen == [0]


def test_load_forecaster_uses_only_the_past() -> None:
    jobs = synthetic_jobs(2000)
    count, work = load_series(jobs)
    model = LoadForecaster("work")
    model.fit(count[:600], work[:600])
    a = model.predict(count[:500], work[:500])
    # appending the future must not change a forecast made at bin 499
    assert model.predict_at(count, work, [499]) == [a]
    assert a >= 0 and model.explain_one(count[:500], work[:500])


PROFILES = os.environ.get("ILUCID_TRACE_DIR")


@pytest.mark.skipif(
    not PROFILES or not (Path(PROFILES).parent / "profiles" / "lucid").is_dir(),
    reason="needs ../shared/profiles",
)
def test_packing_analyzer_on_lucid_profiles_round_trips_and_prints_rules(tmp_path: Path) -> None:
    from ilucid.estimators.packing import PackingAnalyzer
    from ilucid.estimators.profiles import load_lucid_profiles

    profiles, table = load_lucid_profiles(Path(PROFILES).parent / "profiles")  # type: ignore[arg-type]
    assert len(profiles) == 66 and len(table) == 1388
    analyzer = PackingAnalyzer()
    analyzer.fit(profiles, "lucid")
    agreement = sum(analyzer.score(p.features()) == p.label for p in profiles) / len(profiles)
    assert agreement >= 0.8  # a depth-3 tree reproduces most of the authors' labels
    assert "gmem_util" in analyzer.rules() or "gpu_util" in analyzer.rules()
    analyzer.save(tmp_path / "p.pkl")
    again = load_estimator(tmp_path / "p.pkl")
    assert [again.score(p.features()) for p in profiles] == [
        analyzer.score(p.features()) for p in profiles
    ]
    path = again.explain_one(profiles[0].features())
    assert path[-1].startswith("sharing score")
