"""A live job's lifecycle: every phase named, the legal moves in one table.

The database stores five states (``JobRow.state``) and the service's stopping
intent (``JobRow.stopping``); the phases below are read from both by
:func:`phase_of`:

* **decided**: stored ``running`` with no GPU indices yet: the core chose its
  GPUs and the start is committed, the backend has not launched it;
* **stopping: cancel / preempt / profile done**: the service asked the job's
  process to stop and waits for it to go. The intent is committed before it is
  answered or acted on, so a restart finishes it;
* **stopping: preempt, start decided**: a preempted job the core started again
  while its old process still stops: it is launched once that process is gone;
* **foreign**: a job submitted to the cluster manager directly that opted in
  (its ``cwd`` is ``backend-job:<key>``): it is never enqueued by ilucid.

:data:`LEGAL` lists every move; :class:`~ilucid.service.job_store.JobStore`
performs each through one handler per edge and refuses any other
(:class:`IllegalTransition`): a bug shows at once instead of corrupting the
story. Each move is stored with its stimulus: its kind (:class:`Stimulus`) and
the id of the one request, pass or observation that caused it.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "FOREIGN",
    "LEGAL",
    "NO_GPUS",
    "STOP_REASONS",
    "STORED_STATES",
    "Cause",
    "IllegalTransition",
    "Phase",
    "Stimulus",
    "check_move",
    "is_foreign",
    "new_stimulus_id",
    "phase_of",
]

#: ``cwd`` prefix of a job that was submitted to the cluster manager directly
FOREIGN = "backend-job:"
#: ``gpu_indices`` of a launched job that holds no GPU
NO_GPUS = "-"


class Phase(StrEnum):
    NEW = ""  # not stored yet
    PENDING = "pending"
    DECIDED = "decided"  # start committed, not launched
    RUNNING = "running"
    STOPPING_CANCEL = "stopping: cancel"
    STOPPING_PREEMPT = "stopping: preempt"
    STOPPING_RESTART = "stopping: preempt, start decided"
    STOPPING_PROFILED = "stopping: profile done"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Stimulus(StrEnum):
    """What kind of thing caused a transition: a request, a decision of the core, an
    observation of the backend, or a restart. Stored beside the sentence."""

    SUBMIT = "request: submit"
    CANCEL = "request: cancel"
    CLAIM = "observed: foreign job"
    START = "decision: start"
    PREEMPT = "decision: preempt"
    PROFILE_DUE = "decision: profile over"
    LAUNCH = "backend: launched"
    LAUNCH_FAILED = "backend: launch failed"
    EXIT = "observed: exit"
    STOPPED = "observed: stopped"
    VANISHED = "observed: vanished"
    PROFILED = "observed: profile done"
    RESTART = "restart: not running"
    ADOPTED = "restart: found running"


#: ``JobRow.stopping`` values, and the phase each makes of a running or pending job
STOP_REASONS = ("cancelled", "preempted", "profiled")


@dataclass(frozen=True, slots=True)
class Cause:
    """The stimulus of a move: its kind, and the id of the request, pass or observation
    (every row it caused carries the id, so a story groups by it)."""

    kind: Stimulus
    id: str


def new_stimulus_id(prefix: str) -> str:
    """An id for one request, pass or observation (``pass-3f9a2c1b``)."""
    return f"{prefix}-{secrets.token_hex(4)}"


_ENDS = frozenset({Phase.SUCCEEDED, Phase.FAILED, Phase.CANCELLED})
_STOP_ASKED = frozenset({Phase.STOPPING_CANCEL, Phase.STOPPING_PREEMPT})

#: phase -> the phases it may move to; each edge has one handler in the job store
LEGAL: dict[Phase, frozenset[Phase]] = {
    Phase.NEW: frozenset({Phase.PENDING}),
    Phase.PENDING: frozenset({Phase.DECIDED, Phase.CANCELLED}),
    # launched, failed to launch (or held for a retry), requeued by a restart that found
    # nothing, or asked to stop before its launch
    Phase.DECIDED: frozenset({Phase.RUNNING, Phase.FAILED, Phase.PENDING} | _STOP_ASKED),
    # ended; vanished or found gone at a restart (back to pending); asked to stop
    Phase.RUNNING: frozenset(
        {Phase.PENDING, Phase.SUCCEEDED, Phase.FAILED, Phase.STOPPING_PROFILED} | _STOP_ASKED
    ),
    # an acknowledged cancel ends cancelled, whatever the process did meanwhile
    Phase.STOPPING_CANCEL: frozenset({Phase.CANCELLED}),
    Phase.STOPPING_PREEMPT: frozenset(
        {Phase.PENDING, Phase.STOPPING_RESTART, Phase.STOPPING_CANCEL}
    ),
    Phase.STOPPING_RESTART: frozenset(
        {Phase.DECIDED, Phase.STOPPING_PREEMPT, Phase.STOPPING_CANCEL}
    ),
    Phase.STOPPING_PROFILED: frozenset(
        {Phase.PENDING, Phase.SUCCEEDED, Phase.FAILED} | _STOP_ASKED
    ),
    Phase.SUCCEEDED: frozenset(),
    Phase.FAILED: frozenset(),
    Phase.CANCELLED: frozenset(),
}


#: the states ``JobRow.state`` holds: pending, running, succeeded, failed, cancelled
STORED_STATES: tuple[str, str, str, str, str] = (
    Phase.PENDING.value,
    Phase.RUNNING.value,
    Phase.SUCCEEDED.value,
    Phase.FAILED.value,
    Phase.CANCELLED.value,
)


class IllegalTransition(RuntimeError):
    """A move :data:`LEGAL` does not allow: a bug in the service, never user input."""


def phase_of(state: str, gpu_indices: str, stopping: str | None = None) -> Phase:
    """The phase of a stored job (``stopping``: why the service is stopping it)."""
    if stopping is not None and state in (Phase.RUNNING, Phase.PENDING):
        if stopping == "preempted" and state == Phase.RUNNING:
            return Phase.STOPPING_RESTART
        if stopping == "cancelled":
            return Phase.STOPPING_CANCEL
        if stopping == "preempted":
            return Phase.STOPPING_PREEMPT
        if stopping == "profiled":
            return Phase.STOPPING_PROFILED
        raise ValueError(f"stopping {stopping!r} is not one of {', '.join(STOP_REASONS)}")
    if state == Phase.RUNNING and not gpu_indices:
        return Phase.DECIDED
    return Phase(state)


def check_move(job_id: str, current: Phase, to: Phase) -> None:
    """Raise :class:`IllegalTransition` unless ``current`` may move to ``to``."""
    if to not in LEGAL[current]:
        raise IllegalTransition(f"{job_id}: {current.value or 'new'} -> {to} is not a legal move")


def is_foreign(cwd: str | None) -> bool:
    return (cwd or "").startswith(FOREIGN)
