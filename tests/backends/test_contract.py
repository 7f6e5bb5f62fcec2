"""One contract for every backend (local, Slurm, Kubernetes), so all three behave alike.

Admit a job on the node the core chose, see it run there, preempt it, resume it,
restart the backend (a new instance, as after a service restart) and find the
job still running without admitting it twice, then see it complete with code 0.

Each driver makes its backend, makes a job known to it (nothing for the local
backend, a held sbatch job for Slurm, a labelled suspended Job for Kubernetes),
lets it finish (a file the job waits for; a Complete condition on Kubernetes,
whose Job controller the Kubernetes driver plays) and counts admissions.

Issue 18 adds two steps on clusters of two GPU types (Slurm: node1 a100, node2 v100 by
typed GRES; Kubernetes: an A100 and a V100 node): a typed job runs on the node of its
type the core chose, and a gang of 2 x 2 GPUs runs a part on each of its two nodes. The
local backend is one host of one GPU type: its typed step has nothing to choose between
and its gang step is skipped (saying so).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kubernetes"))

from ilucid.backends.base import Capabilities, ProcessState

WAIT_FOR = 'echo "$CUDA_VISIBLE_DEVICES" >> "{runs}"; while [ ! -e "{done}" ]; do sleep 0.1; done'


class Driver(Protocol):
    def make(self) -> Any: ...
    def accept(self, backend: Any, job_id: str) -> list[str]: ...
    def finish(self) -> None: ...
    def tick(self) -> None: ...
    def admissions(self) -> int: ...


class FileDriver:
    """Local and Slurm: the job is a real command that waits for a file."""

    def __init__(self, tmp: Path, factory: Any, run_as: str | None = None) -> None:
        self.tmp, self.factory, self.run_as = tmp, factory, run_as
        self.runs, self.done = tmp / "runs", tmp / "done"

    def make(self) -> Any:
        return self.factory()

    def command(self) -> list[str]:
        return ["sh", "-c", WAIT_FOR.format(runs=self.runs, done=self.done)]

    def accept(self, backend: Any, job_id: str) -> list[str]:
        enqueue = getattr(backend, "enqueue", None)
        if enqueue is not None:
            enqueue(job_id, self.command(), 1, run_as=self.run_as)
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
        from ilucid.backends.local import LocalBackend
        from ilucid.backends.local_host import GpuInventory

        yield FileDriver(
            job_scratch,
            lambda: LocalBackend(tmp_path, GpuInventory(2, "virtual", 0, "virtual"), grace_s=2),
        )
    elif request.param == "slurm":
        from ilucid.backends.slurm import SlurmBackend

        cluster = request.getfixturevalue("slurm_cluster")
        data = request.getfixturevalue("slurm_data")  # run as root, the job runs as
        account = request.getfixturevalue("slurm_account")  # account: where it reaches
        yield FileDriver(job_scratch, lambda: SlurmBackend(data, slurm_conf=cluster.conf), account)
    else:
        from kmock_thread import KMockThread
        from kmock_watch import ClusterEmulator
        from kube_fixtures import Emulator, close_backends

        handler = ClusterEmulator()
        with KMockThread(handler) as server:
            yield KubeDriver(Emulator(handler, server))
            close_backends()


#: whom the contract's jobs run as: a root local backend runs no job without an identity
#: (the service gives each user one), so the test names a dynamic uid of its own
RUN_AS = "#61190" if os.geteuid() == 0 else None


def run_as_of(driver: Any) -> str | None:
    """Whom the driver's jobs run as: Slurm's, a real account (Slurm's nodes know no
    dynamic uid); the local backend's, :data:`RUN_AS`."""
    return getattr(driver, "run_as", None) or RUN_AS


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
        backend.start(job_id, command, 1, placement=[(node, 1)], run_as=run_as_of(driver))
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


# -- issue 18: a typed GPU and a gang, where each backend can express them ---------------

RECORD = (
    'echo "${{SLURMD_NODENAME:-here}} $CUDA_VISIBLE_DEVICES" >> "{out}/{job}";'
    ' while [ ! -e "{out}/done" ]; do sleep 0.1; done'
)


