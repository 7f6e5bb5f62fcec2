"""Load forecaster: next hour's requested GPU-seconds from 10-minute history.

An EBM on lags (1 h, 3 h, 1 day) and rolling statistics of two 10-minute
series: jobs submitted and GPU-seconds requested. The tuner reads it to
decide whether to pack and how big the profiling pool should be.
"""

from __future__ import annotations

import math
import pickle
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ilucid.core import JobSpec
from ilucid.estimators.portable import portable_fits

__all__ = ["BIN_S", "LoadForecaster", "load_series"]

BIN_S = 600.0
HORIZON_BINS = 6  # one hour
LAGS = {"lag_1h": 6, "lag_3h": 18, "lag_1d": 144}


def load_series(
    jobs: Sequence[JobSpec], start: float | None = None
) -> tuple[list[float], list[float]]:
    """Per 10-minute bin: jobs submitted and GPU-seconds of work requested."""
    if not jobs:
        return [], []
    origin = jobs[0].submit_time if start is None else start
    bins = int((jobs[-1].submit_time - origin) // BIN_S) + 1
    count = [0.0] * bins
    work = [0.0] * bins
    for job in jobs:
        index = int((job.submit_time - origin) // BIN_S)
        count[index] += 1
        work[index] += job.num_gpus * job.duration
    return count, work


def _row(count: Sequence[float], work: Sequence[float], t: int) -> dict[str, float]:
    """Features known at the end of bin ``t`` (inclusive)."""
    row: dict[str, float] = {"hour": float((t * BIN_S // 3600) % 24)}
    for name, lag in LAGS.items():
        row[f"jobs_{name}"] = sum(count[max(0, t - lag + 1) : t + 1])
        row[f"work_{name}"] = sum(work[max(0, t - lag + 1) : t + 1])
    day_ago = t - 144
    row["jobs_same_hour_yesterday"] = (
        sum(count[day_ago + 1 : day_ago + 1 + HORIZON_BINS]) if day_ago >= 0 else math.nan
    )
    return row


def _target(work: Sequence[float], t: int) -> float:
    return sum(work[t + 1 : t + 1 + HORIZON_BINS])


class LoadForecaster:
    """Forecast the next hour's GPU-seconds requested (``target="work"``) or jobs submitted."""

    name = "load-ebm"

    def __init__(self, target: str = "work", seed: int = 0) -> None:
        if target not in ("work", "jobs"):
            raise ValueError(f"target must be 'work' or 'jobs', got {target!r}")
        self.target = target
        self.seed = seed
        self.model: Any = None
        self.columns: list[str] = []

    def fit(self, count: Sequence[float], work: Sequence[float]) -> None:
        """Fit on every bin whose next hour is inside the given history."""
        from interpret.glassbox import ExplainableBoostingRegressor

        if len(work) <= HORIZON_BINS + 1:
            raise ValueError("need more than an hour of history to fit the load forecaster")
        series = work if self.target == "work" else count
        rows = [_row(count, work, t) for t in range(len(work) - HORIZON_BINS)]
        targets = [math.log1p(_target(series, t)) for t in range(len(work) - HORIZON_BINS)]
        self.columns = list(rows[0])
        portable_fits()
        self.model = ExplainableBoostingRegressor(
            interactions=0, outer_bags=2, max_rounds=1000, random_state=self.seed, n_jobs=2
        )
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Missing values detected")
            # inside the simulator's worker processes joblib falls back to one job
            warnings.filterwarnings("ignore", message="Loky-backed parallel loops")
            self.model.fit([[r[c] for c in self.columns] for r in rows], targets)

    def predict(self, count: Sequence[float], work: Sequence[float]) -> float:
        """Forecast for the hour after the last bin of the given history."""
        return self.predict_at(count, work, [len(work) - 1])[0]

    def predict_at(
        self, count: Sequence[float], work: Sequence[float], bins: Sequence[int]
    ) -> list[float]:
        """Forecasts made at the end of each bin in ``bins`` (features use bins <= it)."""
        if not bins:
            return []
        rows = [[_row(count, work, t)[c] for c in self.columns] for t in bins]
        return [max(0.0, math.expm1(float(v))) for v in self.model.predict(rows)]

    def explain_one(self, count: Sequence[float], work: Sequence[float]) -> list[tuple[str, float]]:
        row = _row(count, work, len(work) - 1)
        terms = self.model.eval_terms([[row[c] for c in self.columns]])[0]
        parts = [(name, float(v)) for name, v in zip(self.columns, terms, strict=True)]
        return sorted(parts, key=lambda p: -abs(p[1]))

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as handle:
            pickle.dump({"kind": "forecast", "model": self}, handle)
