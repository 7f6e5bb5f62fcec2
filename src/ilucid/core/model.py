"""Pure data model of the scheduling core: jobs, nodes, clusters, placements.

Everything here is immutable and free of I/O so that the simulator and the live
service can hand the very same objects to the core.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from ilucid.core.picklable import picklable
from ilucid.core.stated_estimate import blend, claim_ends, standing

__all__ = [
    "DEFAULT_ESTIMATE_S",
    "Cluster",
    "Forecast",
    "JobClass",
    "JobSpec",
    "Node",
    "Placement",
    "PoolSpec",
    "ProfileReport",
]


#: Duration assumed for a job that arrives without an estimate.
DEFAULT_ESTIMATE_S = 3600.0


class JobClass(StrEnum):
    """Service tier of a job; inference outranks training, best-effort yields to both."""

    TRAINING = "training"
    INFERENCE = "inference"
    BEST_EFFORT = "best-effort"


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What is known about a job when it is submitted (plus, in traces, its true duration).

    ``duration`` is the job's real run time on its requested GPUs. Oracle policies
    (SJF, SRTF) may read it; realistic policies must estimate it instead.
    ``shape`` is a gang's required per-node split (e.g. ``(8, 8)``: two nodes of
    8 GPUs each), which the placer honours; when absent the placer chooses the split.
    ``estimate`` is the duration a driver's estimator predicted at submission (the
    core never fits models itself).
    ``checkpoint_s`` is how often the job saves its state (None: the scheduler's
    default); a preemption loses the work done since the last save.
    ``stated_estimate`` is the run time the user stated (None: none), counted with
    ``stated_weight`` against ``estimate`` and dropped once outlived
    (:mod:`ilucid.core.stated_estimate`).
    """

    id: str
    submit_time: float
    num_gpus: int
    duration: float
    job_class: JobClass = JobClass.TRAINING
    tenant: str = "default"
    user: str = "default"
    gpu_type: str | None = None
    gpu_memory_gb: float | None = None
    gpu_milli: int = 1000
    priority: int = 0
    shape: tuple[int, ...] | None = None
    estimate: float | None = None
    checkpoint_s: float | None = None
    #: GPU types to try first, best first (a soft preference; ``gpu_type`` is hard)
    preferred_gpu_types: tuple[str, ...] = ()
    #: CPUs and memory (GB) the job needs on each node it uses (None: no need stated)
    cpus: float | None = None
    memory_gb: float | None = None
    #: the user's own run time, s, and how much it counts against ``estimate`` (0..1)
    stated_estimate: float | None = None
    stated_weight: float = 1.0
    #: measured speeds by GPU type, ``(type, speed)`` in any one unit (steps/s): what
    #: profiling runs on each type found (in replay, Gavel's throughputs); the core
    #: ranks types by them (:mod:`ilucid.core.type_speeds`)
    type_speeds: tuple[tuple[str, float], ...] = ()
    #: whether the job may burst to a paid pool (``ilucid submit --no-cloud``: False)
    cloud: bool = True

    # Written out rather than generated (see ilucid.core.fast_init): a replay builds
    # one JobSpec per arrival and per estimate; a test checks it matches the fields.
    def __init__(
        self,
        id: str,
        submit_time: float,
        num_gpus: int,
        duration: float,
        job_class: JobClass = JobClass.TRAINING,
        tenant: str = "default",
        user: str = "default",
        gpu_type: str | None = None,
        gpu_memory_gb: float | None = None,
        gpu_milli: int = 1000,
        priority: int = 0,
        shape: tuple[int, ...] | None = None,
        estimate: float | None = None,
        checkpoint_s: float | None = None,
        preferred_gpu_types: tuple[str, ...] = (),
        cpus: float | None = None,
        memory_gb: float | None = None,
        stated_estimate: float | None = None,
        stated_weight: float = 1.0,
        type_speeds: tuple[tuple[str, float], ...] = (),
        cloud: bool = True,
    ) -> None:
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "submit_time", submit_time)
        object.__setattr__(self, "num_gpus", num_gpus)
        object.__setattr__(self, "duration", duration)
        object.__setattr__(self, "job_class", job_class)
        object.__setattr__(self, "tenant", tenant)
        object.__setattr__(self, "user", user)
        object.__setattr__(self, "gpu_type", gpu_type)
        object.__setattr__(self, "gpu_memory_gb", gpu_memory_gb)
        object.__setattr__(self, "gpu_milli", gpu_milli)
        object.__setattr__(self, "priority", priority)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "estimate", estimate)
        object.__setattr__(self, "checkpoint_s", checkpoint_s)
        object.__setattr__(self, "preferred_gpu_types", preferred_gpu_types)
        object.__setattr__(self, "cpus", cpus)
        object.__setattr__(self, "memory_gb", memory_gb)
        object.__setattr__(self, "stated_estimate", stated_estimate)
        object.__setattr__(self, "stated_weight", stated_weight)
        object.__setattr__(self, "type_speeds", type_speeds)
        object.__setattr__(self, "cloud", cloud)
        self.__post_init__()

    def __post_init__(self) -> None:
        if self.checkpoint_s is not None and self.checkpoint_s <= 0:
            raise ValueError(f"job {self.id}: checkpoint_s must be > 0, got {self.checkpoint_s}")
        if self.num_gpus < 0:
            raise ValueError(f"job {self.id}: num_gpus must be >= 0, got {self.num_gpus}")
        if self.duration < 0:
            raise ValueError(f"job {self.id}: duration must be >= 0, got {self.duration}")
        if not 0 < self.gpu_milli <= 1000:
            raise ValueError(f"job {self.id}: gpu_milli must be in 1..1000, got {self.gpu_milli}")
        if self.cpus is not None or self.memory_gb is not None:  # (rare: keep copies cheap)
            for name, need in (("cpus", self.cpus), ("memory_gb", self.memory_gb)):
                if need is not None and not 0 < need < float("inf"):
                    raise ValueError(f"job {self.id}: {name} must be > 0 and finite, got {need}")
        if self.gpu_milli < 1000 and self.num_gpus != 1:
            raise ValueError(
                f"job {self.id}: a share of one GPU (gpu_milli {self.gpu_milli}) needs"
                f" num_gpus = 1, got {self.num_gpus}"
            )
        if self.shape is not None and sum(self.shape) != self.num_gpus:
            raise ValueError(
                f"job {self.id}: shape {self.shape} does not add up to {self.num_gpus} GPUs"
            )
        if self.stated_estimate is not None:
            if not 0 < self.stated_estimate < float("inf"):
                raise ValueError(
                    f"job {self.id}: stated_estimate must be > 0 and finite,"
                    f" got {self.stated_estimate}"
                )
            if not 0.0 <= self.stated_weight <= 1.0:
                raise ValueError(
                    f"job {self.id}: stated_weight must be in [0, 1], got {self.stated_weight}"
                )

    @property
    def model_duration(self) -> float:
        """The estimator's estimate, or the default for a job without one."""
        return self.estimate if self.estimate is not None else DEFAULT_ESTIMATE_S

    @property
    def expected_duration(self) -> float:
        """The estimate, or the default for a job that came without one (never the truth);
        a stated run time is blended in by its weight."""
        model = self.estimate if self.estimate is not None else DEFAULT_ESTIMATE_S
        stated = self.stated_estimate
        return model if stated is None else blend(stated, model, self.stated_weight)

    def claim_ends(self) -> float | None:
        """Seconds of run after which :attr:`expected_duration` no longer holds, for a job
        with a stated run time (None: without one, the policy's own rule decides)."""
        stated = self.stated_estimate
        if stated is None:
            return None
        return claim_ends(stated, self.model_duration, self.stated_weight)

    def standing_estimate(self, ran: float) -> float | None:
        """The estimate that stands after ``ran`` seconds past :meth:`claim_ends`: the
        longer of the stated and the model's while not outlived (None: both are, or
        nothing was stated)."""
        stated = self.stated_estimate
        return None if stated is None else standing(stated, self.model_duration, ran)

    @property
    def gpu_share(self) -> float:
        """GPUs the job holds, counting a share of one GPU as its fraction (0.5 for 500
        milli-GPUs): what a cap on a class's GPUs (the training reserve) adds up."""
        return self.num_gpus if self.gpu_milli == 1000 else self.gpu_milli / 1000

    @property
    def gpu_seconds(self) -> float:
        """Work of the job in GPU-seconds, the unit of Tiresias' attained service."""
        return self.num_gpus * self.duration


