"""One tenant's pending jobs, sorted by priority key within buckets of one shape.

A bucket holds the jobs asking for the same GPU count of the same type and
memory. Once a job of a bucket finds no room in a pass, so would every other
job of it, so a pass looks at the head of each bucket instead of walking one
long list past jobs that cannot fit. Walking a single list with a scan limit
left GPUs idle behind a wall of large jobs: on Philly + DLRM, about 100 free
GPUs on average while hundreds of 4-GPU jobs waited, because the first
``scan_depth`` entries were all 8-GPU jobs.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterator

from ilucid.core.model import JobSpec

__all__ = ["Bucket", "Entry", "TenantQueue", "bucket_of"]

Entry = tuple[int, float, int]  # (tier rank, aged GPU-seconds key, seq)
Bucket = tuple[str | None, float | None, int]  # (GPU type, GPU memory, GPU count)


def bucket_of(spec: JobSpec) -> Bucket:
    return (spec.gpu_type, spec.gpu_memory_gb, spec.num_gpus)


class TenantQueue:
    """Entries in buckets, each sorted; ``in_order`` merges them by key."""

    __slots__ = ("buckets", "size")

    def __init__(self) -> None:
        self.buckets: dict[Bucket, list[Entry]] = {}
        self.size = 0

    def add(self, bucket: Bucket, entry: Entry) -> None:
        bisect.insort(self.buckets.setdefault(bucket, []), entry)
        self.size += 1

    def remove(self, bucket: Bucket, entry: Entry) -> None:
        entries = self.buckets[bucket]
        del entries[bisect.bisect_left(entries, entry)]
        self.size -= 1
        if not entries:
            del self.buckets[bucket]

    def in_order(self) -> Iterator[Entry]:
        return heapq.merge(*self.buckets.values())

    def ahead_of(self, entry: Entry) -> int:
        """How many entries sort before ``entry``."""
        return sum(bisect.bisect_left(entries, entry) for entries in self.buckets.values())
