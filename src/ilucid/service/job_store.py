"""Jobs in the database: ids, accepted jobs, and every move of their lifecycle.

The store is the one place that writes a job's state, so every stored move is
checked against the lifecycle's table and written with its stimulus. Ids are
numbered on from the newest in the database, which other replicas share.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from ilucid.core import JobClass, JobSpec
from ilucid.estimators.live import DurationEstimate
from ilucid.service.commit_log import log_after_commit
from ilucid.service.db import JobRow, TransitionRow
from ilucid.service.lifecycle import (
    LEGAL,
    STORED_STATES,
    Cause,
    IllegalTransition,
    Phase,
    Stimulus,
    check_move,
    new_stimulus_id,
    phase_of,
)
from ilucid.service.story_rows import add_story_line

__all__ = [
    "ENDED",
    "TRANSITIONS",
    "JobRequest",
    "JobStore",
    "MoveDetail",
    "StoryLine",
    "phase",
    "rows_by_id",
    "spec_of",
]

logger = logging.getLogger(__name__)

PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED = STORED_STATES
ENDED = frozenset({SUCCEEDED, FAILED, CANCELLED})


@dataclass(frozen=True, slots=True)
class JobRequest:
    command: Sequence[str]
    gpus: int = 1
    job_class: str = "training"
    user: str = "default"
    tenant: str = "default"
    cwd: str | None = None
    estimate_s: float | None = None
    checkpoint_s: float | None = None
    priority: int = 0
    run_as: str | None = None  # the Unix user the job runs as (its token's); None: default
    name: str | None = None
    gpu_type: str | None = None  # hard: only GPUs of this type
    preferred_gpu_types: tuple[str, ...] = ()  # soft, best first
    gpu_memory_gb: float | None = None  # per GPU
    nodes: int | None = None  # a gang of nodes x gpus_per_node
    gpus_per_node: int | None = None
    gpu_milli: int = 1000  # a share of one GPU (1000: whole GPUs)
    cpus: float | None = None
    memory_gb: float | None = None
    max_retries: int | None = None  # retries after a failed launch or a vanish (None: default)
    cloud: bool = True  # may burst to a paid pool (``--no-cloud``: False)


@dataclass(frozen=True, slots=True)
class StoryLine:
    """One move of a job: when, from and to which phase, what caused it, and why."""

    time: float
    from_state: str
    to_state: str
    stimulus: str
    reason: str
    stimulus_id: str = ""
    from_phase: str = ""
    to_phase: str = ""

    def move(self) -> str:
        """The move as a user reads it: ``pending -> starting``, ``started``. The
        lifecycle's internal ``decided`` (a start committed, not launched yet) reads
        ``starting``, and its launch, which leaves the stored state ``running``, reads
        ``started``; other phases keep their names (``running -> stopping: cancel``)."""
        before = self.from_phase or self.from_state or "new"
        after = self.to_phase or self.to_state
        if after == RUNNING and (before == Phase.DECIDED or self.stimulus == _LAUNCHED):
            return "started"
        return f"{_user_phase(before)} -> {_user_phase(after)}"

    def detail(self) -> str:
        """The reason, less what :meth:`move` says: a launch's ``launched on GPUs 0``
        reads ``on GPUs 0`` after ``started``."""
        if self.move() == "started" and self.reason.startswith("launched "):
            return self.reason.removeprefix("launched ")
        return self.reason

    def sentence(self) -> str:
        cause = f" [{self.stimulus}]" if self.stimulus else ""
        return f"{self.move()}{cause}: {self.detail()}"


#: the stimulus of a launch (older stories stored it as ``running -> running``)
_LAUNCHED = Stimulus.LAUNCH.value


def _user_phase(phase: str) -> str:
    return "starting" if phase == Phase.DECIDED else phase


@dataclass(frozen=True, slots=True)
class MoveDetail:
    """What a move carries besides its target: a launch's GPUs, an end's exit code and
    time, a start's profiling limit, a failed attempt's retry time."""

    gpus: str | None = None
    exit_code: int | None = None
    limit_s: float | None = None
    retry_at: float | None = None
    #: when an end happened, where it was before the move (a job that ended while the
    #: service was down): its end time, not the restart's
    ended_at: float | None = None


_Handler = Callable[[JobRow, float, MoveDetail, Phase], None]


def _decide(row: JobRow, now: float, detail: MoveDetail, _to: Phase) -> None:
    row.state = RUNNING
    row.gpu_indices = ""  # launched once this is committed
    if row.first_start is None:
        row.first_start = now
    row.profile_until = None if detail.limit_s is None else now + detail.limit_s
    row.retry_at = None


def _launch(row: JobRow, _now: float, detail: MoveDetail, _to: Phase) -> None:
    if not detail.gpus:
        raise IllegalTransition(f"{row.id}: a launch must name its GPUs")
    row.gpu_indices = detail.gpus


def _requeue(row: JobRow, _now: float, detail: MoveDetail, _to: Phase) -> None:
    row.state = PENDING
    row.gpu_indices = ""
    row.profile_until = None
    row.stopping = None
    if detail.retry_at is not None:  # a failed attempt held back for its retry
        row.attempts += 1
        row.retry_at = detail.retry_at


def _end(row: JobRow, now: float, detail: MoveDetail, to: Phase) -> None:
    row.state = to.value
    row.end_time = now if detail.ended_at is None else min(now, detail.ended_at)
    if detail.exit_code is not None:
        row.exit_code = detail.exit_code
    row.stopping = None
    row.retry_at = None
    row.profile_until = None


def _ask_cancel(row: JobRow, _now: float, _detail: MoveDetail, _to: Phase) -> None:
    row.stopping = "cancelled"
    row.profile_until = None


def _preempt(row: JobRow, _now: float, _detail: MoveDetail, _to: Phase) -> None:
    row.state = PENDING
    row.gpu_indices = ""
    row.preemptions += 1
    row.profile_until = None
    row.stopping = "preempted"


def _ask_profiled(row: JobRow, _now: float, _detail: MoveDetail, _to: Phase) -> None:
    row.stopping = "profiled"


def _stopped(row: JobRow, _now: float, _detail: MoveDetail, _to: Phase) -> None:
    row.stopping = None


#: (from, to) -> the one handler that writes every field the move changes
TRANSITIONS: dict[tuple[Phase, Phase], _Handler] = {
    (Phase.PENDING, Phase.DECIDED): _decide,
    (Phase.PENDING, Phase.CANCELLED): _end,
    (Phase.DECIDED, Phase.RUNNING): _launch,
    (Phase.DECIDED, Phase.FAILED): _end,
    (Phase.DECIDED, Phase.PENDING): _requeue,
    (Phase.DECIDED, Phase.STOPPING_CANCEL): _ask_cancel,
    (Phase.DECIDED, Phase.STOPPING_PREEMPT): _preempt,
    (Phase.RUNNING, Phase.PENDING): _requeue,
    (Phase.RUNNING, Phase.SUCCEEDED): _end,
    (Phase.RUNNING, Phase.FAILED): _end,
    (Phase.RUNNING, Phase.STOPPING_CANCEL): _ask_cancel,
    (Phase.RUNNING, Phase.STOPPING_PREEMPT): _preempt,
    (Phase.RUNNING, Phase.STOPPING_PROFILED): _ask_profiled,
    (Phase.STOPPING_CANCEL, Phase.CANCELLED): _end,
    (Phase.STOPPING_PREEMPT, Phase.PENDING): _stopped,
    (Phase.STOPPING_PREEMPT, Phase.STOPPING_RESTART): _decide,
    (Phase.STOPPING_PREEMPT, Phase.STOPPING_CANCEL): _ask_cancel,
    (Phase.STOPPING_RESTART, Phase.DECIDED): _stopped,
    (Phase.STOPPING_RESTART, Phase.STOPPING_PREEMPT): _preempt,
    (Phase.STOPPING_RESTART, Phase.STOPPING_CANCEL): _ask_cancel,
    (Phase.STOPPING_PROFILED, Phase.PENDING): _requeue,
    (Phase.STOPPING_PROFILED, Phase.SUCCEEDED): _end,
    (Phase.STOPPING_PROFILED, Phase.FAILED): _end,
    (Phase.STOPPING_PROFILED, Phase.STOPPING_CANCEL): _ask_cancel,
    (Phase.STOPPING_PROFILED, Phase.STOPPING_PREEMPT): _preempt,
}
# the handlers and the lifecycle's table describe the same moves, or the import fails
_EDGES = {(a, b) for a, targets in LEGAL.items() for b in targets if a is not Phase.NEW}
if set(TRANSITIONS) != _EDGES:  # pragma: no cover - a bug shows at import
    raise ImportError(f"job store handlers differ from LEGAL: {set(TRANSITIONS) ^ _EDGES}")


def phase(row: JobRow) -> Phase:
    """The lifecycle phase of a stored job."""
    return phase_of(row.state, row.gpu_indices, row.stopping)


class JobStore:
    """Persistence and ids: accepted jobs and every move of their lifecycle, each
    performed here (:meth:`transition`), checked and explained."""

    def __init__(self, engine: Engine, clock: Callable[[], float]) -> None:
        self.engine = engine
        self.clock = clock
        self._last_number = 0
        self.catch_up_job_numbers()

    def new_job_id(self) -> str:
        self._last_number += 1
        return f"j{self._last_number:06d}"

    def catch_up_job_numbers(self) -> None:
        """Job ids continue from the newest in the database (shared with other replicas)."""
        with Session(self.engine) as session:
            last = session.scalars(select(JobRow.id).order_by(JobRow.id.desc()).limit(1)).first()
        if last and last[1:].isdigit():
            self._last_number = max(self._last_number, int(last[1:]))

    def add(
        self,
        session: Session,
        request: JobRequest,
        job_class: JobClass,
        estimate: DurationEstimate,
        now: float,
        cause: Cause | None = None,
    ) -> JobRow:
        """Store an accepted job as pending (committed by the caller)."""
        row = JobRow(
            id=self.new_job_id(),
            user=request.user,
            tenant=request.tenant,
            job_class=job_class.value,
            gpus=request.gpus,
            command=json.dumps(list(request.command)),
            cwd=request.cwd,
            submit_time=now,
            estimate_s=request.estimate_s,
            model_estimate_s=estimate.seconds,
            estimate_version=estimate.version,
            estimate_note=estimate.note,
            checkpoint_s=request.checkpoint_s,
            cloud=request.cloud,
            priority=request.priority,
            run_as=request.run_as,
            name=request.name,
            gpu_type=request.gpu_type,
            preferred_gpu_types=(
                json.dumps(list(request.preferred_gpu_types))
                if request.preferred_gpu_types
                else None
            ),
            gpu_memory_gb=request.gpu_memory_gb,
            nodes=request.nodes,
            gpus_per_node=request.gpus_per_node,
            gpu_milli=request.gpu_milli if request.gpu_milli != 1000 else None,
            cpus=request.cpus,
            memory_gb=request.memory_gb,
            max_retries=request.max_retries,
        )
        return self.insert(
            session, row, cause or Cause(Stimulus.SUBMIT, new_stimulus_id("submit")), "submitted"
        )

    def insert(self, session: Session, row: JobRow, cause: Cause, reason: str) -> JobRow:
        """The move new -> pending: an accepted job (a submission, or a foreign job that
        opted in) stored with its first story line (committed by the caller)."""
        row.state = PENDING
        row.gpu_indices = ""
        row.preemptions = 0
        row.attempts = 0
        row.stopping = None
        session.add(row)
        self._story(session, row, Phase.NEW, Phase.PENDING, "", cause, reason, row.submit_time)
        return row

    def transition(
        self,
        session: Session,
        row: JobRow,
        to: Phase,
        cause: Cause,
        reason: str,
        detail: MoveDetail | None = None,
    ) -> None:
        """Perform one move of the lifecycle: its handler writes every field the move
        changes, and the move is stored with its stimulus (in the caller's transaction,
        so the fields and the story commit together)."""
        current = phase(row)
        check_move(row.id, current, to)
        before = row.state
        now = self.clock()
        TRANSITIONS[(current, to)](row, now, detail or MoveDetail(), to)
        after = phase(row)
        if after is not to:  # a handler that misses its target is a bug
            raise IllegalTransition(f"{row.id}: {current} -> {to} left the job {after}")
        self._story(session, row, current, to, before, cause, reason, now)

    def clear_retry(self, row: JobRow) -> None:
        """A held job whose retry is due joins the queue again (no move: it was pending)."""
        row.retry_at = None

    def end_profiling(self, row: JobRow) -> None:
        """A profiling run under a policy that no longer profiles simply runs on."""
        row.profile_until = None

    @staticmethod
    def _story(
        session: Session,
        row: JobRow,
        current: Phase,
        to: Phase,
        before: str,
        cause: Cause,
        reason: str,
        now: float,
    ) -> None:
        """The move's story line, in the caller's transaction; its log line (with the
        job's id and the stimulus's) is written once that transaction commits."""
        log_after_commit(
            session,
            logger,
            logging.INFO,
            "%s: %s -> %s: %s (%s, %s)",
            row.id,
            current.value or "new",
            to.value,
            reason,
            cause.kind.value,
            cause.id,
            extra={"job_id": row.id, "stimulus_id": cause.id},
        )
        add_story_line(
            session,
            {
                "job_id": row.id,
                "time": now,
                # a launch is stored from "decided": the history counts a job's GPUs
                # from its start decision, not twice
                "from_state": Phase.DECIDED.value if to is Phase.RUNNING else before,
                "to_state": row.state,
                "reason": reason,
                "stimulus": cause.kind.value,
                "stimulus_id": cause.id,
                "from_phase": current.value,
                "to_phase": to.value,
            },
        )

    def story(self, job_id: str) -> list[StoryLine]:
        """Every move of the job, oldest first: why it is where it is."""
        with Session(self.engine) as session:
            rows = session.scalars(
                select(TransitionRow)
                .where(TransitionRow.job_id == job_id)
                .order_by(TransitionRow.id)
            ).all()
            return [
                StoryLine(
                    t.time,
                    t.from_state,
                    t.to_state,
                    t.stimulus,
                    t.reason,
                    t.stimulus_id,
                    t.from_phase,
                    t.to_phase,
                )
                for t in rows
            ]


def rows_by_id(session: Session, ids: Sequence[str], chunk: int = 500) -> dict[str, JobRow]:
    """The stored jobs of ``ids`` in a few queries (``chunk`` ids each), not one per id:
    a pass that touches hundreds of jobs at 10,000 nodes must not pay a round trip and
    an autoflush for each."""
    found: dict[str, JobRow] = {}
    unique = list(dict.fromkeys(ids))
    with session.no_autoflush:
        for first in range(0, len(unique), chunk):
            part = unique[first : first + chunk]
            for row in session.scalars(select(JobRow).where(JobRow.id.in_(part))):
                found[row.id] = row
    return found


def spec_of(row: JobRow) -> JobSpec:
    """The core's view of a stored job: what it asked for is what the placer honours."""
    # here, not at the top: this function's own edit (the rest of the module moves apart)
    from ilucid.service.estimate_trust import stated_of, weight_of

    shape = (
        (row.gpus_per_node,) * row.nodes
        if row.nodes is not None and row.gpus_per_node is not None
        else None
    )
    preferred = json.loads(row.preferred_gpu_types) if row.preferred_gpu_types else []
    return JobSpec(
        row.id,
        row.submit_time,
        row.gpus,
        0.0,  # the true duration is unknown to a live scheduler
        job_class=JobClass(row.job_class),
        tenant=row.tenant,
        user=row.user,
        priority=row.priority,
        # the live duration model's (or its median), and the user's own weighted by their
        # record (written into the note at submission): ilucid.service.estimate_trust
        estimate=row.model_estimate_s,
        checkpoint_s=row.checkpoint_s,
        gpu_type=row.gpu_type,
        gpu_memory_gb=row.gpu_memory_gb,
        gpu_milli=row.gpu_milli or 1000,
        shape=shape,
        preferred_gpu_types=tuple(preferred),
        cpus=row.cpus,
        memory_gb=row.memory_gb,
        cloud=row.cloud is not False,
        stated_estimate=stated_of(row.estimate_s),
        stated_weight=weight_of(row.estimate_note),
    )
