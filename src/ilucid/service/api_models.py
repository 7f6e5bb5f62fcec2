"""The shapes of the API's answers on jobs: the OpenAPI schema is made from these, the
server's answers are checked against them, and the CLI's client reads answers with
them, so a schema, a server and a client cannot drift apart."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ilucid.service.progress_models import ProgressNow

__all__ = [
    "CancelAnswer",
    "Decision",
    "EstimateView",
    "ExplainAnswer",
    "FailedAttempt",
    "JobDetail",
    "JobPage",
    "JobView",
    "ModelStatus",
    "NodeView",
    "PolicySet",
    "PolicyView",
    "QueueEntry",
    "RefitAnswer",
    "Retries",
    "StoryLineView",
    "SubmitAnswer",
    "TransitionView",
]


class _Answer(BaseModel):
    # built from the server's dicts by alias ("class", "from"), read back by name too
    model_config = ConfigDict(populate_by_name=True)


class SubmitAnswer(_Answer):
    id: str = Field(description="the new job's id")


class CancelAnswer(_Answer):
    id: str
    state: str = Field(description="the job's state once the cancel was taken")


class JobView(_Answer):
    """A job as its owner (or an admin) sees it."""

    id: str
    user: str
    tenant: str
    job_class: str = Field(alias="class")
    gpus: int
    command: list[str]
    state: str
    submit_time: float
    first_start: float | None
    end_time: float | None
    exit_code: int | None
    gpu_indices: str = Field(description="the GPUs it holds, e.g. node0:0,1 ('' for none)")
    preemptions: int
    estimate_s: float | None = Field(description="the user's own estimate, seconds")
    model_estimate_s: float | None
    estimate_version: str | None
    name: str | None
    priority: int
    gpu_type: str | None
    preferred_gpu_types: list[str]
    gpu_memory_gb: float | None
    nodes: int | None
    gpus_per_node: int | None
    gpu_milli: int
    cpus: float | None
    memory_gb: float | None
    max_retries: int | None = Field(description="None: the service's default")
    attempts: int = Field(description="failed attempts retried so far")
    retry_at: float | None = Field(description="held back for a retry until then")
    progress: ProgressNow | None = Field(description="its own last progress report")


class TransitionView(_Answer):
    time: float
    from_state: str = Field(alias="from")
    to_state: str = Field(alias="to")
    stimulus: str
    stimulus_id: str
    reason: str


class JobDetail(JobView):
    """A job with every state change it went through, oldest first."""

    transitions: list[TransitionView]


class JobPage(_Answer):
    """One page of jobs, oldest submission first."""

    jobs: list[JobView]
    next_cursor: str | None = Field(
        description="pass as ?cursor= for the next page; null on the last page"
    )


class EstimateView(_Answer):
    seconds: float | None = Field(description="the estimate the scheduler ranks the job by")
    source: str = Field(description="user, the model's version, or none")
    user_s: float | None
    model_s: float | None
    version: str | None
    text: str


class Decision(_Answer):
    time: float
    action: str
    code: str
    message: str
    stimulus_id: str


class FailedAttempt(_Answer):
    time: float
    cause: str


class Retries(_Answer):
    attempts: int
    max_retries: int
    retry_at: float | None
    failed: list[FailedAttempt]


class StoryLineView(_Answer):
    time: float
    from_state: str = Field(alias="from")
    to_state: str = Field(alias="to")
    stimulus: str
    stimulus_id: str = Field(description="the request, pass or observation that caused it")
    from_phase: str
    to_phase: str
    reason: str
    move: str = Field(description='the move as a user reads it, e.g. "started"')
    detail: str
    text: str = Field(description="the move and its reason in one line")


class StartOutlook(_Answer):
    """A waiting job's expected start: a median, an 80% interval, and what they assume."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    expected_start: float = Field(description="the median, epoch s")
    expected_start_p10: float = Field(description="the 80% interval's early end, epoch s")
    expected_start_p90: float = Field(description="the 80% interval's late end, epoch s")
    assumes: str = Field(description="the range in words, and what it takes for granted")


class ExplainAnswer(_Answer):
    """Why a job is where it is: now, its estimate, and every decision and move."""

    id: str
    state: str
    why: str = Field(description="why it waits or what it does now; its state once ended")
    logs: list[str] = Field(description="what the log cap cut from each stream, as sentences")
    estimate: EstimateView
    progress: str | None = Field(description="its progress and how it counts (null: none)")
    expected_start: StartOutlook | None = Field(
        description="while it waits in the queue: when it is expected to start (null: not)"
    )
    decisions: list[Decision]
    retries: Retries
    story: list[StoryLineView] = Field(description="every move with its cause, oldest first")


class _Exact(_Answer):
    # a key the route adds but the model lacks fails loudly (in tests), never vanishes
    model_config = ConfigDict(populate_by_name=True, extra="forbid")


class QueueEntry(_Exact):
    """A pending job in policy order, with its owner and size but never its command."""

    id: str
    position: int | None = Field(description="its place in the policy's order")
    expected_start: float | None = Field(
        description="when it is expected to start, epoch s: the median of a calibrated range"
    )
    expected_start_p10: float | None = Field(
        description="the 80% interval's early end: one start in ten comes sooner, epoch s"
    )
    expected_start_p90: float | None = Field(
        description="the 80% interval's late end: one start in ten comes later, epoch s"
    )
    user: str | None
    tenant: str | None
    job_class: str | None = Field(alias="class")
    gpus: int | None
    name: str | None
    reason: str | None = Field(description="why it waits (the queue's first 200 jobs)")


class NodeView(_Exact):
    """A node with its free GPUs and who holds each GPU."""

    name: str
    gpus: int
    gpu_type: str
    gpu_memory_gb: float
    free_gpus: int
    cpus: float | None = Field(description="CPUs jobs may book (null: not said)")
    free_cpus: float | None
    memory_gb: float | None
    free_memory_gb: float | None
    gpu_jobs: list[str | None] = Field(description="per GPU, the job holding it (a + b: shared)")
    gpu_milli: list[list[int]] = Field(description="per GPU, the thousandths each holder holds")
    excluded: str | None = Field(description="why the cluster manager took it out of service")


class PolicyView(_Exact):
    policy: str
    allowed: list[str]


class PolicySet(_Exact):
    policy: str


class ModelStatus(_Exact):
    """The live duration model: its version, what it was fitted on, refit state."""

    kind: str
    version: int
    trained_at: float | None
    trained_rows: int
    finished_jobs: int
    min_jobs: int
    refit_every: int
    refit_interval_s: float
    refitting: bool
    refit_version: int | None
    last_error: str | None


class RefitAnswer(_Exact):
    status: str = Field(description="done, started, running or failed")
    version: int
    error: str | None = None