@dataclass(frozen=True, slots=True)
class Node:
    """A machine with identical GPUs. Labels carry topology (``nvlink``, ``rack``)."""

    name: str
    num_gpus: int
    gpu_type: str = "generic"
    gpu_memory_gb: float = 0.0
    labels: Mapping[str, str] = field(default_factory=dict)
    #: CPUs and memory (GB) jobs may take here; 0 when the cluster manager does not say
    cpus: float = 0.0
    memory_gb: float = 0.0

    def __post_init__(self) -> None:
        if self.num_gpus < 0:
            raise ValueError(f"node {self.name}: num_gpus must be >= 0, got {self.num_gpus}")
        if self.cpus < 0 or self.memory_gb < 0:
            raise ValueError(f"node {self.name}: cpus and memory_gb must be >= 0")


@dataclass(frozen=True, slots=True)
class Cluster:
    """An ordered collection of nodes; node order breaks placement ties deterministically."""

    nodes: tuple[Node, ...]
    #: the GPU count, computed once: a replay asks for it at every submission
    _total_gpus: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_total_gpus", sum(n.num_gpus for n in self.nodes))

    @classmethod
    def homogeneous(
        cls,
        num_nodes: int,
        gpus_per_node: int,
        gpu_type: str = "generic",
        gpu_memory_gb: float = 0.0,
    ) -> Cluster:
        """A cluster of identical nodes, the convention for traces without a node list."""
        if num_nodes <= 0 or gpus_per_node <= 0:
            raise ValueError("a cluster needs at least one node with at least one GPU")
        width = len(str(num_nodes - 1))
        return cls(
            tuple(
                Node(f"node{i:0{width}d}", gpus_per_node, gpu_type, gpu_memory_gb)
                for i in range(num_nodes)
            )
        )

    @property
    def total_gpus(self) -> int:
        return self._total_gpus

    @property
    def max_gpus_per_node(self) -> int:
        return max((n.num_gpus for n in self.nodes), default=0)

    def __len__(self) -> int:
        return len(self.nodes)


