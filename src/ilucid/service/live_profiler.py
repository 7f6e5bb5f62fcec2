"""Turn a live profiling run's GPU samples into the report the core's policy reads.

Lucid's profiler runs a new job briefly on a small pool, measures it, and
hands two things on: a sharing score for the packing analyzer (0 light,
1 medium, 2 heavy: how much it would slow a partner on the same GPUs) and a
refined duration estimate. Here the measurements are the samples the service
took through its metrics source (NVML on a GPU host, recorded samples in
tests), and the estimate is refined from the service's own history: a job
that outlived its profile is likely to run at least as long as the median
past job that did.

The sharing score comes from a trained packing analyzer when the operator
gives one (``ilucid model train packing``), else from a stated rule on GPU
utilisation, so every score can be read back to the numbers behind it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ilucid.core import ProfileReport
from ilucid.estimators.packing import PackingAnalyzer

__all__ = ["RULE_THRESHOLDS", "MeasuredRun", "profile_report", "rule_score"]

#: GPU utilisation (%) at or below which the rule calls a job light, then medium
RULE_THRESHOLDS = (30.0, 70.0)
#: what NVML cannot see, fed to a trained analyzer: no mixed precision, a typical batch
UNSEEN_FEATURES = {"amp": 0.0, "batch_size": 32.0}


@dataclass(frozen=True, slots=True)
class MeasuredRun:
    """What one profiling run measured: sample means and peak, and how long it ran."""

    samples: int
    gpu_util: float  # mean %, 0..100
    mem_util: float  # mean memory-bandwidth utilisation %, 0..100
    mem_mib: float  # peak GPU memory used
    ran_s: float


def rule_score(gpu_util: float) -> tuple[int, str]:
    """The stated fallback rule; the sentence says which threshold decided."""
    light, medium = RULE_THRESHOLDS
    if gpu_util <= light:
        return 0, f"GPU utilisation {gpu_util:.0f}% <= {light:g}%: light"
    if gpu_util <= medium:
        return 1, f"GPU utilisation {gpu_util:.0f}% <= {medium:g}%: medium"
    return 2, f"GPU utilisation {gpu_util:.0f}% > {medium:g}%: heavy"


def profile_report(
    run: MeasuredRun,
    estimate: float | None,
    past_durations: Sequence[float],
    analyzer: PackingAnalyzer | None = None,
) -> ProfileReport:
    """The core's :class:`ProfileReport` for one run; ``note`` explains every number."""
    if run.samples == 0:
        score: int | None = None
        why = "no samples (no metrics source): not packed"
    elif analyzer is not None:
        features = {
            "gpu_util": run.gpu_util,
            "gmem_util": run.mem_util,
            "gmem_gb": run.mem_mib / 1024.0,
            **UNSEEN_FEATURES,
        }
        score = analyzer.score(features)
        why = "packing tree: " + ", ".join(analyzer.explain_one(features))
    else:
        score, why = rule_score(run.gpu_util)
    notes = [f"{run.samples} samples in {run.ran_s:.0f} s; sharing score {score} ({why})"]
    longer = [d for d in past_durations if d > run.ran_s]
    refined = estimate
    if longer:
        floor = statistics.median(longer)
        if refined is None or floor > refined:
            notes.append(
                f"estimate raised to {floor:,.0f} s: the median of {len(longer)} past jobs"
                f" that outlived {run.ran_s:.0f} s"
            )
            refined = floor
    return ProfileReport(
        sharing_score=score,
        gpu_memory_gb=run.mem_mib / 1024.0 if run.samples else None,
        estimate=refined,
        gpu_util=run.gpu_util if run.samples else None,
        note="; ".join(notes),
    )
