"""Per-GPU-type speeds measured by Gavel (OSDI'20), for heterogeneous-cluster replays.

Traces such as Philly and ITP record no model, so each job gets one of
Gavel's measured workloads by a seeded rule (``sha256(seed:job id)``, among
the workloads measured at the job's GPU count: 1, 2, 4 or 8, else 1). A job's
recorded duration is taken to be its duration on the reference type (V100);
on another type it progresses at the ratio of Gavel's isolated throughputs
(steps/s), so the same job may run faster or slower by type. Gavel's data is
MIT-licensed (../shared/profiles/gavel).
"""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

from ilucid.core import JobSpec
from ilucid.sim.replay_types import World

__all__ = ["GavelWorld"]

THROUGHPUTS = "gavel/simulation_throughputs.json"


class GavelWorld(World):
    def __init__(
        self,
        throughputs: dict[str, dict[str, float]],
        reference: str = "v100",
        seed: int = 0,
    ) -> None:
        """``throughputs[gpu type][workload key]`` in steps/s (isolated runs)."""
        if reference not in throughputs:
            raise ValueError(f"reference type {reference!r} not in {sorted(throughputs)}")
        self.throughputs = throughputs
        self.reference = reference
        self.seed = seed
        self._by_scale: dict[int, list[str]] = {}
        for key in sorted(throughputs[reference]):
            if all(throughputs[t].get(key, 0) > 0 for t in throughputs):
                self._by_scale.setdefault(_scale(key), []).append(key)
        if 1 not in self._by_scale:
            raise ValueError("no single-GPU workload is measured on every type")
        self._cache: dict[tuple[str, str], float] = {}

    @classmethod
    def from_directory(cls, profiles: Path, reference: str = "v100", seed: int = 0) -> GavelWorld:
        path = profiles / THROUGHPUTS
        raw = json.loads(path.read_text(encoding="utf-8"))
        table: dict[str, dict[str, float]] = {}
        for gpu_type, rows in raw.items():
            if "_" in gpu_type:  # the *_unconsolidated placements of multi-GPU jobs
                continue
            table[gpu_type] = {
                key: float(row["null"])
                for key, row in rows.items()
                if isinstance(row, dict) and row.get("null") is not None
            }
        return cls(table, reference, seed)

    def workload(self, spec: JobSpec) -> str:
        keys = self._by_scale.get(spec.num_gpus) or self._by_scale[1]
        digest = hashlib.sha256(f"{self.seed}:{spec.id}".encode()).digest()
        return keys[int.from_bytes(digest[:8], "big") % len(keys)]

    def speed(self, spec: JobSpec, gpu_type: str) -> float:
        kind = gpu_type.lower()
        if kind not in self.throughputs:
            return 1.0
        cached = self._cache.get((spec.id, kind))
        if cached is None:
            key = self.workload(spec)
            cached = self.throughputs[kind][key] / self.throughputs[self.reference][key]
            self._cache[(spec.id, kind)] = cached
        return cached

    def ranking(self, spec: JobSpec, types: list[str]) -> tuple[str, ...]:
        """``types`` fastest first for this job (what a per-type profiler would tell)."""
        return tuple(sorted(types, key=lambda t: (-self.speed(spec, t), t)))


def _scale(key: str) -> int:
    """Gavel keys look like ``"('ResNet-18 (batch size 16)', 1)"``: the scale factor."""
    value = ast.literal_eval(key)
    return int(value[1])
