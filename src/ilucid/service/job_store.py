"""Jobs in the database: ids, accepted jobs, and every move of their lifecycle.

The store is the one place that writes a job's state, so every stored move is
checked against the lifecycle's table and written with its stimulus. Ids are
numbered on from the newest in the database, which other replicas share.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from ilucid.core import JobClass, JobSpec
from ilucid.estimators.live import DurationEstimate
from ilucid.service.db import JobRow, TransitionRow
from ilucid.service.lifecycle import STORED_STATES, Phase, Stimulus, check_move, phase_of

__all__ = ["ENDED", "JobRequest", "JobStore", "StoryLine", "spec_of"]

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


@dataclass(frozen=True, slots=True)
class StoryLine:
    """One move of a job: when, from and to which phase, what caused it, and why."""

    time: float
    from_state: str
    to_state: str
    stimulus: str
    reason: str

    def sentence(self) -> str:
        cause = f" [{self.stimulus}]" if self.stimulus else ""
        return f"{self.from_state or 'new'} -> {self.to_state}{cause}: {self.reason}"


class JobStore:
    """Persistence and ids: accepted jobs and their checked, explained transitions."""

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
    ) -> JobRow:
        """Store an accepted job as pending (committed by the caller)."""
        job_id = self.new_job_id()
        row = JobRow(
            id=job_id,
            user=request.user,
            tenant=request.tenant,
            job_class=job_class.value,
            gpus=request.gpus,
            command=json.dumps(list(request.command)),
            cwd=request.cwd,
            state=PENDING,
            submit_time=now,
            estimate_s=request.estimate_s,
            model_estimate_s=estimate.seconds,
            estimate_version=estimate.version,
            estimate_note=estimate.note,
            checkpoint_s=request.checkpoint_s,
            priority=request.priority,
            run_as=request.run_as,
            gpu_indices="",
            preemptions=0,
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
            attempts=0,
            max_retries=request.max_retries,
        )
        session.add(row)
        session.add(
            TransitionRow(
                job_id=job_id,
                time=now,
                from_state="",
                to_state=PENDING,
                reason="submitted",
                stimulus=Stimulus.SUBMIT.value,
            )
        )
        return row

    def move(
        self, session: Session, row: JobRow, state: str, stimulus: Stimulus, reason: str
    ) -> None:
        """Move ``row`` to ``state`` (checked against the lifecycle's table), stored with
        its stimulus and sentence."""
        check_move(row.id, phase_of(row.state, row.gpu_indices), state)
        session.add(
            TransitionRow(
                job_id=row.id,
                time=self.clock(),
                from_state=row.state,
                to_state=state,
                reason=reason,
                stimulus=stimulus.value,
            )
        )
        row.state = state

    def launched(self, session: Session, row: JobRow, gpu_indices: str) -> None:
        """The launch ends the hidden "decided" phase (stored: running, no GPUs yet)."""
        check_move(row.id, Phase.DECIDED, RUNNING)
        row.gpu_indices = gpu_indices
        session.add(
            TransitionRow(
                job_id=row.id,
                time=self.clock(),
                from_state=Phase.DECIDED.value,
                to_state=RUNNING,
                reason=f"launched on GPUs {gpu_indices}",
                stimulus=Stimulus.LAUNCH.value,
            )
        )

    def story(self, job_id: str) -> list[StoryLine]:
        """Every move of the job, oldest first: why it is where it is."""
        with Session(self.engine) as session:
            rows = session.scalars(
                select(TransitionRow)
                .where(TransitionRow.job_id == job_id)
                .order_by(TransitionRow.id)
            ).all()
            return [StoryLine(t.time, t.from_state, t.to_state, t.stimulus, t.reason) for t in rows]


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
        stated_estimate=stated_of(row.estimate_s),
        stated_weight=weight_of(row.estimate_note),
    )
