"""One contract for every backend (local, Slurm, Kubernetes), so all three behave alike.

Admit a job on the node the core chose, see it run there, preempt it, resume it,
restart the backend (a new instance, as after a service restart) and find the
job still running without admitting it twice, then see it complete with code 0.

Each driver makes its backend, makes a job known to it (nothing for the local
backend, a held sbatch job for Slurm, a labelled suspended Job for Kubernetes),
lets it finish (a file the job waits for; a Complete condition on Kubernetes,
whose Job controller the Kubernetes driver plays) and counts admissions.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kubernetes"))

from ilucid.backends.base import ProcessState

WAIT_FOR = 'echo "$CUDA_VISIBLE_DEVICES" >> "{runs}"; while [ ! -e "{done}" ]; do sleep 0.1; done'


class Driver(Protocol):
    def make(self) -> Any: ...
    def accept(self, backend: Any, job_id: str) -> list[str]: ...
    def finish(self) -> None: ...
    def tick(self) -> None: ...
    def admissions(self) -> int: ...


class FileDriver:
    """Local and Slurm: the job is a real command that waits for a file."""

    def __init__(self, tmp: Path, factory: Any) -> None:
        self.tmp, self.factory = tmp, factory
        self.runs, self.done = tmp / "runs", tmp / "done"

    def make(self) -> Any:
        return self.factory()

    def command(self) -> list[str]:
        return ["sh", "-c", WAIT_FOR.format(runs=self.runs, done=self.done)]

    def accept(self, backend: Any, job_id: str) -> list[str]:
        enqueue = getattr(backend, "enqueue", None)
        if enqueue is not None:
            enqueue(job_id, self.command(), 1)
        return self.command()

    def finish(self) -> None:
        self.done.touch()

    def tick(self) -> None:
        pass

    def admissions(self) -> int:
        return len(self.runs.read_text().split()) if self.runs.exists() else 0


class KubeDriver:
    def __init__(self, emulator: Any) -> None:
        from kube_fixtures import gpu_job, gpu_node
        from kubernetes import client

        self.emulator = emulator
        api = emulator.api()
        client.CoreV1Api(api).create_node(gpu_node("gpu-a", gpus=4))
        self.batch = client.BatchV1Api(api)
        self.batch.create_namespaced_job("team-a", gpu_job("contract", 1))

    def make(self) -> Any:
        from kube_fixtures import backend

        return backend(self.emulator.api())

    def accept(self, backend: Any, job_id: str) -> list[str]:
        backend.observe()
        [foreign] = backend.foreign_jobs()
        backend.claim(foreign, job_id)
        return ["(the Job's own container)"]

    def finish(self) -> None:
        from test_kubernetes_backend import complete

        complete(self.batch, "contract")

    def tick(self) -> None:
        from test_kubernetes_backend import job_controller

        job_controller(self.batch)

    def admissions(self) -> int:
        from test_kubernetes_backend import admissions

        return admissions(self.emulator).get("contract", 0)


@pytest.fixture(params=["local", "slurm", "kubernetes"])
def driver(request: pytest.FixtureRequest, tmp_path: Path, job_scratch: Path) -> Iterator[Driver]:
    if request.param == "local":
        from ilucid.backends.local import GpuInventory, LocalBackend

        yield FileDriver(
            job_scratch,
            lambda: LocalBackend(tmp_path, GpuInventory(2, "virtual", 0, "virtual"), grace_s=2),
        )
    elif request.param == "slurm":
        from ilucid.backends.slurm import SlurmBackend

        cluster = request.getfixturevalue("slurm_cluster")
        yield FileDriver(tmp_path, lambda: SlurmBackend(tmp_path, slurm_conf=cluster.conf))
    else:
        from kmock_thread import KMockThread
        from kmock_watch import ClusterEmulator
        from kube_fixtures import Emulator, close_backends

        handler = ClusterEmulator()
        with KMockThread(handler) as server:
            yield KubeDriver(Emulator(handler, server))
            close_backends()


def until(backend: Any, driver: Driver, job_id: str, want: set[ProcessState]) -> Any:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        driver.tick()
        seen = backend.observe().jobs.get(job_id)
        if seen is not None and seen.state in want:
            return seen
        time.sleep(0.2)
    raise AssertionError(f"{job_id} never reached {want}; last seen {seen}")


def admit(backend: Any, driver: Driver, job_id: str, command: list[str], node: str) -> Any:
    """Start on ``node`` (backends may answer 'not yet' while GPUs free up) until it runs."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        backend.observe()
        backend.start(job_id, command, 1, placement=[(node, 1)])
        driver.tick()
        seen = backend.observe().jobs.get(job_id)
        if seen is not None and seen.state is ProcessState.RUNNING and seen.parts:
            return seen
        time.sleep(0.3)
    raise AssertionError(f"{job_id} was not admitted")


def admitted(driver: Driver, count: int) -> bool:
    """Whether the job has been admitted ``count`` times (a process may take a moment to
    write that it started)."""
    deadline = time.monotonic() + 10
    while driver.admissions() < count and time.monotonic() < deadline:
        time.sleep(0.1)
    return driver.admissions() == count


@pytest.mark.xdist_group("slurm")
def test_every_backend_keeps_the_same_contract(driver: Driver) -> None:
    job_id = "c000001"
    backend = driver.make()
    seen = backend.observe()
    node = seen.cluster.nodes[-1].name  # the last node: not where a backend would default
    command = driver.accept(backend, job_id)
    running = admit(backend, driver, job_id, command, node)
    assert [name for name, _ in running.parts] == [node], "placed on the node the core chose"
    assert admitted(driver, 1)

    backend.stop(job_id)  # preempt
    stopped = until(backend, driver, job_id, {ProcessState.HELD, ProcessState.EXITED})
    assert stopped.state is not ProcessState.RUNNING
    admit(backend, driver, job_id, command, node)  # resume
    assert admitted(driver, 2)

    again = driver.make()  # a restarted service's backend: recovers from the cluster
    recovered = again.observe().jobs[job_id]
    assert recovered.state is ProcessState.RUNNING
    again.start(job_id, command, 1, placement=[(node, 1)])
    driver.tick()
    time.sleep(1.0)
    assert admitted(driver, 2), "a restart never admits a running job again"

    driver.finish()
    ended = until(again, driver, job_id, {ProcessState.EXITED})
    assert ended.exit_code == 0
