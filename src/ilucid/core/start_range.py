"""A range around a projected start, calibrated on how far past projections missed.

The projection (:mod:`ilucid.core.expected_start`) assumes every job ends when
estimated, so it is one time that cannot say how sure it is. QBETS (Nurmi et
al., "QBETS: Queue Bounds Estimation from Time Series") showed that quantiles
learned from the history of waits give bounds that are both honest and useful.
Here the history is of the projection's own misses: for each earlier
prediction whose job has since started (walk-forward: nothing not yet known),
the ratio ``(actual wait + PAD) / (projected wait + PAD)``. The 10th, 50th and
90th percentiles of the recent ratios, among predictions of a similar projected
wait, turn a new projection into a median and an 80% interval.

The window lags when the queue changes (a burst, a drain), and the outcomes that
come back first are the shorter waits. So each tail's quantile level adapts as
outcomes come in (adaptive conformal inference, Gibbs and Candes, NeurIPS 2021):
a start before the interval moves the low level down, one inside moves it up,
so that in the long run one start in ten falls below and one in ten above,
whatever the shift.

The pad keeps a projection of "now" from dividing by zero and weighs a miss by
what it costs a person: being told 0 s and waiting 5 min is a small miss,
being told 1 min and waiting 10 is a large one only against a 10-minute scale.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass

__all__ = ["PAD_S", "StartOutcome", "StartRange", "StartRanges", "range_words", "span_words"]

#: seconds added to projected and actual waits before their ratio is taken (10 min: the
#: scale below which a miss does not change a person's plans)
PAD_S = 600.0
#: bands of projected wait, s: a projection of 2 min and one of 8 h miss differently
BANDS_S = (600.0, 3600.0, 6 * 3600.0)
#: recent outcomes each band keeps (older ones describe a queue that has gone)
WINDOW = 400
#: outcomes a band needs before its own quantiles are used (else all bands', else PRIOR)
MIN_OUTCOMES = 30
#: ratio quantiles before anything is known: a projection off by up to 3x either way
PRIOR = (1 / 3, 1.0, 3.0)
#: the interval's quantiles (where each tail's level starts), and the median's
LOW, MID, HIGH = 0.1, 0.5, 0.9
#: how far one outcome moves a tail's quantile level (adaptive conformal inference's
#: step: larger adapts faster to a shifting queue, and wobbles more)
STEP = 0.02


@dataclass(frozen=True, slots=True)
class StartRange:
    """A job's expected start: the median and an 80% interval, epoch seconds, and the
    point the queue's projection gave; ``basis`` says what calibrated it."""

    low: float
    median: float
    high: float
    projected: float
    basis: str


@dataclass(frozen=True, slots=True)
class StartOutcome:
    """How a job's first range came out: when it was given (``made``), the projection
    it calibrated, its ends, and the real start; what a restart learns again from."""

    job_id: str
    made: float
    projected: float
    low: float
    high: float
    started: float


class _Window:
    """The last :data:`WINDOW` log-ratios, kept sorted for their quantiles."""

    __slots__ = ("order", "ranked")

    def __init__(self) -> None:
        self.order: deque[float] = deque()
        self.ranked: list[float] = []

    def add(self, value: float) -> None:
        if len(self.order) == WINDOW:
            old = self.order.popleft()
            del self.ranked[bisect.bisect_left(self.ranked, old)]
        self.order.append(value)
        bisect.insort(self.ranked, value)

    def quantile(self, q: float) -> float:
        ranked = self.ranked
        position = q * (len(ranked) - 1)
        below = int(position)
        above = min(below + 1, len(ranked) - 1)
        return ranked[below] + (ranked[above] - ranked[below]) * (position - below)


