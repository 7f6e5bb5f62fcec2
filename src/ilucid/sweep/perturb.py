"""Deterministic perturbations of a trace's durations, one per seed.

One replay of a loaded cluster swings by 5-10% when durations move by far less
than any estimate's error (issue 4's note), so a comparison needs an ensemble of
replays. A seed names one perturbed trace: the same on every worker and every run,
so a cell's figures never depend on where or when it ran. Seed 0 is the trace itself.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence

from ilucid.core import JobSpec
from ilucid.sweep.grid import Perturbation

__all__ = ["jitter_factor", "perturb"]

_SPAN = float(2**64)


def jitter_factor(seed: int, job_id: str, scale: float) -> float:
    """``1 + scale * u`` with ``u`` in [-1, 1) from sha256(seed:job id): no RNG state, so
    a job's factor does not depend on the other jobs or their order."""
    digest = hashlib.sha256(f"{seed}:{job_id}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / _SPAN
    return 1.0 + scale * (2.0 * u - 1.0)


def perturb(jobs: Sequence[JobSpec], seed: int, perturbation: Perturbation) -> list[JobSpec]:
    """The jobs with their durations perturbed by ``seed`` (0: unchanged).

    Submit times, sizes and ids stay as they are, so the arrival order, the cluster
    sized for the trace and the pairing of cells across profiles stay fixed.
    """
    if seed == 0 or perturbation.scale == 0:
        return list(jobs)
    if perturbation.kind == "shift":
        added = seed * perturbation.scale
        return [dataclasses.replace(j, duration=j.duration + added) for j in jobs]
    return [
        dataclasses.replace(j, duration=j.duration * jitter_factor(seed, j.id, perturbation.scale))
        for j in jobs
    ]
