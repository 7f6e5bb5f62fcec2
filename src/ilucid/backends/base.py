"""The one small protocol every backend implements (local, Slurm, Kubernetes).

A backend is eventually consistent: ``observe`` reports what is really there,
``start``/``stop`` ask for a change and return at once; the service's
reconcile loop compares the two on every pass, so a missed event heals on
the next one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, runtime_checkable

from ilucid.core import Cluster

__all__ = [
    "Backend",
    "BackendUnavailable",
    "Cancels",
    "Capabilities",
    "CapsLogs",
    "ChecksSubmissions",
    "ClaimsForeignJobs",
    "ExplainsWaits",
    "ForeignJob",
    "ForgetsEndedJobs",
    "ListsProcesses",
    "NotAllowed",
    "Observation",
    "ObservedJob",
    "PowerState",
    "PowersNodes",
    "ProcessState",
    "PublishesReasons",
    "QueuesJobs",
    "ReportsExcludedNodes",
    "RunsJobsAsUsers",
    "SharesGpus",
]


class BackendUnavailable(RuntimeError):
    """The cluster manager did not answer (e.g. slurmctld restarting); retried next pass."""


class NotAllowed(ValueError):
    """A submission whose account may not do what it asks (enter its directory, run
    without a Unix account): the API answers 403, where any other refusal of a
    backend's ``check`` is a conflict with what this cluster can run (409)."""


class ProcessState(StrEnum):
    RUNNING = "running"
    STOPPING = "stopping"  # asked to stop, not gone yet
    HELD = "held"  # queued in the backend, waiting for ilucid to release it (Slurm)
    EXITED = "exited"
    LOST = "lost"  # gone without a recorded exit (e.g. killed with the host)


@dataclass(frozen=True, slots=True)
class ObservedJob:
    job_id: str
    state: ProcessState
    gpus: tuple[int, ...] = ()
    exit_code: int | None = None
    #: where it runs: (node name, GPUs there) per node; empty when the backend cannot say
    parts: tuple[tuple[str, int], ...] = ()
    #: why a job ilucid started is LOST or HELD when ilucid did not stop it (its node went
    #: down and the cluster manager requeued it, ...): for the job's story
    reason: str | None = None
    #: the job's own last progress report, (step, total) (``docs/progress.md``); None
    #: when it reported none or the backend does not read reports
    progress: tuple[float, float] | None = None
    #: when an EXITED job ended (wall-clock seconds), where the backend recorded it (the
    #: local runner's exit file); None when it cannot say
    ended_at: float | None = None


@dataclass(frozen=True, slots=True)
class ForeignJob:
    """A job created in the cluster manager directly that opted in to ilucid (a Slurm job
    with ``--comment=ilucid``, a Kubernetes Job labelled for an ilucid queue)."""

    key: str  # the manager's own id: Slurm job id, Kubernetes namespace/name
    user: str
    gpus: int
    job_class: str
    name: str
    estimate_s: float | None = None
    #: the GPU type it asks for (a node selector or required affinity on the GPU product)
    gpu_type: str | None = None
    #: a gang of ``nodes`` pods of ``gpus_per_node`` GPUs each (JobSet, PyTorchJob,
    #: an indexed Job); None when its pods ask for different GPU counts
    nodes: int | None = None
    gpus_per_node: int | None = None
    #: the CPUs and memory (GB) it asks of each node it uses (Slurm ``--mem``, Kubernetes
    #: container requests): what ilucid books for it; None when it asks for none
    cpus: float | None = None
    memory_gb: float | None = None


@dataclass(frozen=True, slots=True)
class Observation:
    cluster: Cluster
    jobs: Mapping[str, ObservedJob] = field(default_factory=dict)


