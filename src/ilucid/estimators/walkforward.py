"""Walk-forward evaluation: retrain periodically on jobs finished so far, predict the next ones.

This is how an estimator lives inside a scheduler: at a retrain time T it can
only learn from jobs that had ended by T, and it predicts every job submitted
until the next retrain. Scoring the last part of a trace this way measures
what the scheduler would really have known.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ilucid.core import JobSpec
from ilucid.estimators.duration import DurationEstimator
from ilucid.estimators.features import FeatureRow, earliest_end, walk_forward_rows

__all__ = ["WalkForwardScore", "walk_forward"]

WEEK = 7 * 86400.0


@dataclass(frozen=True, slots=True)
class WalkForwardScore:
    estimator: str
    predicted_jobs: int
    retrains: int
    mae_s: float
    mdape: float
    fit_s: float


def walk_forward(
    jobs: Sequence[JobSpec],
    make: Callable[[], DurationEstimator],
    evaluate_from: float = 0.75,
    retrain_every: float = WEEK,
    max_train: int = 50_000,
    end_of: Callable[[JobSpec], float] = earliest_end,
) -> tuple[WalkForwardScore, list[float]]:
    """Predict the jobs after the ``evaluate_from`` fraction of the trace.

    The model is refitted at the first evaluated submission and every
    ``retrain_every`` seconds after, each time on the (at most ``max_train``
    most recent) jobs whose end is at or before the refit time.
    """
    import time

    rows: list[FeatureRow] = list(walk_forward_rows(jobs, end_of))
    start = int(len(jobs) * evaluate_from)
    if start >= len(jobs) or start == 0:
        raise ValueError("need jobs both before and after the evaluation cut")
    by_end = sorted(range(len(jobs)), key=lambda i: end_of(jobs[i]))
    ends = [end_of(jobs[i]) for i in by_end]
    predictions: list[float] = []
    retrains = 0
    fit_seconds = 0.0
    model: DurationEstimator | None = None
    next_fit = -math.inf
    block: list[int] = []

    def flush() -> None:
        if block and model is not None:
            predictions.extend(model.predict([rows[i] for i in block]))
        block.clear()

    for index in range(start, len(jobs)):
        now = jobs[index].submit_time
        if now >= next_fit:
            flush()
            known = by_end[: bisect.bisect_right(ends, now)][-max_train:]
            model = make()
            began = time.perf_counter()
            model.fit([rows[i] for i in known], [jobs[i].duration for i in known])
            fit_seconds += time.perf_counter() - began
            retrains += 1
            next_fit = now + retrain_every
        block.append(index)
    flush()
    truth = [j.duration for j in jobs[start:]]
    errors = [abs(p - t) for p, t in zip(predictions, truth, strict=True)]
    pct = [abs(p - t) / t for p, t in zip(predictions, truth, strict=True) if t > 0]
    assert model is not None
    score = WalkForwardScore(
        estimator=model.name,
        predicted_jobs=len(predictions),
        retrains=retrains,
        mae_s=sum(errors) / len(errors),
        mdape=statistics.median(pct) if pct else math.nan,
        fit_s=fit_seconds,
    )
    return score, predictions
