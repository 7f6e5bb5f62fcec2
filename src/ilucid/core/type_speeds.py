"""Which GPU type a job should get, by how much faster it runs there (Gavel's insight).

"Fastest type first for every job" hands fast GPUs to whoever asks first. What
matters is each job's *relative* speedup: a job that runs 3x faster on a V100
than on a K80 should get the V100 before one that runs 1.2x faster. The
speed-ratio rule ranks a job's types by its speed there relative to the median
job's (its comparative advantage): a job whose speedup on the fast type is below
the median's tries the slower type first and leaves the fast one to jobs that
gain more; when its first choice has no room it still takes any other (the
ranking is a soft preference).

Speeds come from measurements (profiling runs per type, the job's own progress
rate per type; in replay, Gavel's measured throughputs); a type a job was never
measured on counts as the median job's speed there. Only ratios within one job
are compared, so a job's speeds may be in any unit (steps/s).

A job may also wait for its fastest type rather than take a slower one, while
the wait is short beside what the slower type would cost it: at most
``patience`` times the extra run time there (its estimated time left times its
slowdown), counted from when it last queued. While it waits, only its fastest
type will do; after, the rule's ranking decides. A job that gains little, or has
little left, runs out of patience at once.

Measured on ``ilucid study hetero`` (speed-ratio, ITP-04 / Philly, mean JCT over
type-blind): without waiting 0.544x / 0.742x; patience 0.03 (the default)
0.429x / 0.729x, with Philly's p99 queueing 20.7k s against 3.9k s; 0.1 and 0.5
were no better on Philly (0.728x, 0.749x) and queued longer.

Rules: ``speed-ratio`` (the default), ``fastest`` (fastest first for every job)
and ``blind`` (no ranking: placement by consolidation alone).
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Iterable, Mapping

from ilucid.core.jobs import JobState
from ilucid.core.model import JobClass, JobSpec

__all__ = ["TYPE_RULES", "TypeSpeeds"]

TYPE_RULES = ("speed-ratio", "fastest", "blind")

#: how many recent jobs' ratios each type's median is taken over
_WINDOW = 1000
#: new ratios between recomputing the medians (rankings are cached in between)
_EVERY = 64


class TypeSpeeds:
    """Each job's measured speeds by GPU type, and the median job's, per type."""

    def __init__(
        self,
        rule: str = "speed-ratio",
        patience: float = 0.0,
        jobs: Mapping[str, JobState] | None = None,
    ) -> None:
        if rule not in TYPE_RULES:
            raise ValueError(f"unknown GPU type rule {rule!r}; known: {', '.join(TYPE_RULES)}")
        if not 0.0 <= patience < math.inf:
            raise ValueError(f"GPU type patience must be >= 0 and finite, got {patience}")
        self.rule = rule
        self.patience = patience if rule != "blind" else 0.0
        self.jobs: Mapping[str, JobState] = jobs if jobs is not None else {}
        self.now = 0.0  # the pass's time: how long a waiting job has waited
        #: GPUs on the largest node when running jobs move to a faster type as it frees
        #: (:mod:`ilucid.core.type_moves`); 0: they do not. A job that can move, and
        #: is expected to run longer than ``moves_settle_s`` (a job moves only after
        #: running that long where it is), starts on a slower free type at once instead
        #: of waiting for its fastest.
        self.moves_within = 0
        self.moves_settle_s = 0.0
        #: more jobs wait than twice the cluster's nodes: a faster type rarely frees
        #: for a move, so a job that could move waits for its fastest type as any other
        #: (without this, hetero Alibaba's mean JCT was 0.54x type-blind's, not 0.19x)
        self.crowded = False
        self.speeds: dict[str, dict[str, float]] = {}  # job id -> type -> speed
        self._base: str | None = None  # the type ratios are taken against
        self._ratios: dict[str, deque[float]] = {}  # type -> recent log(speed / base speed)
        self._median: dict[str, float] = {}  # type -> median log ratio
        self._fresh = 0  # ratios added since the medians were computed
        self._version = 0
        self._ranked: dict[str, tuple[int, tuple[str, ...], tuple[str, ...]]] = {}

    def measured(self, job_id: str, speeds: Iterable[tuple[str, float]]) -> None:
        """A job's speeds (any unit, the same for all its types); non-positive are ignored."""
        mine = {t: s for t, s in speeds if s > 0 and math.isfinite(s)}
        if not mine:
            return
        known = self.speeds.get(job_id)
        if known == mine:
            return
        self.speeds[job_id] = mine
        self._ranked.pop(job_id, None)
        base = self._base
        if base is None:
            base = self._base = min(mine)
        # a job counts once towards the medians per set of types it was measured on (one
        # that reports its progress often would otherwise outweigh the others)
        counted = known is None or known.keys() != mine.keys()
        if counted and base in mine and len(mine) > 1:
            for gpu_type, speed in mine.items():
                window = self._ratios.get(gpu_type)
                if window is None:
                    window = self._ratios[gpu_type] = deque(maxlen=_WINDOW)
                window.append(math.log(speed / mine[base]))
            self._fresh += 1
            if self._fresh >= _EVERY or len(self._median) < len(self._ratios):
                self._remedian()

    def _remedian(self) -> None:
        self._median = {t: statistics.median(w) for t, w in self._ratios.items() if w}
        self._fresh = 0
        self._version += 1

    def forget(self, job_id: str) -> None:
        self.speeds.pop(job_id, None)
        self._ranked.pop(job_id, None)

    def log_speed(self, job_id: str, gpu_type: str) -> float | None:
        """The job's log speed on ``gpu_type`` relative to its base: measured, or the
        median job's there (None: neither is known)."""
        mine = self.speeds.get(job_id)
        median = self._median
        if mine is not None and gpu_type in mine:
            anchor = self._anchor(mine)
            return None if anchor is None else math.log(mine[gpu_type]) - anchor
        return median.get(gpu_type)

    def _anchor(self, mine: Mapping[str, float]) -> float | None:
        """log of the job's speed on the base type: measured, or inferred from a type it
        was measured on and the median ratio there."""
        base = self._base
        if base is not None and base in mine:
            return math.log(mine[base])
        for gpu_type, speed in mine.items():
            ratio = self._median.get(gpu_type)
            if ratio is not None:
                return math.log(speed) - ratio
        return None

    def ranking(self, job_id: str, types: tuple[str, ...]) -> tuple[str, ...]:
        """``types`` best first for this job under the rule; () when nothing is known."""
        if self.rule == "blind":
            return ()
        cached = self._ranked.get(job_id)
        if cached is not None and cached[0] == self._version and cached[1] == types:
            return cached[2]
        keyed: list[tuple[float, str]] = []
        for gpu_type in types:
            mine = self.log_speed(job_id, gpu_type)
            if mine is None:
                return ()  # (a job never measured ranks as the median job: fastest first)
            if self.rule == "speed-ratio" and job_id in self.speeds:
                # gain over the median job there. Measured against blends with the
                # absolute speed, (1+b) log s - b log median: b = 0.5 gave 0.523x / 0.779x
                # type-blind mean JCT on ITP-04 / Philly, this (b -> inf) 0.544x / 0.742x
                mine -= self._median.get(gpu_type, 0.0)
            keyed.append((-mine, gpu_type))
        keyed.sort()
        ranked = tuple(t for _, t in keyed)
        self._ranked[job_id] = (self._version, types, ranked)
        return ranked

    def fastest(self, job_id: str, types: tuple[str, ...]) -> str | None:
        """The type the job runs fastest on (None: nothing known)."""
        best: tuple[float, str] | None = None
        for gpu_type in types:
            mine = self.log_speed(job_id, gpu_type)
            if mine is not None and (best is None or mine > best[0]):
                best = (mine, gpu_type)
        return None if best is None else best[1]

    def speedup(self, job_id: str, fast: str, slow: str) -> float:
        """How many times as fast the job runs on ``fast`` as on ``slow`` (1: unknown)."""
        mine_fast, mine_slow = self.log_speed(job_id, fast), self.log_speed(job_id, slow)
        return 1.0 if mine_fast is None or mine_slow is None else math.exp(mine_fast - mine_slow)

    def wait_left(self, job_id: str, gpu_type: str, fastest: str) -> float:
        """Seconds more the job should wait for ``fastest`` rather than start on
        ``gpu_type`` (0: take it): ``patience`` x its extra run time there, less what it
        has waited since it last queued."""
        if self.patience <= 0.0 or gpu_type == fastest:
            return 0.0
        job = self.jobs.get(job_id)
        mine, fast = self.log_speed(job_id, gpu_type), self.log_speed(job_id, fastest)
        if job is None or mine is None or fast is None or mine >= fast:
            return 0.0
        gpus = max(1, job.spec.num_gpus)
        left = max(0.0, job.spec.expected_duration - job.attained / gpus)
        if left > self.moves_settle_s and not self.crowded and self.movable(job.spec):
            return 0.0  # it starts now and moves once it has settled
        extra = left * (math.exp(fast - mine) - 1.0)
        return max(0.0, self.patience * extra - (self.now - job.since))

    def movable(self, spec: JobSpec) -> bool:
        """Whether ``spec`` would move to a faster type once it frees: a training job of
        whole GPUs on one node, with no type preference of its own (a service runs on,
        and a share of a GPU or a job across nodes is not moved)."""
        return (
            0 < spec.num_gpus <= self.moves_within
            and spec.gpu_milli >= 1000
            and spec.job_class is not JobClass.INFERENCE
            and not spec.preferred_gpu_types
        )

    def words(self, job_id: str, got: str, types: tuple[str, ...]) -> str | None:
        """Why ``got``: "on v100: 2.9x its speed on k80 (measured), against 1.8x for the
        median job"; None when the rule did not choose."""
        if self.rule == "blind" or len(types) < 2:
            return None
        mine = self.speeds.get(job_id, {})
        others = [t for t in types if t != got]
        if not others:
            return None
        fastest = max(types, key=lambda t: (self._median.get(t, 0.0), t))
        if got == fastest:  # its gain here over the slowest other type
            other = min(others, key=lambda t: (self._median.get(t, 0.0), t))
            fast, slow = got, other
        else:  # what the faster type would have given it
            fast, slow = fastest, got
            other = fastest
        mine_fast, mine_slow = self.log_speed(job_id, fast), self.log_speed(job_id, slow)
        if mine_fast is None or mine_slow is None:
            return None
        ratio = math.exp(mine_fast - mine_slow)
        median = math.exp(self._median.get(fast, 0.0) - self._median.get(slow, 0.0))
        source = "measured" if got in mine and other in mine else "the median job's"
        if got == fast:
            said = f"on {got}: {ratio:.2g}x its speed on {other} ({source})"
        else:
            said = f"on {got}: {ratio:.2g}x as fast on {other} ({source})"
        if self.rule == "fastest":
            return said + "; fastest type first"
        return said + f", against {median:.2g}x for the median job"
