"""Why-pending from a policy's own reason per waiting job (one Reason, two readings)."""

from __future__ import annotations

from ilucid.core.decision import Reason
from ilucid.core.jobs import JobState

__all__ = ["ReasonedWaits"]


class ReasonedWaits:
    """``wait_code`` and ``explain_wait`` read the same reason: its code and its sentence."""

    def _reason(self, job: JobState) -> Reason | None:
        raise NotImplementedError

    def wait_code(self, job: JobState) -> str | None:
        reason = self._reason(job)
        return reason.code if reason is not None else None

    def explain_wait(self, job: JobState, now: float) -> str | None:
        reason = self._reason(job)
        return reason.message if reason is not None else None
