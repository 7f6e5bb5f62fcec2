"""Job-duration estimators: a glass-box EBM and the baselines it must beat.

All models learn log(1 + duration): durations span seconds to weeks, and an
error of an hour matters for a ten-minute job, not for a ten-day one.
"""

from __future__ import annotations

import math
import pickle
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ilucid.estimators.features import DURATION_FEATURES, FeatureRow
from ilucid.estimators.portable import portable_fits

__all__ = [
    "Contribution",
    "DurationEstimator",
    "EbmDuration",
    "LightGbmDuration",
    "MedianDuration",
    "ShapeFunction",
    "load_estimator",
    "make_duration_estimator",
]

CATEGORICAL = frozenset({"gpu_type", "tenant", "user"})


@dataclass(frozen=True, slots=True)
class Contribution:
    """One term's additive share of a prediction, in log(1 + seconds)."""

    term: str
    value: float
    feature_values: str


@dataclass(frozen=True, slots=True)
class ShapeFunction:
    """A term's learned effect: bin labels and the score added for each."""

    term: str
    importance: float
    bins: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)


class DurationEstimator(Protocol):
    name: str

    def fit(self, rows: Sequence[FeatureRow], durations: Sequence[float]) -> None: ...

    def predict(self, rows: Sequence[FeatureRow]) -> list[float]: ...

    def explain_one(self, row: FeatureRow) -> tuple[float, list[Contribution]]:
        """Intercept and per-term contributions (log space) of one prediction."""
        ...

    def explain_global(self) -> list[ShapeFunction]: ...

    def save(self, path: Path) -> None: ...


def _frame(rows: Sequence[FeatureRow], columns: Sequence[str]) -> Any:
    import pandas as pd

    frame = pd.DataFrame.from_records(list(rows), columns=list(columns))
    for column in columns:
        if column in CATEGORICAL:
            frame[column] = frame[column].astype(str)
        else:
            frame[column] = frame[column].astype(float)
    return frame


def _informative(rows: Sequence[FeatureRow]) -> list[str]:
    """Feature columns that vary in the training data (constants only clutter a model)."""
    keep = []
    for name in DURATION_FEATURES:
        # stops at the first row that differs from the first (a set of every value costs
        # a str() per row and feature at each in-replay refit)
        first = str(rows[0][name]) if rows else ""
        if any(str(r[name]) != first for r in rows):
            keep.append(name)
    return keep or ["num_gpus"]


class _Saved:
    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as handle:
            pickle.dump({"kind": "duration", "model": self}, handle)


