"""Bounded refits inside a replay and the cheap predicted-start sampling (issue 15).

The sliding window's size is checked in test_replay_estimator.py."""

from __future__ import annotations

import random

import pytest

from ilucid.core import Cluster, JobSpec, Scheduler, make_policy
from ilucid.core.expected_start import FreeProfile, project_starts
from ilucid.estimators.duration import EbmDuration
from ilucid.estimators.features import DURATION_FEATURES, FeatureRow
from ilucid.sim.estimates import REFIT_EBM, REFIT_WINDOW, WalkForwardEstimates, refit_model


def test_refits_use_the_light_ebm_on_a_sliding_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(EbmDuration, "fit", lambda self, rows, durations: None)
    model = refit_model([{"num_gpus": 1.0}], [60.0])
    assert {k: getattr(model, k) for k in REFIT_EBM} == REFIT_EBM
    assert WalkForwardEstimates([]).max_train == REFIT_WINDOW


def _scan(times: list[float], free: list[int], gpus: int, duration: float) -> float | None:
    """The first-fit search without the profile's floors (the reference)."""
    start = 0
    while start < len(times):
        if free[start] < gpus:
            start += 1
            continue
        end = times[start] + duration
        probe = start + 1
        while probe < len(times) and times[probe] < end and free[probe] >= gpus:
            probe += 1
        if probe >= len(times) or times[probe] >= end:
            return times[start]
        start = probe + 1
    return None


def test_search_floors_never_change_an_answer() -> None:
    rng = random.Random(7)
    for _ in range(400):
        total = rng.randint(1, 16)
        ends, used = [], 0
        for _ in range(rng.randint(0, 8)):
            gpus = rng.randint(1, 4)
            if used + gpus <= total:
                ends.append((float(rng.randint(0, 500)), gpus))
                used += gpus
        profile = FreeProfile.from_running(0.0, total, ends)
        for _ in range(rng.randint(1, 60)):
            gpus = rng.randint(1, total)
            duration = float(rng.choice([rng.randint(1, 300), rng.randint(1, 20), 50, 0.5]))
            want = _scan(list(profile.times), list(profile.free), gpus, duration)
            got = profile.earliest(gpus, duration)
            assert got == want
            if got is not None:
                profile.reserve(got, gpus, duration)


def test_expected_starts_skips_a_job_beyond_the_limit() -> None:
    scheduler = Scheduler(Cluster.homogeneous(1, 4), make_policy("fifo"))
    scheduler.submit(JobSpec("r", 0, 4, 1000, estimate=100), 0)
    scheduler.schedule(0)
    for i in range(5):
        scheduler.submit(JobSpec(f"q{i}", 1 + i, 4, 10, estimate=10), 1 + i)
    scheduler.schedule(10)
    full = scheduler.expected_starts(10)
    assert full == {"q0": 100.0, "q1": 110.0, "q2": 120.0, "q3": 130.0, "q4": 140.0}
    assert scheduler.expected_starts(10, until="q2", limit=3) == {
        "q0": 100.0,
        "q1": 110.0,
        "q2": 120.0,
    }
    assert scheduler.expected_starts(10, until="q3", limit=3) == {}
    assert project_starts(FreeProfile.from_running(10.0, 4, [(100.0, 4)]), [], None) == {}


def test_refits_bin_pair_terms_coarsely() -> None:
    """The pairs' bins reach the EBM (64 x 64 cells made the pairs half of a refit)."""
    rng = random.Random(3)
    blank: FeatureRow = {name: 0.0 for name in DURATION_FEATURES}
    rows: list[FeatureRow] = [
        {**blank, "num_gpus": float(rng.choice([1, 2, 4, 8])), "hour": float(rng.randint(0, 23))}
        for _ in range(200)
    ]
    durations = [60.0 * float(r["num_gpus"]) * (1 + float(r["hour"])) for r in rows]
    model = refit_model(rows, durations)
    assert REFIT_EBM["max_interaction_bins"] < 64
    assert model.model.max_interaction_bins == REFIT_EBM["max_interaction_bins"]
    assert len(model.predict(rows[:3])) == 3