class FileShapes:
    """Local and Slurm: a real command that records where each of its tasks runs."""

    def __init__(self, tmp: Path, factory: Any, gangs: bool, run_as: str | None = None) -> None:
        self.out, self.factory, self.gangs, self.run_as = tmp, factory, gangs, run_as

    def make(self) -> Any:
        return self.factory()

    def typed(self, backend: Any, job_id: str, node: Any) -> list[str]:
        return self._enqueue(backend, job_id, 1, tasks=False)

    def gang(self, backend: Any, job_id: str, nodes: int, per_node: int) -> list[str]:
        return self._enqueue(backend, job_id, nodes * per_node, tasks=True)

    def _enqueue(self, backend: Any, job_id: str, gpus: int, tasks: bool) -> list[str]:
        command = ["sh", "-c", RECORD.format(out=self.out, job=job_id)]
        if tasks:  # one task per node of the allocation, each saying where it runs
            command = ["srun", "--ntasks-per-node=1", *command]
        queue = Capabilities.of(backend).queues  # Slurm's own queue knows it first
        if queue is not None:
            queue.enqueue(job_id, command, gpus, run_as=self.run_as)
        return command

    def host(self, backend: Any, node: str) -> str:
        """The host a logical node stands for, as the job names it (node1/a100 -> node1)."""
        return str(backend.where[node][0]) if self.gangs else "here"

    def hosts(self, job_id: str, count: int) -> list[str]:
        """Where the job's tasks say they run (Slurm's node name; "here" for this host)."""
        path = self.out / job_id
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            lines = path.read_text().splitlines() if path.exists() else []
            if len(lines) >= count:
                return sorted(line.split()[0] for line in lines)
            time.sleep(0.1)
        raise AssertionError(f"{job_id}: fewer than {count} tasks said where they run")

    def tick(self) -> None:
        pass

    def finish(self) -> None:
        (self.out / "done").touch()


