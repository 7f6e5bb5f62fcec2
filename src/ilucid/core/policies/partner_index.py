"""Packing partners by (GPU count, sharing score), each bucket ordered by start time.

The default profile's packing looks for the running job a waiting one may share
GPUs with: sharing scores summing to at most 2, memory that fits, the lightest
and then the longest-running first. Scanning every packable job of the GPU count
for each waiting job was 72-86% of a churn pass at 50,000 nodes (docs/scaling.md);
here each (GPU count, score) bucket is kept sorted by (start time, insertion), so
the best partner is the first that fits in the first bucket that has one.
Insertion order breaks ties exactly as the scan over an insertion-ordered dict
did, so decisions do not change.
"""

from __future__ import annotations

from collections.abc import Callable

from ilucid.core.jobs import JobState
from ilucid.core.sorted_blocks import SortedBlocks

__all__ = ["PartnerIndex"]

_Key = tuple[float, int, int]  # (running since, insertion number, seq)


class PartnerIndex:
    """Running jobs that may take a packing partner, found in order (module doc)."""

    def __init__(self) -> None:
        self._buckets: dict[int, dict[int, SortedBlocks]] = {}  # GPUs -> score -> keys
        self._held: dict[int, tuple[int, int, _Key, JobState, float]] = {}
        self._inserted = 0

    def add(self, job: JobState, score: int, memory: float) -> None:
        """``job`` runs alone with a sharing score; re-adding keeps its place."""
        held = self._held.get(job.seq)
        number = held[2][1] if held is not None else self._inserted
        if held is None:
            self._inserted += 1
        else:
            self.remove(job)
        key = (job.since, number, job.seq)
        gpus = job.spec.num_gpus
        by_score = self._buckets.setdefault(gpus, {})
        bucket = by_score.get(score)
        if bucket is None:
            bucket = by_score[score] = SortedBlocks()
        bucket.add(key)
        self._held[job.seq] = (gpus, score, key, job, memory)

    def remove(self, job: JobState) -> None:
        held = self._held.pop(job.seq, None)
        if held is None:
            return
        gpus, score, key, _, _ = held
        self._buckets[gpus][score].remove(key)

    def best(
        self, gpus: int, score: int, memory: float, room: Callable[[JobState], float]
    ) -> JobState | None:
        """The lightest partner whose score sums with ``score`` to at most 2 and whose
        memory fits beside ``memory`` in ``room(partner)``, longest-running first."""
        by_score = self._buckets.get(gpus)
        if not by_score:
            return None
        held = self._held
        for theirs in sorted(by_score):
            if score + theirs > 2:
                break
            for key in by_score[theirs]:
                other, their_memory = held[key[2]][3], held[key[2]][4]
                if memory + their_memory <= room(other):
                    return other
        return None
