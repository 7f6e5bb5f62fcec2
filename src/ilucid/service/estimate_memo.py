"""Duration estimates remembered by what they are made from.

An estimate is a function of the model's version, the number of finished jobs
(the fallback's note counts them), the user's record of stated estimates (the
note's clause) and the job's feature row: its request and what finished jobs say
of its user and size. A duration model's explanation costs
milliseconds, and a burst of submissions asks for the same few rows over and
over; so the row is the key, and an estimate is made once per row per model.
A finished job or a new model changes the key, never the answer for a key.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Hashable

from ilucid.core import JobSpec
from ilucid.estimators.live import DurationEstimate
from ilucid.service.duration_keeper import DurationKeeper

__all__ = ["EstimateMemo"]


class EstimateMemo:
    """``durations.estimate``, remembered for the ``size`` most recent keys."""

    def __init__(self, durations: DurationKeeper, size: int = 1024) -> None:
        self.durations = durations
        self.size = size
        self._known: OrderedDict[Hashable, DurationEstimate] = OrderedDict()
        self._lock = threading.Lock()

    def estimate(self, job: JobSpec) -> DurationEstimate:
        live = self.durations.live
        # read before the row: a model installed meanwhile files its estimate under the
        # older version, which no later look-up asks for
        version, finished = live.version, live.finished_jobs
        trust = self.durations.trust.trust(job.user)  # the note's clause on the user's record
        row = live.features(job)
        features = tuple((name, _comparable(v)) for name, v in row.items())
        key = (version, finished, job.user, trust, features)
        with self._lock:
            known = self._known.get(key)
            if known is not None:
                self._known.move_to_end(key)
                return known
        made = self.durations.estimate(job)
        with self._lock:
            self._known[key] = made
            if len(self._known) > self.size:
                self._known.popitem(last=False)
        return made


def _comparable(value: object) -> object:
    """NaN (an unknown feature) equals itself only as a marker."""
    return "nan" if isinstance(value, float) and math.isnan(value) else value
