"""A user's stated run time, weighed against the model's estimate and dropped once outlived.

A user may state how long a job runs. The driver measures how accurate each user's
statements have been and passes a weight in [0, 1] with the job (the live service:
:mod:`ilucid.service.estimate_trust`). The estimate a policy ranks by blends the two
geometrically, because run times are compared by ratio (a 2x error either way is
the same error)::

    exp(w * ln(stated) + (1 - w) * ln(model))

A statement is a claim that the job ends by then. Once the job has run past the
claim (or past the blend, when the claim is the longer one) the blend no longer
holds: the longer of the two estimates stands while the job has not outlived it
too, then the policy's own rule for outlived estimates. A job stating 1 s therefore
keeps the rank its statement bought for one second of run, once.
"""

from __future__ import annotations

import math

__all__ = ["MIN_ESTIMATE_S", "blend", "claim_ends", "standing"]

#: the shortest estimate counted, s (the service refuses shorter statements); a model
#: estimate of 0 s is read as this too, so logarithms stay finite
MIN_ESTIMATE_S = 1.0


def blend(stated: float, model: float, weight: float) -> float:
    """The geometric blend ``exp(w ln stated + (1 - w) ln model)``, both at least 1 s."""
    stated, model = max(stated, MIN_ESTIMATE_S), max(model, MIN_ESTIMATE_S)
    if weight >= 1.0:
        return stated
    if weight <= 0.0:
        return model
    return math.exp(weight * math.log(stated) + (1.0 - weight) * math.log(model))


def claim_ends(stated: float, model: float, weight: float) -> float:
    """Seconds of run after which the blend no longer holds: the stated time when it is
    the shorter (the claim is then proved false), else the blend (the model's estimate,
    the shorter, is then outlived)."""
    return min(max(stated, MIN_ESTIMATE_S), blend(stated, model, weight))


def standing(stated: float, model: float, ran: float) -> float | None:
    """The estimate that still stands after ``ran`` seconds once the blend is outlived:
    the longer of the two while the job has not outlived it, else None (both are)."""
    longest = max(stated, model, MIN_ESTIMATE_S)
    return longest if longest > ran else None