class Backend(Protocol):
    name: str

    def observe(self) -> Observation: ...

    def start(
        self,
        job_id: str,
        command: Sequence[str],
        gpus: int,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        placement: Sequence[tuple[str, int]] | None = None,
        run_as: str | None = None,
        cpus: float | None = None,
        memory_gb: float | None = None,
    ) -> tuple[int, ...] | None:
        """Launch; returns the GPU indices used, or None if they are not free yet.

        ``placement`` is the core's choice, (node name, GPUs there) per node; a
        backend honours it (local GPU ranges, Slurm ``--nodelist``, Kubernetes
        node affinity) so what runs is what the core decided. ``run_as`` is the
        Unix user the job's token maps to: a backend that runs jobs itself as root
        runs the job as that user (or its default unprivileged one), never as root.
        ``cpus`` and ``memory_gb`` are what the job needs on each node (None: not
        stated), the amounts the core booked there: a backend whose manager allocates
        CPUs and memory asks it for exactly these (Slurm ``--cpus-per-task``/``--mem``).
        """
        ...

    def stop(self, job_id: str) -> None:
        """Preempt or cancel: ask the job to stop (it may checkpoint first)."""
        ...

    def logs(self, job_id: str, stream: str = "stdout", tail_bytes: int = 65536) -> str: ...


# -- optional capabilities ------------------------------------------------------------------
# A backend declares what it can do beyond ``Backend`` by having these methods; the
# service finds them once when it starts (:class:`Capabilities`), and mypy checks each
# call against the signature declared here.


@runtime_checkable
class ChecksSubmissions(Protocol):
    def check(self, command: Sequence[str], cwd: str | None, run_as: str | None = None) -> None:
        """Refuse (ValueError) at submission what could only fail at launch; a directory
        the job's account ``run_as`` cannot enter is :class:`NotAllowed`."""
        ...


@runtime_checkable
class RunsJobsAsUsers(Protocol):
    def needs_account(self) -> bool:
        """Whether every job must name the Unix identity it runs as (``run_as``): the
        backend switches users (it is root) and never runs a job as itself."""
        ...


@runtime_checkable
class CapsLogs(Protocol):
    def log_cuts(self, job_id: str) -> dict[str, int]:
        """Bytes cut from each of the job's logs by the size cap (only cut streams)."""
        ...


@runtime_checkable
class QueuesJobs(Protocol):
    def enqueue(
        self,
        job_id: str,
        command: Sequence[str],
        gpus: int,
        cwd: str | None = None,
        job_class: str = "training",
        cpus: float | None = None,
        memory_gb: float | None = None,
        run_as: str | None = None,
    ) -> None:
        """Make the cluster manager's own queue hold the job (Slurm: a held sbatch job),
        asking it for ``cpus`` and ``memory_gb`` on each node when they are stated, as
        the Unix account ``run_as`` when the backend submits as users (root)."""
        ...


@runtime_checkable
class Cancels(Protocol):
    def cancel(self, job_id: str) -> None:
        """Remove the job from the cluster manager, queued or running."""
        ...


@runtime_checkable
class ClaimsForeignJobs(Protocol):
    def foreign_jobs(self) -> list[ForeignJob]:
        """Jobs submitted to the cluster manager directly that opted in to ilucid."""
        ...

    def claim(self, foreign: ForeignJob, job_id: str) -> None:
        """Mark a foreign job as ilucid's ``job_id`` (once: a claimed job is not listed)."""
        ...


@runtime_checkable
class PublishesReasons(Protocol):
    def publish_reason(self, job_id: str, why: str) -> bool:
        """Show why the job waits inside the cluster manager (a condition, an event)."""
        ...


@runtime_checkable
class ExplainsWaits(Protocol):
    def reason(self, job_id: str) -> str | None:
        """What the cluster manager itself says about the job, if anything."""
        ...


@runtime_checkable
class ForgetsEndedJobs(Protocol):
    def forget(self, job_id: str) -> None:
        """Drop what the backend kept of a job whose end the service has committed."""
        ...


@runtime_checkable
class ListsProcesses(Protocol):
    def pids(self, job_id: str) -> list[int]:
        """The job's processes on this host (what NVML reports usage by)."""
        ...


@runtime_checkable
class ReportsExcludedNodes(Protocol):
    def excluded_nodes(self) -> dict[str, str]:
        """Nodes of the last observation's cluster that take no new work now (drained,
        down, cordoned, not Ready), each with the cluster manager's reason, e.g.
        ``{"node2/a100": "drained: disk swap"}``. Jobs already on them keep running."""
        ...


