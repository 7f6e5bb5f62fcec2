"""An in-memory backend whose processes a test ends, stops, loses or refuses to start."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ilucid.backends.base import Observation, ObservedJob, ProcessState
from ilucid.core import Cluster


class MemoryBackend:
    """Jobs "run" on ``cluster`` until the test ends or loses them. ``starts`` lists every
    start asked for (refused ones too); ``refuse`` makes each start raise ``OSError``."""

    name = "memory"

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.jobs: dict[str, ObservedJob] = {}
        self.refuse: str | None = None
        self.starts: list[str] = []
        #: starts asked for a job whose process still runs (a service bug: never twice)
        self.repeated: list[str] = []

    def observe(self) -> Observation:
        return Observation(self.cluster, dict(self.jobs))

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
        self.starts.append(job_id)
        if self.refuse is not None:
            raise OSError(self.refuse)
        seen = self.jobs.get(job_id)
        if seen is not None and seen.state in (ProcessState.RUNNING, ProcessState.STOPPING):
            self.repeated.append(job_id)
            return seen.gpus  # never started twice
        parts = tuple(placement or ())
        self.jobs[job_id] = ObservedJob(
            job_id, ProcessState.RUNNING, tuple(range(gpus)), None, parts
        )
        return tuple(range(gpus))

    def stop(self, job_id: str) -> None:
        seen = self.jobs.get(job_id)
        if seen is not None and seen.state is ProcessState.RUNNING:
            self.jobs[job_id] = ObservedJob(
                job_id, ProcessState.STOPPING, seen.gpus, None, seen.parts
            )

    def logs(self, job_id: str, stream: str = "stdout", tail_bytes: int = 65536) -> str:
        return ""

    def forget(self, job_id: str) -> None:
        seen = self.jobs.get(job_id)
        if seen is not None and seen.state in (ProcessState.EXITED, ProcessState.LOST):
            del self.jobs[job_id]

    def end(self, job_id: str, code: int) -> None:
        seen = self.jobs[job_id]
        self.jobs[job_id] = ObservedJob(job_id, ProcessState.EXITED, seen.gpus, code, seen.parts)

    def vanish(self, job_id: str) -> None:
        assert self.jobs[job_id].state is ProcessState.RUNNING
        del self.jobs[job_id]
