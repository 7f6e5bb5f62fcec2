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
from typing import Protocol

from ilucid.core import Cluster

__all__ = [
    "Backend",
    "BackendUnavailable",
    "ForeignJob",
    "Observation",
    "ObservedJob",
    "ProcessState",
]


class BackendUnavailable(RuntimeError):
    """The cluster manager did not answer (e.g. slurmctld restarting); retried next pass."""


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
    ) -> tuple[int, ...] | None:
        """Launch; returns the GPU indices used, or None if they are not free yet.

        ``placement`` is the core's choice, (node name, GPUs there) per node; a
        backend honours it (local GPU ranges, Slurm ``--nodelist``, Kubernetes
        node affinity) so what runs is what the core decided.
        """
        ...

    def stop(self, job_id: str) -> None:
        """Preempt or cancel: ask the job to stop (it may checkpoint first)."""
        ...

    def logs(self, job_id: str, stream: str = "stdout", tail_bytes: int = 65536) -> str: ...
