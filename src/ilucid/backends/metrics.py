"""GPU metrics of running jobs, for the non-intrusive profiler of the Lucid design.

A :class:`MetricsSource` answers "how busy are these GPUs, and how much memory
do these processes hold on them". :class:`NvmlMetrics` asks the driver through
NVML (``nvidia-ml-py``): device utilisation and memory-controller utilisation
per GPU, and per-process memory where the driver reports it.
:class:`ReplayMetrics` plays back recorded samples, so machines without GPUs
(and the tests) exercise the same path.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

__all__ = ["GpuSample", "MetricsSource", "NvmlMetrics", "ReplayMetrics"]


@dataclass(frozen=True, slots=True)
class GpuSample:
    gpu_util: float  # % of time a kernel ran, averaged over the job's GPUs
    mem_util: float  # % of time memory was read or written
    mem_mib: float  # memory the job's processes hold (or the GPUs' used memory)


class MetricsSource(Protocol):
    name: str

    def sample(self, job_id: str, gpus: Sequence[int], pids: Sequence[int]) -> GpuSample | None: ...


class ReplayMetrics:
    """Recorded samples (CSV ``gpu_util,mem_util,mem_mib``), played in a loop per job."""

    name = "replay"

    def __init__(self, samples: Sequence[GpuSample]) -> None:
        if not samples:
            raise ValueError("a replay needs at least one sample")
        self.samples = tuple(samples)
        self._next: dict[str, int] = {}

    @classmethod
    def from_csv(cls, path: Path) -> ReplayMetrics:
        with path.open(newline="", encoding="utf-8") as handle:
            rows = [
                GpuSample(float(r["gpu_util"]), float(r["mem_util"]), float(r["mem_mib"]))
                for r in csv.DictReader(handle)
            ]
        return cls(rows)

    def sample(self, job_id: str, gpus: Sequence[int], pids: Sequence[int]) -> GpuSample | None:
        index = self._next.get(job_id, 0)
        self._next[job_id] = index + 1
        return self.samples[index % len(self.samples)]


class NvmlMetrics:
    """Live samples through NVML; per-process memory where the driver allows it."""

    name = "nvml"

    def __init__(self) -> None:
        import pynvml  # type: ignore[import-not-found, import-untyped, unused-ignore]

        self._nvml: Any = pynvml
        pynvml.nvmlInit()

    def sample(self, job_id: str, gpus: Sequence[int], pids: Sequence[int]) -> GpuSample | None:
        nvml = self._nvml
        if not gpus:
            return None
        utils, mems, held = [], [], 0.0
        wanted = set(pids)
        for index in gpus:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            rates = nvml.nvmlDeviceGetUtilizationRates(handle)
            utils.append(float(rates.gpu))
            mems.append(float(rates.memory))
            try:
                processes = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
                mine = [p for p in processes if p.pid in wanted and p.usedGpuMemory]
                held += sum(p.usedGpuMemory for p in mine) / 2**20
            except nvml.NVMLError:  # per-process accounting not allowed: whole device
                held += nvml.nvmlDeviceGetMemoryInfo(handle).used / 2**20
        return GpuSample(sum(utils) / len(utils), sum(mems) / len(mems), held)
