"""A synthetic trace from documented distributions, for runs without real traces.

The shape follows the Philly trace's published statistics (ATC'19): most jobs
use one GPU, a few use whole machines or more; durations are heavy-tailed.

- arrivals: Poisson process, mean gap ``mean_gap_s`` (default 120 s);
- GPUs: 1 (80%), 2 (3%), 4 (6%), 8 (7%), 16 (2.5%), 32 (1%), 64 (0.5%);
- duration: log-normal with median 30 min and sigma 1.8, clipped to 1 min .. 14 days.
"""

from __future__ import annotations

import math
import random

from ilucid.core import JobSpec
from ilucid.traces.formats import Trace

__all__ = ["GPU_MIX", "synthetic_trace"]

GPU_MIX: tuple[tuple[int, float], ...] = (
    (1, 0.80),
    (2, 0.03),
    (4, 0.06),
    (8, 0.07),
    (16, 0.025),
    (32, 0.01),
    (64, 0.005),
)


def synthetic_trace(jobs: int = 5000, seed: int = 0, mean_gap_s: float = 120.0) -> Trace:
    """Deterministic for a seed, so results can be compared across runs."""
    rng = random.Random(seed)
    sizes = [g for g, _ in GPU_MIX]
    weights = [w for _, w in GPU_MIX]
    median_s = 1800.0
    now = 0.0
    specs: list[JobSpec] = []
    for index in range(jobs):
        now += rng.expovariate(1.0 / mean_gap_s)
        gpus = rng.choices(sizes, weights)[0]
        duration = math.exp(rng.gauss(math.log(median_s), 1.8))
        duration = float(round(min(max(duration, 60.0), 14 * 86400.0)))
        specs.append(JobSpec(f"syn-{index:06d}", float(round(now)), gpus, duration))
    return Trace("synthetic", specs, f"synthetic(jobs={jobs}, seed={seed})", synthetic=True)
