"""A live job's lifecycle: every phase named, the legal moves in one table.

The database stores five states (``JobRow.state``); three more phases hide in
other fields, and this module is where they are named:

* **decided**: stored ``running`` with no GPU indices yet: the core chose its
  GPUs and the start is committed, the backend has not launched it;
* **stopping**: the service asked the job to stop (``cancel``, ``preempt`` or
  ``profiled``: its profiling run is over) and waits for the process to go;
* **foreign**: a job submitted to the cluster manager directly that opted in
  (its ``cwd`` is ``backend-job:<key>``): it is never enqueued by ilucid.

:func:`check_move` guards every stored transition against :data:`LEGAL`, and
an illegal one raises: a bug shows at once instead of corrupting the story.
Each move is stored with its stimulus (``TransitionRow.reason``: the decision's
sentence or what was observed), so a job's story replays why it moved.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "FOREIGN",
    "LEGAL",
    "NO_GPUS",
    "STORED_STATES",
    "IllegalTransition",
    "Phase",
    "Stimulus",
    "check_move",
    "is_foreign",
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
    STOPPING_PROFILED = "stopping: profile done"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Stimulus(StrEnum):
    """What caused a transition: a request, a decision of the core, or an observation
    of the backend. Stored beside the sentence, so a story can be read by kind."""

    SUBMIT = "request: submit"
    CANCEL = "request: cancel"
    CLAIM = "observed: foreign job"
    START = "decision: start"
    PREEMPT = "decision: preempt"
    LAUNCH = "backend: launched"
    LAUNCH_FAILED = "backend: launch failed"
    EXIT = "observed: exit"
    VANISHED = "observed: vanished"
    PROFILED = "observed: profile done"
    RESTART = "restart: not running"


_STOPPING = {
    "cancelled": Phase.STOPPING_CANCEL,
    "preempted": Phase.STOPPING_PREEMPT,
    "profiled": Phase.STOPPING_PROFILED,
}
_ENDS = frozenset({Phase.SUCCEEDED, Phase.FAILED, Phase.CANCELLED})

#: phase -> the stored states it may move to (a launch is decided -> running)
LEGAL: dict[Phase, frozenset[Phase]] = {
    Phase.NEW: frozenset({Phase.PENDING}),
    Phase.PENDING: frozenset({Phase.RUNNING, Phase.CANCELLED}),
    # launched (running), failed to launch, cancelled or preempted before launch, or
    # requeued by a restart that found nothing running
    Phase.DECIDED: frozenset({Phase.RUNNING, Phase.FAILED, Phase.CANCELLED, Phase.PENDING}),
    # ended, cancelled, preempted / vanished / profiled (back to pending)
    Phase.RUNNING: frozenset({Phase.PENDING} | _ENDS),
    Phase.STOPPING_CANCEL: _ENDS,
    Phase.STOPPING_PREEMPT: frozenset({Phase.PENDING}),
    Phase.STOPPING_PROFILED: frozenset({Phase.PENDING, Phase.SUCCEEDED, Phase.FAILED}),
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
        return _STOPPING[stopping]
    if state == Phase.RUNNING and not gpu_indices:
        return Phase.DECIDED
    return Phase(state)


def check_move(job_id: str, current: Phase, to: str) -> None:
    """Raise :class:`IllegalTransition` unless ``current`` may move to state ``to``."""
    if Phase(to) not in LEGAL[current]:
        raise IllegalTransition(f"{job_id}: {current.value or 'new'} -> {to} is not a legal move")


def is_foreign(cwd: str | None) -> bool:
    return (cwd or "").startswith(FOREIGN)
