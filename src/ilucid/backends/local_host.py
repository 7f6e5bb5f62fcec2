"""What the local backend offers: this host's GPUs (NVML's, or virtual ones on a
machine without a driver) and the CPUs and memory jobs may book on it."""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["GpuInventory", "HostResources", "discover_gpus", "discover_host"]


@dataclass(frozen=True, slots=True)
class GpuInventory:
    count: int
    gpu_type: str
    memory_gb: float
    source: str  # "nvml" or "virtual"


def discover_gpus(virtual: int | None = None) -> GpuInventory:
    """NVML's GPUs when a driver answers, else ``virtual`` virtual GPUs (default 1)."""
    if virtual is None:
        try:
            import pynvml  # type: ignore[import-not-found, import-untyped, unused-ignore]

            pynvml.nvmlInit()
            try:
                count = pynvml.nvmlDeviceGetCount()
                if count:
                    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
                    name = pynvml.nvmlDeviceGetName(handle)
                    name = name.decode() if isinstance(name, bytes) else str(name)
                    memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total / 2**30
                    return GpuInventory(count, name.replace(" ", "-"), round(memory, 1), "nvml")
            finally:
                pynvml.nvmlShutdown()
        except Exception:  # no library, no driver, no device: fall back to virtual GPUs
            pass
    return GpuInventory(virtual if virtual is not None else 1, "virtual", 0.0, "virtual")


@dataclass(frozen=True, slots=True)
class HostResources:
    """CPUs and memory (GB) jobs may take on this host, what placement books them against."""

    cpus: float
    memory_gb: float


def discover_host() -> HostResources:
    """The CPUs this process may run on and the host's physical memory."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return HostResources(float(len(os.sched_getaffinity(0))), round(memory, 1))