@dataclass(frozen=True, slots=True)
class Placement:
    """GPUs granted to a job: ``(node index, GPU count)`` pairs, one per node used.

    A fraction of one GPU (``milli`` < 1000) names the shared GPU it joins on its one
    node by ``share``, a label the free-GPU books hand out, so that the backend can put
    every job of that share on the same physical GPU.
    """

    parts: tuple[tuple[int, int], ...]
    share: int | None = None
    milli: int = 1000
    #: CPUs and memory (GB) taken on each node of ``parts`` (0: none stated)
    cpus: float = 0.0
    memory_gb: float = 0.0

    def __init__(
        self,
        parts: tuple[tuple[int, int], ...],
        share: int | None = None,
        milli: int = 1000,
        cpus: float = 0.0,
        memory_gb: float = 0.0,
    ) -> None:  # written out: one per placement tried (see JobSpec.__init__)
        object.__setattr__(self, "parts", parts)
        object.__setattr__(self, "share", share)
        object.__setattr__(self, "milli", milli)
        object.__setattr__(self, "cpus", cpus)
        object.__setattr__(self, "memory_gb", memory_gb)

    @property
    def num_gpus(self) -> int:
        return sum(count for _, count in self.parts)

    @property
    def node_indices(self) -> tuple[int, ...]:
        return tuple(index for index, _ in self.parts)


@dataclass(frozen=True, slots=True)
class ProfileReport:
    """What a profiling run measured, as the driver's estimators read it.

    ``sharing_score`` comes from the packing analyzer (0 light .. 2 heavy);
    ``estimate`` is the duration estimate refined with what profiling saw.
    """

    sharing_score: int | None
    gpu_memory_gb: float | None
    estimate: float | None
    gpu_util: float | None = None
    note: str = ""


@dataclass(frozen=True, slots=True)
class Forecast:
    """Demand expected in the next hour, as the load forecaster predicts it."""

    jobs: float
    gpu_seconds: float


@dataclass(frozen=True, slots=True)
class PoolSpec:
    """A pool of nodes (label ``pool`` on a node) and what using it costs.

    On-prem capacity is the ``main`` pool; a cloud pool has a price per
    GPU-hour and a start-up delay (provisioning, image pull) before a job
    placed there makes progress.
    """

    name: str
    cost_per_gpu_hour: float = 0.0
    startup_s: float = 0.0
    #: nodes the cluster manager brings up on demand (powered down until a burst, and
    #: released after ``idle_release_s`` with no job); False: always up, as on-prem is
    on_demand: bool = True
    idle_release_s: float = 600.0
    #: at most this many of the pool's nodes up at once (None: all of them)
    max_nodes: int | None = None

    def __post_init__(self) -> None:
        if not (self.cost_per_gpu_hour >= 0 and self.startup_s >= 0):
            raise ValueError(f"pool {self.name}: cost and start-up delay must be >= 0")
        if not self.idle_release_s >= 0:
            raise ValueError(f"pool {self.name}: idle_release_s must be >= 0")
        if self.max_nodes is not None and self.max_nodes < 0:
            raise ValueError(f"pool {self.name}: max_nodes must be >= 0")


picklable(JobSpec, Node, Cluster, Placement, ProfileReport, Forecast, PoolSpec)
