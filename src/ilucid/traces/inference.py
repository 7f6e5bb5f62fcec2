"""Real-time inference services from the Alibaba DLRM trace, overlaid on a training trace.

The DLRM trace (Alibaba clusterdata, v2025) lists inference instances over a
window of about 31 days: ``creation_time`` is empty for instances that were
already running when the window opened, ``deletion_time`` for those still
running when it closed. Only instances that request GPUs are kept (the
1-GPU ``HN`` instances; the CPU-only ``CN`` ones are left out).

The overlay, documented in docs/scenarios.md:

1. *Tiling*: the window is repeated back to back over the training trace's
   arrival span, starting at its first submission. An instance alive at the window's
   opening arrives at the start of each tile; one alive at its close ends at
   the tile's end (services are redeployed once a window). Services end
   with the training trace's last arrival.
2. *Thinning*: instances are taken in a fixed pseudo-random order (CRC-32 of
   their name) until their GPU-seconds per window reach ``share`` of the
   cluster's GPU capacity, so inference uses about that share on average.
   The same services appear in every tile.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ilucid.core import JobClass, JobSpec
from ilucid.traces.reader import TraceError, read_rows

__all__ = ["MAX_SERVICES", "InferenceInstance", "InferenceTrace", "load_dlrm", "overlay_inference"]

#: Most service jobs an overlay may create: a short window tiled over a long training
#: trace would otherwise make one job per instance per tile, without bound.
MAX_SERVICES = 2_000_000


@dataclass(frozen=True, slots=True)
class InferenceInstance:
    name: str
    app: str
    gpus: int
    start: float | None  # None: running before the window opened
    end: float | None  # None: still running when the window closed


@dataclass(frozen=True, slots=True)
class InferenceTrace:
    instances: tuple[InferenceInstance, ...]
    window_s: float
    source: str
    skipped: Counter[str]

    def lifetime(self, instance: InferenceInstance) -> float:
        start = 0.0 if instance.start is None else instance.start
        end = self.window_s if instance.end is None else instance.end
        return max(0.0, end - start)

    def mean_gpus(self) -> float:
        """GPUs the instances hold on average over the window."""
        busy = sum(self.lifetime(i) * i.gpus for i in self.instances)
        return busy / self.window_s if self.window_s > 0 else 0.0


def load_dlrm(path: Path) -> InferenceTrace:
    """Read the DLRM instance list; bad fields are reported with file, line and field."""
    instances: list[InferenceInstance] = []
    skipped: Counter[str] = Counter()
    window = 0.0
    seen: set[str] = set()
    required = ("instance_sn", "app_name", "gpu_request", "creation_time", "deletion_time")
    for row in read_rows(path, required):
        name = row.text("instance_sn")
        if name in seen:
            raise row.error("instance_sn", f"duplicate instance {name!r}")
        seen.add(name)
        gpus = row.gpus("gpu_request")
        start = row.optional_seconds("creation_time")
        end = row.optional_seconds("deletion_time")
        window = max(window, start or 0.0, end or 0.0)
        if gpus == 0:
            skipped["uses no GPU"] += 1
            continue
        if start is not None and end is not None and end < start:
            raise row.error("deletion_time", f"{end:g} is before creation_time {start:g}")
        instances.append(InferenceInstance(name, row.text("app_name"), gpus, start, end))
    if not instances:
        raise TraceError(path, None, "gpu_request", "no instance requests a GPU")
    if window <= 0:
        raise TraceError(
            path, None, "creation_time", "the window has no length: no time is after 0 s"
        )
    return InferenceTrace(tuple(instances), window, str(path), skipped)


def _stable_order(name: str) -> int:
    return zlib.crc32(name.encode("utf-8"))


def overlay_inference(
    training: Sequence[JobSpec],
    inference: InferenceTrace,
    cluster_gpus: int,
    share: float = 0.10,
) -> list[JobSpec]:
    """Training jobs plus thinned, tiled inference services, sorted by submit time."""
    if not 0.0 < share < 1.0:
        raise ValueError(f"inference share must be in (0, 1), got {share}")
    if not training:
        raise ValueError("the training trace has no jobs to overlay inference on")
    window = inference.window_s
    target = share * cluster_gpus * window
    chosen: list[InferenceInstance] = []
    total = 0.0
    for instance in sorted(inference.instances, key=lambda i: (_stable_order(i.name), i.name)):
        if total >= target:
            break
        gpu_s = inference.lifetime(instance) * instance.gpus
        if gpu_s <= 0:
            continue
        chosen.append(instance)
        total += gpu_s
    origin = min(j.submit_time for j in training)
    span = max(j.submit_time for j in training) - origin
    tiles = max(1, math.ceil(span / window))
    if tiles * len(chosen) > MAX_SERVICES:
        raise ValueError(
            f"{inference.source}: its {window:g} s window tiled over the training trace's"
            f" {span:g} s makes {tiles:,} tiles of {len(chosen):,} services, over the limit"
            f" of {MAX_SERVICES:,} jobs"
        )
    services: list[JobSpec] = []
    for tile in range(tiles):
        offset = origin + tile * window
        for instance in chosen:
            start = offset + (instance.start or 0.0)
            lifetime = min(inference.lifetime(instance), origin + span - start)
            if lifetime <= 0:
                continue  # the scenario ends with the training trace's arrivals
            services.append(
                JobSpec(
                    f"{instance.name}@{tile}",
                    start,
                    instance.gpus,
                    lifetime,
                    job_class=JobClass.INFERENCE,
                    tenant="inference",
                    user=instance.app,
                )
            )
    merged = list(training) + services
    merged.sort(key=lambda j: j.submit_time)
    return merged
