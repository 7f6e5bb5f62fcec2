"""A training plan: the policy of a profile's training lane.

The router (:mod:`ilucid.core.policies.router`) hands a plan every job that is
not real-time inference, and asks it what the inference lane needs: which
running jobs it may preempt, and what to prepare before inference moves.
"""

from __future__ import annotations

from collections.abc import Iterable

from mypy_extensions import mypyc_attr

from ilucid.core.jobs import JobState
from ilucid.core.policies.inference_tier import InferenceTier
from ilucid.core.scheduler import PolicyBase, SchedulingPass

__all__ = ["PlanBase"]


@mypyc_attr(allow_interpreted_subclasses=True)
class PlanBase(PolicyBase):
    """A training plan: a policy of training jobs, and what the inference lane asks it.

    Its neutral answers suit a plan that holds nothing inference could take."""

    #: the inference lane beside it, when the profile has one (set by the router)
    inference: InferenceTier | None = None

    # -- the hooks every plan implements (the router calls them for training jobs) ---
    def on_submitted(self, job: JobState, now: float) -> None:
        raise NotImplementedError

    def on_preempted(self, job: JobState, now: float) -> None:
        raise NotImplementedError

    def on_finished(self, job: JobState, now: float) -> None:
        raise NotImplementedError

    def on_withdrawn(self, job: JobState, now: float) -> None:
        raise NotImplementedError

    def schedule(self, step: SchedulingPass) -> None:
        raise NotImplementedError

    def queue_position(self, job: JobState, now: float) -> int | None:
        raise NotImplementedError

    # -- what the inference lane asks ------------------------------------------------
    def bind_inference(self, tier: InferenceTier) -> None:
        """The router's inference tier: its GPUs are not the plan's to hand out."""
        self.inference = tier

    def prepare(self, step: SchedulingPass) -> None:
        """Runs before the inference lane of each pass (pools, promotions)."""
        return None

    def victims(self) -> Iterable[JobState]:
        """Running jobs the inference lane may preempt."""
        return ()

    def inference_changed(self) -> None:
        """Inference started or ended: the GPUs left for training moved."""
        return None
