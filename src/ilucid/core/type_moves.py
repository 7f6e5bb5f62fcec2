"""Moving a running job to a faster GPU type when one is left free.

A job placed on a slower type (the faster one was busy, or another job gained more
there) keeps running there after the faster type frees, unless something moves it.
After the policy's pass, GPUs of a faster type that no waiting job took are spare; a
job on a slower type moves there when the run time it saves is several times what the
move costs (its restore, and the work since its last checkpoint). Gavel (OSDI'20)
re-allocates types every round for the same reason; here a move happens only when it
pays, and says so with its numbers.

Candidates are the jobs started on a type that is not their fastest, kept with lazy
deletion (a job that ended, moved or was stopped is dropped when next looked at), and
looked at only after GPUs were given back or a new candidate started, so a pass where
nothing freed costs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ilucid.core.expected_start import expected_remaining
from ilucid.core.free_gpus import MAIN_POOL, FreeGpus
from ilucid.core.jobs import JobState, JobStatus
from ilucid.core.model import Placement
from ilucid.core.type_speeds import TypeSpeeds

__all__ = ["SETTLE_S", "TypeMove", "TypeMoves"]

#: a job moves only after it has run this long where it is (see :meth:`TypeMoves.due`).
#: Philly, hetero, type-blind mean JCT: 600 s 0.737x (patience 0.03), 3,600 s 0.70x,
#: 7,200 s 0.682x, 14,400 s 0.686x (patience 0)
SETTLE_S = 7200.0


@dataclass(frozen=True, slots=True)
class TypeMove:
    """A running job to move to a faster type, and the words that say why."""

    job: JobState
    gpu_type: str
    stop_words: str
    start_words: str


class TypeMoves:
    """Running jobs on a type slower than their fastest, and when moving one pays."""

    def __init__(self, book: TypeSpeeds, free: FreeGpus, move_after: float) -> None:
        self.book = book
        self.free = free
        #: a move happens when the run time saved is this many times its cost; 0: never
        self.move_after = move_after
        if move_after > 0.0:
            book.moves_within = free.cluster.max_gpus_per_node
            book.moves_settle_s = SETTLE_S
        self._node_type = [n.gpu_type for n in free.cluster.nodes]
        #: job id -> (job, its placement, its type, the faster types with its speedup
        #: there, fastest first)
        self._slower: dict[str, tuple[JobState, Placement, str, list[tuple[str, float]]]] = {}
        self._dirty = False

    def started(self, job: JobState, placement: Placement) -> None:
        """``job`` started on ``placement``: a candidate if a faster type exists for it."""
        spec = job.spec
        book = self.book
        if len(placement.parts) != 1 or not book.movable(spec) or spec.id not in book.speeds:
            return
        got = self._node_type[placement.parts[0][0]]
        faster = [(t, book.speedup(spec.id, t, got)) for t in self.free.types if t != got]
        faster = [(t, x) for t, x in faster if x > 1.0]
        if faster:
            faster.sort(key=lambda pair: -pair[1])
            self._slower[spec.id] = (job, placement, got, faster)
            self._dirty = True

    def freed(self) -> None:
        """GPUs were given back: a faster type may have room now."""
        if self._slower:
            self._dirty = True

    def due(
        self, now: float, cost_of: Callable[[JobState], float], packed: Mapping[str, str]
    ) -> list[TypeMove]:
        """The moves that pay now, the largest saving first (the caller places each in
        turn and skips those that no longer find room). ``cost_of`` is a move's cost in
        seconds (restore, and the work lost since the last checkpoint); jobs in
        ``packed`` share their GPUs and stay. A job moves only once it has run
        :data:`SETTLE_S` where it is: one the policy stops and starts again and again
        (the lowest in its order) would take a faster type only to be stopped there."""
        if not self._dirty:
            return []
        self._dirty = False
        free = self.free
        room = {t: free.most_free(t, MAIN_POOL) for t in free.types}
        if not any(room.values()):
            return []
        found: list[tuple[float, str, str, str, float, float]] = []
        for job_id, (job, placement, got, faster) in list(self._slower.items()):
            if job.status is not JobStatus.RUNNING or job.placement is not placement:
                del self._slower[job_id]
                continue
            if now - job.since < SETTLE_S or job_id in packed:
                continue
            gpus = job.spec.num_gpus
            to = next(((t, x) for t, x in faster if room[t] >= gpus), None)
            if to is None:
                continue
            fastest, speedup = to
            left = expected_remaining(job.spec.expected_duration, job.attained_at(now) / gpus)
            saved = left * (1.0 - 1.0 / speedup)
            if saved < self.move_after * 60.0:
                continue
            cost = max(cost_of(job), 60.0)
            if saved < self.move_after * cost:
                continue
            found.append((-saved, job_id, got, fastest, speedup, cost))
        found.sort()
        moves: list[TypeMove] = []
        for minus_saved, job_id, got, fastest, speedup, cost in found:
            job = self._slower.pop(job_id)[0]
            moves.append(
                TypeMove(
                    job,
                    fastest,
                    f"{fastest} GPUs are free: moves from {got}, where it runs"
                    f" {speedup:.2g}x slower, saving about {_span(-minus_saved)} of its"
                    f" run for a move of {_span(cost)}",
                    f"moves to {fastest}: {speedup:.2g}x its speed on {got}",
                )
            )
        return moves


def _span(seconds: float) -> str:
    """``4.2 h``, ``35 min``, ``90 s``: a move's figures at a glance."""
    if seconds >= 5400.0:
        return f"{seconds / 3600.0:.1f} h"
    if seconds >= 120.0:
        return f"{math.floor(seconds / 60.0 + 0.5):.0f} min"
    return f"{seconds:.0f} s"