class StartRanges:
    """Notes the first projection made for each waiting job and, once it starts, how
    far off it was; answers new projections with calibrated ranges."""

    def __init__(self) -> None:
        self._bands = [_Window() for _ in range(len(BANDS_S) + 1)]
        self._all = _Window()
        #: job id -> (when, projected start, low, high): its first range, until it starts
        self._open: dict[str, tuple[float, float, float, float]] = {}
        self.outcomes = 0
        #: quantile levels of the interval's ends, adapted by outcomes (module docstring)
        self.low_level, self.high_level = LOW, HIGH
        #: outcomes since the driver last took them (None: nobody keeps them, a replay)
        self.fresh: list[StartOutcome] | None = None

    def range_for(self, job_id: str, projected: float, now: float) -> StartRange:
        """The range around ``projected`` (made ``now``), noted if it is the job's first."""
        wait = max(0.0, projected - now)
        window, basis = self._window(wait)
        if window is None:
            low, mid, high = (math.log(r) for r in PRIOR)
        else:
            low, mid, high = (window.quantile(q) for q in (self.low_level, MID, self.high_level))

        def at(log_ratio: float) -> float:
            return now + max(0.0, math.exp(log_ratio) * (wait + PAD_S) - PAD_S)

        answer = StartRange(
            min(at(low), at(mid)), at(mid), max(at(high), at(mid)), projected, basis
        )
        if job_id not in self._open:
            self._open[job_id] = (now, projected, answer.low, answer.high)
        return answer

    def started(self, job_id: str, now: float) -> StartOutcome | None:
        """The job started: its first range becomes an outcome (None: it had none); a
        driver that keeps outcomes across restarts finds it in :attr:`fresh` too."""
        opened = self._open.pop(job_id, None)
        if opened is None:
            return None
        made, projected, low, high = opened
        outcome = StartOutcome(job_id, made, projected, low, high, now)
        self.learn(outcome)
        if self.fresh is not None:
            self.fresh.append(outcome)
        return outcome

    def learn(self, outcome: StartOutcome) -> None:
        """Take ``outcome`` into the windows and the tails' levels (a restart replays
        the stored outcomes, oldest first, through here)."""
        made, projected, start = outcome.made, outcome.projected, outcome.started
        ratio = (max(0.0, start - made) + PAD_S) / (max(0.0, projected - made) + PAD_S)
        value = math.log(ratio)
        self._bands[bisect.bisect_right(BANDS_S, max(0.0, projected - made))].add(value)
        self._all.add(value)
        self.outcomes += 1
        below, above = start < outcome.low, start > outcome.high
        self.low_level = min(MID, max(0.0, self.low_level - STEP * (below - LOW)))
        self.high_level = max(MID, min(1.0, self.high_level + STEP * (above - (1 - HIGH))))

    def forget(self, job_id: str) -> None:
        """The job left the queue without starting (cancelled): no outcome."""
        self._open.pop(job_id, None)

    def _window(self, wait: float) -> tuple[_Window | None, str]:
        band = self._bands[bisect.bisect_right(BANDS_S, wait)]
        if len(band.ranked) >= MIN_OUTCOMES:
            return band, f"{len(band.ranked)} past predictions of a similar wait"
        if len(self._all.ranked) >= MIN_OUTCOMES:
            return self._all, f"{len(self._all.ranked)} past predictions"
        return None, "no past predictions yet: a 3x margin either way"


def span_words(seconds: float) -> str:
    """``45 s``, ``9 min``, ``2.5 h``, ``1.2 d``: a span as a person reads a wait."""
    size = abs(seconds)
    if size < 90:
        return f"{size:.0f} s"
    if size < 5400:
        return f"{size / 60:.0f} min"
    if size < 172800:
        return f"{size / 3600:.1f} h"
    return f"{size / 86400:.1f} d"


def range_words(median: float, low: float, high: float, now: float) -> str:
    """``in 9 min (likely 4-25 min)``: the median, then the 80% interval, from ``now``."""
    when = "at the next pass" if median - now < 1 else f"in {span_words(median - now)}"
    early, late = max(0.0, low - now), max(0.0, high - now)
    if late < 1:
        return when
    if early < 1:
        return f"{when} (likely within {span_words(late)})"
    first, last = span_words(early), span_words(late)
    number, unit = first.split(" ")
    if last.endswith(" " + unit):
        return f"{when} (likely {number}-{last})"
    return f"{when} (likely {first} to {last})"
