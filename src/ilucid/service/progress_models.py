"""The shapes of ``GET /jobs/{id}/progress`` (its OpenAPI schema comes from these)."""

from __future__ import annotations

from pydantic import BaseModel

__all__ = ["ProgressAnswer", "ProgressNow", "ProgressPoint"]


class ProgressNow(BaseModel):
    """The job's last report and what it says."""

    step: float
    total: float
    fraction: float
    #: steps per second of its run (None until two reports of one run)
    rate_per_s: float | None
    #: seconds left at that rate (None: not running, or no rate yet)
    left_s: float | None
    #: when the service saw the report, epoch s
    at: float | None


class ProgressPoint(BaseModel):
    at: float
    step: float
    total: float
    gpu_type: str | None


class ProgressAnswer(BaseModel):
    id: str
    state: str
    progress: ProgressNow | None
    #: how the progress counts in the job's estimate, in words (None: never reported)
    words: str | None
    #: its reports over time, oldest first (thinned to about 200)
    history: list[ProgressPoint]