class MedianDuration(_Saved):
    """Baseline: the user's median recent duration, else the median for the GPU count."""

    name = "user-median"

    def __init__(self) -> None:
        self.fallback = 3600.0

    def fit(self, rows: Sequence[FeatureRow], durations: Sequence[float]) -> None:
        ordered = sorted(durations)
        self.fallback = ordered[len(ordered) // 2] if ordered else 3600.0

    def _one(self, row: FeatureRow) -> float:
        for key in ("user_median", "size_median", "recent_median"):
            value = float(row[key])
            if not math.isnan(value):
                return value
        return self.fallback

    def predict(self, rows: Sequence[FeatureRow]) -> list[float]:
        return [self._one(r) for r in rows]

    def explain_one(self, row: FeatureRow) -> tuple[float, list[Contribution]]:
        value = self._one(row)
        return 0.0, [
            Contribution("median of similar finished jobs", math.log1p(value), f"{value:g} s")
        ]

    def explain_global(self) -> list[ShapeFunction]:
        return [ShapeFunction("user median, else GPU-count median, else recent median", 1.0)]


class EbmDuration(_Saved):
    """Explainable boosting machine (GA2M): additive shape functions plus a few pairs."""

    name = "ebm"

    def __init__(
        self,
        interactions: int = 3,
        outer_bags: int = 2,
        seed: int = 0,
        n_jobs: int = 2,
        max_rounds: int = 1000,
        smoothing_rounds: int = 500,
        max_interaction_bins: int = 64,
    ) -> None:
        self.interactions = interactions
        self.n_jobs = n_jobs  # 1 in a live service's refit worker: it must not crowd the loop
        self.outer_bags = outer_bags
        self.seed = seed
        # boosting rounds per bag (the first smoothing_rounds pick cuts at random, which
        # smooths the shapes); fewer keep in-replay refits cheap (ilucid.sim.estimates)
        self.max_rounds = max_rounds
        self.smoothing_rounds = smoothing_rounds
        # bins per feature of a pair term: a pair's cost grows with their square
        self.max_interaction_bins = max_interaction_bins
        self.columns: list[str] = []
        self.model: Any = None

    def fit(self, rows: Sequence[FeatureRow], durations: Sequence[float]) -> None:
        from interpret.glassbox import ExplainableBoostingRegressor

        portable_fits()
        self.columns = _informative(rows)
        self.model = ExplainableBoostingRegressor(
            interactions=self.interactions,
            outer_bags=self.outer_bags,
            max_rounds=self.max_rounds,
            smoothing_rounds=self.smoothing_rounds,
            max_interaction_bins=self.max_interaction_bins,
            random_state=self.seed,
            n_jobs=self.n_jobs,
        )
        with warnings.catch_warnings():
            # history features are missing for a user's first jobs; EBM gives
            # missing values their own score (term_scores_[i][0]), which is fine
            warnings.filterwarnings("ignore", message="Missing values detected")
            # inside the simulator's worker processes joblib falls back to one job
            warnings.filterwarnings("ignore", message="Loky-backed parallel loops")
            self.model.fit(_frame(rows, self.columns), [math.log1p(d) for d in durations])

    def predict(self, rows: Sequence[FeatureRow]) -> list[float]:
        if not rows:
            return []
        logs = self.model.predict(_frame(rows, self.columns))
        return [max(0.0, math.expm1(float(v))) for v in logs]

    def explain_one(self, row: FeatureRow) -> tuple[float, list[Contribution]]:
        terms = self.model.eval_terms(_frame([row], self.columns))[0]
        contributions = []
        for index, name in enumerate(self.model.term_names_):
            features = self.model.term_features_[index]
            shown = ", ".join(f"{self.columns[f]}={row[self.columns[f]]}" for f in features)
            contributions.append(Contribution(name, float(terms[index]), shown))
        contributions.sort(key=lambda c: -abs(c.value))
        return float(self.model.intercept_), contributions

    def explain_global(self) -> list[ShapeFunction]:
        importances = self.model.term_importances()
        shapes = []
        for index, name in enumerate(self.model.term_names_):
            features = self.model.term_features_[index]
            scores = self.model.term_scores_[index]
            if len(features) == 1:
                bins = self.model.bins_[features[0]][0]
                if isinstance(bins, dict):  # categorical: label -> bin index
                    labels = sorted(bins, key=lambda k: bins[k])
                    values = [float(scores[bins[k]]) for k in labels]
                else:  # numeric cut points: bins are (-inf, c0), [c0, c1), ...
                    edges = [float(c) for c in bins]
                    labels = [f"< {edges[0]:g}"] if edges else []
                    labels += [f">= {c:g}" for c in edges]
                    values = [float(v) for v in scores[1 : 1 + len(labels)]]
                shapes.append(ShapeFunction(name, float(importances[index]), labels, values))
            else:
                shapes.append(ShapeFunction(name, float(importances[index])))
        shapes.sort(key=lambda s: -s.importance)
        return shapes


class LightGbmDuration(_Saved):
    """Gradient-boosted trees: accurate, but a black box (a comparison, not the product)."""

    name = "lightgbm"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.columns: list[str] = []
        self.model: Any = None

    def fit(self, rows: Sequence[FeatureRow], durations: Sequence[float]) -> None:
        import lightgbm

        self.columns = _informative(rows)
        frame = _frame(rows, self.columns)
        for column in self.columns:
            if column in CATEGORICAL:
                frame[column] = frame[column].astype("category")
        self.categories = {
            c: list(frame[c].cat.categories) for c in self.columns if c in CATEGORICAL
        }
        self.model = lightgbm.LGBMRegressor(
            n_estimators=300,
            learning_rate=0.05,
            num_leaves=31,
            random_state=self.seed,
            n_jobs=1,
            verbose=-1,
        )
        self.model.fit(frame, [math.log1p(d) for d in durations])

    def _prepared(self, rows: Sequence[FeatureRow]) -> Any:
        import pandas as pd

        frame = _frame(rows, self.columns)
        for column, categories in self.categories.items():
            frame[column] = pd.Categorical(frame[column], categories=categories)
        return frame

    def predict(self, rows: Sequence[FeatureRow]) -> list[float]:
        if not rows:
            return []
        return [max(0.0, math.expm1(float(v))) for v in self.model.predict(self._prepared(rows))]

    def explain_one(self, row: FeatureRow) -> tuple[float, list[Contribution]]:
        contrib = self.model.predict(self._prepared([row]), pred_contrib=True)[0]
        parts = [
            Contribution(name, float(value), f"{name}={row[name]}")
            for name, value in zip(self.columns, contrib[:-1], strict=True)
        ]
        parts.sort(key=lambda c: -abs(c.value))
        return float(contrib[-1]), parts

    def explain_global(self) -> list[ShapeFunction]:
        gains = self.model.booster_.feature_importance(importance_type="gain")
        total = float(sum(gains)) or 1.0
        return sorted(
            (ShapeFunction(n, float(g) / total) for n, g in zip(self.columns, gains, strict=True)),
            key=lambda s: -s.importance,
        )


ESTIMATORS: Mapping[str, type[MedianDuration] | type[EbmDuration] | type[LightGbmDuration]] = {
    "ebm": EbmDuration,
    "user-median": MedianDuration,
    "lightgbm": LightGbmDuration,
}


def make_duration_estimator(kind: str) -> DurationEstimator:
    try:
        return ESTIMATORS[kind]()
    except KeyError:
        raise ValueError(f"unknown estimator {kind!r}; known: {', '.join(ESTIMATORS)}") from None


def load_estimator(path: Path) -> Any:
    """Load a model saved by ``save``; refuses files that are not ilucid models."""
    with path.open("rb") as handle:
        payload = pickle.load(handle)
    if not isinstance(payload, dict) or "model" not in payload:
        raise ValueError(f"{path}: not an ilucid model file")
    return payload["model"]