class KubeShapes:
    """Kubernetes: an A100 node and a V100 node; a Job asking a product by nodeSelector,
    a JobSet for the gang; where it runs is the hostname affinity ilucid admits it with."""

    gangs = True

    def __init__(self, emulator: Any) -> None:
        from kube_fixtures import gpu_node
        from kubernetes import client

        self.emulator, self.api = emulator, emulator.api()
        core = client.CoreV1Api(self.api)
        core.create_node(gpu_node("gpu-a", gpus=4, product="NVIDIA-A100-SXM4-80GB"))
        core.create_node(gpu_node("gpu-v", gpus=4, product="Tesla-V100-SXM2-16GB"))

    def make(self) -> Any:
        from kube_fixtures import backend

        return backend(self.api)

    def _claim(self, backend: Any, job_id: str, obj: dict[str, Any]) -> list[str]:
        from kube_fixtures import create

        create(self.api, obj)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            backend.observe()
            offered = [f for f in backend.foreign_jobs() if f.name == obj["metadata"]["name"]]
            if offered:
                backend.claim(offered[0], job_id)
                return ["(the workload's own containers)"]
            time.sleep(0.1)
        raise AssertionError(f"{job_id} was never offered")

    def typed(self, backend: Any, job_id: str, node: Any) -> list[str]:
        from kube_fixtures import gpu_job

        job = gpu_job(job_id, 1)
        job["spec"]["template"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": node.gpu_type}
        return self._claim(backend, job_id, job)

    def gang(self, backend: Any, job_id: str, nodes: int, per_node: int) -> list[str]:
        from kube_fixtures import jobset

        return self._claim(backend, job_id, jobset(job_id, replicas=nodes, gpus=per_node))

    def hosts(self, job_id: str, count: int) -> list[str]:
        from kube_fixtures import CUSTOM
        from kubernetes import client

        try:
            group, version = CUSTOM["jobsets"]
            obj = client.CustomObjectsApi(self.api).get_namespaced_custom_object(
                group, version, "team-a", "jobsets", job_id
            )
            template = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
        except client.ApiException:
            obj = client.BatchV1Api(self.api).read_namespaced_job(job_id, "team-a")
            template = self.api.sanitize_for_serialization(obj)["spec"]["template"]
        terms = template["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
        return sorted(
            value
            for term in terms
            for e in term["matchExpressions"]
            if e["key"] == "kubernetes.io/hostname"
            for value in e["values"]
        )

    def tick(self) -> None:
        from kube_fixtures import gang_controllers
        from kubernetes import client
        from test_kubernetes_backend import job_controller

        job_controller(client.BatchV1Api(self.api))
        gang_controllers(self.api)

    def finish(self) -> None:
        pass

    def host(self, backend: Any, node: str) -> str:
        return node


@pytest.fixture(params=["local", "slurm", "kubernetes"])
def shapes(request: pytest.FixtureRequest, tmp_path: Path, job_scratch: Path) -> Iterator[Any]:
    """Local: this host, one node of one GPU type (v100 here). Slurm: node1 with 4 a100
    and node2 with 4 v100 (typed GRES). Kubernetes: an A100 node and a V100 node."""
    if request.param == "local":
        from ilucid.backends.local import LocalBackend
        from ilucid.backends.local_host import GpuInventory

        inventory = GpuInventory(2, "v100", 16.0, "virtual")
        yield FileShapes(job_scratch, lambda: LocalBackend(tmp_path, inventory, grace_s=2), False)
    elif request.param == "slurm":
        from ilucid.backends.slurm import SlurmBackend

        cluster = request.getfixturevalue("slurm_typed_nodes")
        data = request.getfixturevalue("slurm_data")  # run as root, the job runs as
        account = request.getfixturevalue("slurm_account")  # account: where it reaches
        made: list[Any] = []

        def factory() -> Any:
            made.append(SlurmBackend(data, slurm_conf=cluster.conf))
            return made[-1]

        yield FileShapes(job_scratch, factory, True, account)
        for job_id in ("t000001", "g000001"):  # leave the shared cluster empty
            if made and made[-1].observe().jobs.get(job_id) is not None:
                made[-1].cancel(job_id)
    else:
        from kmock_thread import KMockThread
        from kmock_watch import ClusterEmulator
        from kube_fixtures import Emulator, close_backends

        handler = ClusterEmulator()
        with KMockThread(handler) as server:
            yield KubeShapes(Emulator(handler, server))
            close_backends()


def run_on(backend: Any, shapes: Any, job_id: str, command: list[str], where: list[Any]) -> Any:
    """Start with the placement the core chose until the backend reports it running."""
    gpus = sum(n for _, n in where)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        backend.observe()
        backend.start(job_id, command, gpus, placement=where, run_as=run_as_of(shapes))
        shapes.tick()
        seen = backend.observe().jobs.get(job_id)
        if seen is not None and seen.state is ProcessState.RUNNING and seen.parts:
            return seen
        time.sleep(0.3)
    raise AssertionError(f"{job_id} was not admitted on {where}")


@pytest.mark.xdist_group("slurm")
def test_every_backend_runs_a_typed_gpu_job_on_the_node_of_that_type(shapes: Any) -> None:
    """The core chose a node by its GPU type: the backend runs the job there and reports
    that node. Local has one node of one type (nothing to choose between): the step
    still checks that the job runs on the type the inventory reports."""
    backend = shapes.make()
    nodes = backend.observe().cluster.nodes
    node = nodes[-1]  # Slurm: node2 (v100); Kubernetes: gpu-v (V100); local: the host
    if len(nodes) > 1:
        assert len({n.gpu_type for n in nodes}) == 2, "two GPU types to choose between"
    assert node.gpu_type in ("v100", "Tesla-V100-SXM2-16GB")
    command = shapes.typed(backend, "t000001", node)
    running = run_on(backend, shapes, "t000001", command, [(node.name, 1)])
    assert running.parts == ((node.name, 1),)
    assert shapes.hosts("t000001", 1) == [shapes.host(backend, node.name)]
    shapes.finish()
    backend.stop("t000001")


@pytest.mark.xdist_group("slurm")
def test_every_backend_runs_a_gang_on_every_node_it_was_given(shapes: Any) -> None:
    """A gang of 2 nodes x 2 GPUs, placed by the core on both nodes, runs a part on each
    and is reported on both."""
    if not shapes.gangs:
        pytest.skip("the local backend is one host: a gang of 2 nodes cannot be expressed")
    backend = shapes.make()
    nodes = [n.name for n in backend.observe().cluster.nodes]
    assert len(nodes) == 2
    where = [(name, 2) for name in nodes]
    command = shapes.gang(backend, "g000001", 2, 2)
    running = run_on(backend, shapes, "g000001", command, where)
    assert sorted(running.parts) == sorted(where)
    assert shapes.hosts("g000001", 2) == sorted(shapes.host(backend, n) for n in nodes)
    shapes.finish()
    backend.stop("g000001")
