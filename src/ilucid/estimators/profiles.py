"""Measured workload profiles and co-location speeds (../shared/profiles).

Philly and ITP jobs carry no model name or GPU utilisation, so the simulator
gives each trace job a measured workload profile by a seeded, documented rule:
profile ``sha256(f"{seed}:{job id}") mod N`` of the N configurations that have
co-location measurements. Reports say so. Lucid's table is licensed for
non-commercial research only; the product works without it.
"""

from __future__ import annotations

import csv
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ilucid.traces.reader import TraceError

__all__ = [
    "ColocationTable",
    "WorkloadProfile",
    "assign_profile",
    "load_labelled_profiles",
    "load_lucid_profiles",
    "profile_dir",
]


@dataclass(frozen=True, slots=True)
class WorkloadProfile:
    """One measured training configuration running alone on a GPU."""

    key: str  # model/dataset/batch/amp
    model: str
    batch_size: int
    amp: int
    gpu_util: float  # %
    gmem_util: float  # % memory-controller busy
    gmem_mb: float
    label: int  # Lucid's sharing score: 0 light, 1 medium, 2 heavy

    def features(self) -> dict[str, float]:
        return {
            "gpu_util": self.gpu_util,
            "gmem_util": self.gmem_util,
            "gmem_gb": self.gmem_mb / 1024.0,
            "amp": float(self.amp),
            "batch_size": float(self.batch_size),
        }


class ColocationTable:
    """Normalised speed of each job when two share a GPU, looked up both ways."""

    def __init__(self) -> None:
        self._speeds: dict[tuple[str, str], tuple[float, float]] = {}
        self._gmem: dict[tuple[str, str], float] = {}

    def add(self, a: str, b: str, speed_a: float, speed_b: float, gmem_mb: float) -> None:
        self._speeds[(a, b)] = (speed_a, speed_b)
        self._gmem[(a, b)] = gmem_mb

    def speeds(self, a: str, b: str) -> tuple[float, float] | None:
        """(speed of a, speed of b) when packed, capped at 1 (above 1 is noise)."""
        pair = self._speeds.get((a, b))
        if pair is None:
            swapped = self._speeds.get((b, a))
            if swapped is None:
                return None
            pair = (swapped[1], swapped[0])
        return (min(1.0, pair[0]), min(1.0, pair[1]))

    def __len__(self) -> int:
        return len(self._speeds)


def profile_dir() -> Path | None:
    """``ILUCID_PROFILE_DIR``, else ``profiles`` beside ``ILUCID_TRACE_DIR``."""
    explicit = os.environ.get("ILUCID_PROFILE_DIR")
    if explicit:
        return Path(explicit)
    traces = os.environ.get("ILUCID_TRACE_DIR")
    if traces:
        candidate = Path(traces).parent / "profiles"
        if candidate.is_dir():
            return candidate
    return None


def _key(model: str, dataset: str, batch: str, amp: str) -> str:
    return f"{model}/{dataset}/bs{int(float(batch))}/amp{int(float(amp))}"


def load_lucid_profiles(directory: Path) -> tuple[list[WorkloadProfile], ColocationTable]:
    """Profiles that have co-location data, and the pair table, from Lucid's CSVs."""
    single = directory / "lucid" / "single_data.csv"
    pairs = directory / "lucid" / "colocate_info.csv"
    table = ColocationTable()
    try:
        with pairs.open(newline="", encoding="utf-8") as handle:
            for line, row in enumerate(csv.DictReader(handle), start=2):
                try:
                    a = _key(row["model1"], row["dataset1"], row["batchsize1"], row["amp1"])
                    b = _key(row["model2"], row["dataset2"], row["batchsize2"], row["amp2"])
                    table.add(a, b, float(row["speed1"]), float(row["speed2"]), float(row["gmem"]))
                except (KeyError, ValueError) as exc:
                    raise TraceError(pairs, line, None, f"bad co-location row: {exc}") from None
        profiles: list[WorkloadProfile] = []
        with single.open(newline="", encoding="utf-8") as handle:
            for line, row in enumerate(csv.DictReader(handle), start=2):
                try:
                    key = _key(row["model"], row["dataset"], row["batchsize"], row["amp"])
                    profiles.append(
                        WorkloadProfile(
                            key,
                            row["model"],
                            int(float(row["batchsize"])),
                            int(float(row["amp"])),
                            float(row["gpu_util"]),
                            float(row["gmem_util"]),
                            float(row["gmem"]),
                            int(row["label"]),
                        )
                    )
                except (KeyError, ValueError) as exc:
                    raise TraceError(single, line, None, f"bad profile row: {exc}") from None
    except OSError as exc:
        raise TraceError(
            exc.filename or directory, None, None, f"cannot read: {exc.strerror}"
        ) from None
    return profiles, table


LABELLED_COLUMNS = ("gpu_util", "gmem_util", "gmem", "amp", "batchsize", "label")


def load_labelled_profiles(path: Path) -> list[WorkloadProfile]:
    """A site's own profiled jobs with sharing labels, in Lucid's ``single_data.csv`` columns.

    Required: ``gpu_util, gmem_util, gmem`` (MiB), ``amp`` (0/1), ``batchsize``,
    ``label`` (0 light, 1 medium, 2 heavy); ``model`` and ``dataset`` are optional.
    This is how a site trains the packing analyzer without Lucid's
    non-commercial table.
    """
    from ilucid.traces.reader import read_rows

    profiles = []
    for row in read_rows(path, LABELLED_COLUMNS):
        label = row.integer("label")
        if label not in (0, 1, 2):
            raise row.error("label", f"must be 0, 1 or 2, got {label}")
        model = row.text("model", "job")
        batch = row.integer("batchsize", 1)
        amp = row.integer("amp")
        profiles.append(
            WorkloadProfile(
                _key(model, row.text("dataset", "-"), str(batch), str(amp)),
                model,
                batch,
                amp,
                row.number("gpu_util"),
                row.number("gmem_util"),
                row.number("gmem"),
                label,
            )
        )
    if not profiles:
        raise TraceError(path, None, None, "no labelled profiles")
    return profiles


def assign_profile(
    job_id: str, profiles: Sequence[WorkloadProfile], seed: int = 0
) -> WorkloadProfile:
    """The documented, seeded rule that gives a trace job a measured workload."""
    digest = hashlib.sha256(f"{seed}:{job_id}".encode()).digest()
    return profiles[int.from_bytes(digest[:8], "big") % len(profiles)]
