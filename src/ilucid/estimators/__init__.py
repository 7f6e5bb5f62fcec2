"""Interpretable estimators fitted on job history: duration, packing, load.

Models here are glass boxes an operator can read (explainable boosting,
shallow trees); each can fit, predict, explain one prediction, explain the
whole model, and be saved and loaded. Nothing here is imported by the core.
"""

from ilucid.estimators.duration import (
    Contribution,
    DurationEstimator,
    EbmDuration,
    LightGbmDuration,
    MedianDuration,
    ShapeFunction,
    load_estimator,
    make_duration_estimator,
)
from ilucid.estimators.features import DURATION_FEATURES, FeatureStream, walk_forward_rows
from ilucid.estimators.walkforward import WalkForwardScore, walk_forward

__all__ = [
    "DURATION_FEATURES",
    "Contribution",
    "DurationEstimator",
    "EbmDuration",
    "FeatureStream",
    "LightGbmDuration",
    "MedianDuration",
    "ShapeFunction",
    "WalkForwardScore",
    "load_estimator",
    "make_duration_estimator",
    "walk_forward",
    "walk_forward_rows",
]