@runtime_checkable
class SharesGpus(Protocol):
    def start_shared(
        self,
        job_id: str,
        command: Sequence[str],
        node: str,
        milli: int,
        on_gpus: Sequence[int] | None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        run_as: str | None = None,
    ) -> tuple[int, ...] | None:
        """Launch a job on ``milli`` thousandths of one GPU of ``node``: on ``on_gpus``,
        the GPU the other jobs of its share run on, or (opening the share, None) on a
        free GPU there. Returns the GPU indices, or None when they are not free yet."""
        ...


class PowerState(StrEnum):
    """Where an on-demand node (a cloud node the cluster manager brings up) stands."""

    OFF = "off"  # powered down: costs nothing, a job placed there waits for its start-up
    STARTING = "starting"  # asked up, not ready for jobs yet
    ON = "on"  # up and billed
    STOPPING = "stopping"  # asked down, not off yet


@runtime_checkable
class PowersNodes(Protocol):
    """On-demand nodes (Slurm ``State=CLOUD`` nodes under power saving, a Kubernetes
    node group that a ProvisioningRequest scales up): the cluster manager's own
    machinery starts and stops them (Slurm's ``ResumeProgram``, cluster-autoscaler);
    ilucid only asks, through the manager's API. Every on-demand node is in each
    observation's cluster, whatever its power state, labelled ``pool=<name>``."""

    def power_states(self) -> dict[str, PowerState]:
        """The on-demand nodes of the last observation and their power state."""
        ...

    def power_up(self, node: str) -> None:
        """Ask the cluster manager to bring ``node`` up (returns at once)."""
        ...

    def power_down(self, node: str) -> None:
        """Ask the cluster manager to release ``node``; ilucid never asks under a job."""
        ...


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a backend can do beyond :class:`Backend`, found once when the service starts:
    each field is the backend itself, typed as that capability, or None."""

    checks: ChecksSubmissions | None
    queues: QueuesJobs | None
    cancels: Cancels | None
    claims: ClaimsForeignJobs | None
    publishes: PublishesReasons | None
    explains: ExplainsWaits | None
    forgets: ForgetsEndedJobs | None
    processes: ListsProcesses | None
    excludes: ReportsExcludedNodes | None
    shares: SharesGpus | None
    accounts: RunsJobsAsUsers | None = None
    caps_logs: CapsLogs | None = None
    powers: PowersNodes | None = None

    @classmethod
    def of(cls, backend: Backend) -> Capabilities:
        return cls(
            checks=backend if isinstance(backend, ChecksSubmissions) else None,
            queues=backend if isinstance(backend, QueuesJobs) else None,
            cancels=backend if isinstance(backend, Cancels) else None,
            claims=backend if isinstance(backend, ClaimsForeignJobs) else None,
            publishes=backend if isinstance(backend, PublishesReasons) else None,
            explains=backend if isinstance(backend, ExplainsWaits) else None,
            forgets=backend if isinstance(backend, ForgetsEndedJobs) else None,
            processes=backend if isinstance(backend, ListsProcesses) else None,
            excludes=backend if isinstance(backend, ReportsExcludedNodes) else None,
            shares=backend if isinstance(backend, SharesGpus) else None,
            accounts=backend if isinstance(backend, RunsJobsAsUsers) else None,
            caps_logs=backend if isinstance(backend, CapsLogs) else None,
            powers=backend if isinstance(backend, PowersNodes) else None,
        )

    def names(self) -> list[str]:
        """The capabilities present, for the service's start line."""
        present = {
            "checks submissions": self.checks,
            "own queue": self.queues,
            "cancels": self.cancels,
            "foreign jobs": self.claims,
            "publishes reasons": self.publishes,
            "explains waits": self.explains,
            "forgets ended jobs": self.forgets,
            "lists processes": self.processes,
            "excluded nodes": self.excludes,
            "shares GPUs": self.shares,
            "runs jobs as users": self.accounts,
            "caps logs": self.caps_logs,
            "powers nodes": self.powers,
        }
        return [name for name, capability in present.items() if capability is not None]
