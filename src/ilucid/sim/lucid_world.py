"""The simulated reality behind the Lucid policies: profiles, interference, forecasts.

- Each trace job gets a measured workload profile by the seeded rule of
  :func:`ilucid.estimators.profiles.assign_profile` (Philly and ITP record no
  model or utilisation); profiling "measures" that profile, the packing
  analyzer turns it into a sharing score, and packed pairs run at the speeds
  measured for that pair in Lucid's co-location table.
- A profiled job's estimate is refined with what profiling proved: it ran
  longer than its profile, so it is at least the median duration of past jobs
  that ran that long.
- Load forecasts are made walk-forward: refitted weekly on 10-minute bins
  whose next hour is already past, delivered at the end of each bin.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ilucid.core import Forecast, JobSpec, ProfileReport
from ilucid.core.policies import needs_profiler
from ilucid.estimators.forecast import BIN_S, HORIZON_BINS, LoadForecaster, load_series
from ilucid.estimators.packing import PackingAnalyzer
from ilucid.estimators.profiles import (
    ColocationTable,
    WorkloadProfile,
    assign_profile,
    load_lucid_profiles,
    profile_dir,
)
from ilucid.sim.estimates import WalkForwardEstimates
from ilucid.sim.replay_types import World

__all__ = ["LucidWorld", "profiling_world", "walk_forward_forecasts"]

#: Speed assumed for a pair missing from the co-location table.
UNMEASURED_PAIR_SPEED = 0.85


class LucidWorld(World):
    def __init__(
        self,
        profiles: Sequence[WorkloadProfile],
        table: ColocationTable,
        analyzer: PackingAnalyzer,
        estimates: WalkForwardEstimates | None = None,
        seed: int = 0,
    ) -> None:
        self.profiles = list(profiles)
        self.table = table
        self.analyzer = analyzer
        self.estimates = estimates
        self.seed = seed
        self._scores: dict[str, int] = {}
        self._profile_of: dict[str, WorkloadProfile] = {}  # a hash per job, not per question
        # per profile key: what every measurement of it reports but the estimate (a replay
        # measures tens of thousands of jobs of a few dozen profiles)
        self._measured: dict[str, tuple[int, float, float, str]] = {}

    @classmethod
    def from_directory(
        cls, directory: Path, estimates: WalkForwardEstimates | None = None, seed: int = 0
    ) -> LucidWorld:
        everything, table = load_lucid_profiles(directory)
        analyzer = PackingAnalyzer()
        analyzer.fit(everything, "Lucid single_data.csv (non-commercial licence)")
        measured = [p for p in everything if table.speeds(p.key, p.key) is not None]
        return cls(measured, table, analyzer, estimates, seed)

    def profile_of(self, spec: JobSpec) -> WorkloadProfile:
        profile = self._profile_of.get(spec.id)
        if profile is None:
            profile = self._profile_of[spec.id] = assign_profile(spec.id, self.profiles, self.seed)
        return profile

    def sharing_score(self, profile: WorkloadProfile) -> int:
        score = self._scores.get(profile.key)
        if score is None:
            score = self._scores[profile.key] = self.analyzer.score(profile.features())
        return score

    def measure(self, spec: JobSpec, ran_s: float, now: float) -> ProfileReport:
        profile = self.profile_of(spec)
        measured = self._measured.get(profile.key)
        if measured is None:
            measured = self._measured[profile.key] = (
                self.sharing_score(profile),
                profile.gmem_mb / 1024.0,
                profile.gpu_util,
                f"workload profile {profile.key} (seeded rule)",
            )
        score, gpu_memory_gb, gpu_util, note = measured
        estimate = spec.estimate
        if self.estimates is not None:
            floor = self.estimates.median_longer_than(ran_s)
            if floor is not None and (estimate is None or floor > estimate):
                note += f"; estimate raised to {floor:,.0f} s: it outlived its {ran_s:g} s profile"
                estimate = floor
        # positional (sharing_score, gpu_memory_gb, estimate, gpu_util, note): half the
        # cost of keywords, once per profiling run
        return ProfileReport(score, gpu_memory_gb, estimate, gpu_util, note)

    def pair_speed(self, a: JobSpec, b: JobSpec) -> tuple[float, float]:
        speeds = self.table.speeds(self.profile_of(a).key, self.profile_of(b).key)
        return speeds if speeds is not None else (UNMEASURED_PAIR_SPEED, UNMEASURED_PAIR_SPEED)


def walk_forward_forecasts(
    jobs: Sequence[JobSpec],
    refit_every_bins: int = 7 * 144,
    min_bins: int = 2 * 144,
    max_history_bins: int = 28 * 144,
) -> list[tuple[float, Forecast]]:
    """A forecast at the end of every 10-minute bin, each from a model fitted on the past
    (the last ``max_history_bins`` bins: four weeks by default)."""
    if not jobs:
        return []
    origin = jobs[0].submit_time
    count, work = load_series(jobs, origin)
    out: list[tuple[float, Forecast]] = []
    models: tuple[LoadForecaster, LoadForecaster] | None = None
    for start in range(0, len(work), refit_every_bins):
        stop = min(len(work), start + refit_every_bins)
        known = start - HORIZON_BINS  # bins whose next hour has fully happened by now
        if known >= min_bins:
            jobs_model, work_model = LoadForecaster("jobs"), LoadForecaster("work")
            first = max(0, known + HORIZON_BINS - max_history_bins)
            window = (count[first : known + HORIZON_BINS], work[first : known + HORIZON_BINS])
            jobs_model.fit(*window)
            work_model.fit(*window)
            models = (jobs_model, work_model)
        bins = list(range(start, stop))
        if models is None:  # not enough history yet: the last hour, repeated
            predicted = [
                (sum(count[max(0, t - 5) : t + 1]), sum(work[max(0, t - 5) : t + 1])) for t in bins
            ]
        else:
            njobs = models[0].predict_at(count, work, bins)
            nwork = models[1].predict_at(count, work, bins)
            predicted = list(zip(njobs, nwork, strict=True))
        for t, (n, w) in zip(bins, predicted, strict=True):
            out.append((origin + (t + 1) * BIN_S, Forecast(jobs=n, gpu_seconds=w)))
    return out


def profiling_world(
    policy: str, estimates: WalkForwardEstimates | None = None
) -> LucidWorld | None:
    """The measured reality a profiling policy replays against, when profiles are at hand
    (``ILUCID_PROFILE_DIR``); None otherwise (profiling then measures nothing)."""
    directory = profile_dir()
    if directory is None or not needs_profiler(policy):
        return None
    return LucidWorld.from_directory(directory, estimates)
