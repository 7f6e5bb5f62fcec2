"""What a scheduling policy is to the core: every hook it may be called with.

:class:`Policy` declares each hook the core calls; :class:`PolicyBase` gives the
optional ones their neutral behaviour, so nothing is probed at run time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from mypy_extensions import mypyc_attr

from ilucid.core.decision import Reason
from ilucid.core.jobs import JobState
from ilucid.core.model import Forecast, ProfileReport
from ilucid.core.reason_codes import ReasonCode

if TYPE_CHECKING:  # the pass hands itself to Policy.schedule; no import at run time
    from ilucid.core.scheduler import SchedulingPass

__all__ = ["Policy", "PolicyBase"]


class Policy(Protocol):
    """A scheduling policy: keeps its own ordering structures, decides during passes.

    Every hook the core calls is declared here; :class:`PolicyBase` gives the
    optional ones their neutral behaviour, so nothing is probed at run time.
    """

    name: str

    def on_submitted(self, job: JobState, now: float) -> None: ...

    def on_started(self, job: JobState, now: float) -> None: ...

    def on_adopted(self, job: JobState, now: float) -> None:
        """A pending job found already running (a service restart) left the queue."""
        ...

    def on_preempted(self, job: JobState, now: float) -> None: ...

    def on_finished(self, job: JobState, now: float) -> None: ...

    def on_withdrawn(self, job: JobState, now: float) -> None:
        """A pending job left without running (cancelled)."""
        ...

    def on_profiled(self, job: JobState, report: ProfileReport, now: float) -> None:
        """A profiling run ended with ``report`` (profiling policies only)."""
        ...

    def on_forecast(self, forecast: Forecast, now: float) -> None:
        """A new load forecast for the policy's tuner, if it has one."""
        ...

    def schedule(self, step: SchedulingPass) -> None: ...

    def next_wakeup(self, now: float) -> float | None:
        """Earliest time the policy wants a pass without any new stimulus, if any."""
        ...

    def queue_position(self, job: JobState, now: float) -> int | None:
        """1-based position of a pending job in the policy's order."""
        ...

    def pending_order(self) -> Iterable[JobState] | None:
        """Pending jobs in the order the policy serves them; None: oldest first."""
        ...

    def wait_code(self, job: JobState) -> ReasonCode | None:
        """The policy's own countable code for why ``job`` waits; None: the core's."""
        ...

    def explain_wait(self, job: JobState, now: float) -> str | None:
        """The policy's own sentence for why ``job`` waits; None: the core's."""
        ...

    @property
    def tuner_log(self) -> Sequence[object]:
        """Actions the policy's tuner took, each with the forecast behind it."""
        ...


@mypyc_attr(
    allow_interpreted_subclasses=True
)  # policies written outside the package (a site's own) subclass it
class PolicyBase:
    """Neutral behaviour of the optional hooks of :class:`Policy`."""

    name: str

    def on_started(self, job: JobState, now: float) -> None:
        raise NotImplementedError

    def on_adopted(self, job: JobState, now: float) -> None:
        self.on_started(job, now)

    def on_profiled(self, job: JobState, report: ProfileReport, now: float) -> None:
        raise ValueError(f"policy {self.name} does not profile jobs")

    def on_forecast(self, forecast: Forecast, now: float) -> None:
        return None

    def next_wakeup(self, now: float) -> float | None:
        return None

    def pending_order(self) -> Iterable[JobState] | None:
        return None

    def _reason(self, job: JobState) -> Reason | None:
        """The policy's own reason a waiting job waits (None: the scheduler's words).
        ``wait_code`` and ``explain_wait`` read the same reason: its code and its
        sentence."""
        return None

    def wait_code(self, job: JobState) -> ReasonCode | None:
        reason = self._reason(job)
        return reason.code if reason is not None else None

    def explain_wait(self, job: JobState, now: float) -> str | None:
        reason = self._reason(job)
        return reason.message if reason is not None else None

    @property
    def tuner_log(self) -> Sequence[object]:
        return ()
