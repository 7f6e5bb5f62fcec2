"""Fractional-GPU placement and the fragmentation-aware score (FGD).

Pods may ask for a share of one GPU (``gpu_milli`` < 1000, several pods per
GPU within its capacity) or for whole GPUs on one node, plus CPU and memory.
Free capacity left on partly used GPUs can become unusable: no pod of the
expected mix fits in it. Following the Alibaba ATC'23 paper ("Beware of
Fragmentation"), a node's *fragmentation* for a task type is the free GPU
capacity that task cannot use (all of it when the task cannot run on the
node at all; else GPUs whose free share is below its fractional demand, or
partly used GPUs when it wants whole ones), and its fragmentation for the
expected mix is the popularity-weighted sum. The fragmentation-aware policy
places each pod where that sum grows least; best-fit and worst-fit are the
baselines. Every choice returns its score parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ilucid.core.decision import ScorePart
from ilucid.core.free_gpus import FULL_GPU as _FULL_GPU
from ilucid.core.picklable import picklable

__all__ = [
    "FULL_GPU",
    "PodRequest",
    "ShareCluster",
    "ShareNode",
    "SharePlacement",
    "TaskMix",
    "TaskType",
    "choose",
    "fragmentation",
]

#: Capacity of one GPU in milli-GPUs (the main books' unit too).
FULL_GPU = _FULL_GPU


@dataclass(frozen=True, slots=True)
class PodRequest:
    """What a pod asks for. ``gpu_types`` (None: any) constrains the GPU model."""

    id: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int = FULL_GPU
    gpu_types: frozenset[str] | None = None

    def __post_init__(self) -> None:
        if self.num_gpu < 0 or self.cpu_milli < 0 or self.memory_mib < 0:
            raise ValueError(f"pod {self.id}: requests must be >= 0")
        if not 0 < self.gpu_milli <= FULL_GPU:
            raise ValueError(f"pod {self.id}: gpu_milli must be in 1..1000, got {self.gpu_milli}")
        if self.num_gpu > 1 and self.gpu_milli != FULL_GPU:
            raise ValueError(f"pod {self.id}: only single-GPU pods may ask for a fraction")

    @property
    def fractional(self) -> bool:
        return self.num_gpu == 1 and self.gpu_milli < FULL_GPU

    @property
    def gpu_demand(self) -> int:
        """Requested GPU capacity in milli-GPUs."""
        return self.num_gpu * self.gpu_milli


@dataclass(frozen=True, slots=True)
class ShareNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True, slots=True)
class TaskType:
    """A class of pods in the expected mix, with its popularity (weights sum to 1)."""

    cpu_milli: int
    num_gpu: int
    gpu_milli: int
    weight: float
    gpu_types: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class TaskMix:
    types: tuple[TaskType, ...]

    @classmethod
    def from_pods(
        cls, pods: Sequence[PodRequest], top: int | None = None, by: str = "demand"
    ) -> TaskMix:
        """(CPU, GPUs, GPU share, models) classes of ``pods`` (the ``top`` commonest, when
        given), weighted by their share of requested GPU capacity (``by="demand"``) or
        of pods (``by="count"``, the ATC'23 paper's popularity).

        Measured on the Alibaba default pod list: weighting by demand moved the first
        failed pod from 89.4% to 93.1% of capacity requested (unallocated GPUs then 658
        vs 428; best-fit 509), at the same final allocation (93.7% vs 93.6%). Rare
        classes matter too: keeping only the 24 commonest let the few multi-GPU,
        CPU-heavy pods fail first.
        """
        if by not in ("demand", "count"):
            raise ValueError(f"weight task types by 'demand' or 'count', not {by!r}")
        counts: dict[tuple[int, int, int, tuple[str, ...]], int] = {}
        for pod in pods:
            if pod.num_gpu == 0:
                continue
            types = tuple(sorted(pod.gpu_types)) if pod.gpu_types is not None else ()
            key = (pod.cpu_milli, pod.num_gpu, pod.gpu_milli, types)
            counts[key] = counts.get(key, 0) + (pod.gpu_demand if by == "demand" else 1)
        common = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
        total = sum(n for _, n in common)
        if not total:
            raise ValueError("no GPU pod to learn a task mix from")
        return cls(
            tuple(
                TaskType(c, g, m, n / total, frozenset(t) if t else None)
                for (c, g, m, t), n in common
            )
        )


@dataclass(frozen=True, slots=True)
class SharePlacement:
    node: int
    gpus: tuple[int, ...]  # GPU indices on the node
    milli: int  # taken from each of those GPUs
    score: tuple[ScorePart, ...] = ()


@dataclass(slots=True)
class _NodeState:
    model: str
    cpu: int
    memory: int
    free: list[int]  # milli-GPUs free per GPU
    signature: tuple[str, int, tuple[int, ...]] = field(default=("", 0, ()))

    def refresh(self) -> None:
        self.signature = (self.model, self.cpu, tuple(sorted(self.free)))


class ShareCluster:
    """Free CPU, memory and per-GPU shares of every node."""

    def __init__(self, nodes: Sequence[ShareNode]) -> None:
        self.nodes = tuple(nodes)
        self.state = [
            _NodeState(n.model, n.cpu_milli, n.memory_mib, [FULL_GPU] * n.gpus) for n in nodes
        ]
        for state in self.state:
            state.refresh()
        self.gpu_capacity = sum(n.gpus for n in nodes) * FULL_GPU
        self.gpu_allocated = 0

    def take(self, pod: PodRequest, placement: SharePlacement) -> None:
        state = self.state[placement.node]
        if state.cpu < pod.cpu_milli or state.memory < pod.memory_mib:
            raise ValueError(f"node {self.nodes[placement.node].name} lacks CPU or memory")
        for gpu in placement.gpus:
            if state.free[gpu] < placement.milli:
                raise ValueError(
                    f"GPU {gpu} of node {self.nodes[placement.node].name} has"
                    f" {state.free[gpu]} milli free, cannot take {placement.milli}"
                )
        state.cpu -= pod.cpu_milli
        state.memory -= pod.memory_mib
        for gpu in placement.gpus:
            state.free[gpu] -= placement.milli
        self.gpu_allocated += placement.milli * len(placement.gpus)
        state.refresh()

    def unallocated_gpus(self) -> float:
        return (self.gpu_capacity - self.gpu_allocated) / FULL_GPU


def _fits_node(pod: PodRequest, node: ShareNode, state: _NodeState) -> bool:
    if state.cpu < pod.cpu_milli or state.memory < pod.memory_mib:
        return False
    return pod.gpu_types is None or node.model in pod.gpu_types


def _options(pod: PodRequest, free: Sequence[int]) -> list[tuple[int, ...]]:
    """Distinct GPU choices on a node (GPUs with equal free share are interchangeable)."""
    if pod.num_gpu == 0:
        return [()]
    if pod.fractional:
        seen: set[int] = set()
        choices: list[tuple[int, ...]] = []
        for index, left in enumerate(free):
            if left >= pod.gpu_milli and left not in seen:
                seen.add(left)
                choices.append((index,))
        return choices
    whole = [i for i, left in enumerate(free) if left == FULL_GPU]
    return [tuple(whole[: pod.num_gpu])] if len(whole) >= pod.num_gpu else []


def fragmentation(cpu: int, free: Sequence[int], mix: TaskMix, model: str = "") -> float:
    """Expected free GPU capacity (milli) the mix cannot use on a node in this state."""
    total_free = sum(free)
    if not total_free:
        return 0.0
    whole = sum(1 for left in free if left == FULL_GPU)
    partial = total_free - whole * FULL_GPU
    value = 0.0
    for task in mix.types:
        if (
            cpu < task.cpu_milli
            or task.num_gpu == 0
            or (task.gpu_types is not None and model not in task.gpu_types)
        ):
            lost = total_free
        elif task.gpu_milli < FULL_GPU:
            lost = sum(left for left in free if left < task.gpu_milli)
        elif whole < task.num_gpu:
            lost = total_free
        else:
            lost = partial
        value += task.weight * lost
    return value


def _after(state: _NodeState, pod: PodRequest, gpus: tuple[int, ...]) -> tuple[int, list[int]]:
    free = list(state.free)
    for gpu in gpus:
        free[gpu] -= pod.gpu_milli
    return state.cpu - pod.cpu_milli, free


POLICIES = ("best-fit", "worst-fit", "fgd")


def choose(
    pod: PodRequest,
    cluster: ShareCluster,
    policy: str,
    mix: TaskMix | None = None,
) -> SharePlacement | None:
    """Where ``policy`` (best-fit, worst-fit or fgd) puts ``pod``; None if nowhere fits."""
    if policy not in POLICIES:
        raise ValueError(f"unknown fractional policy {policy!r}; known: {', '.join(POLICIES)}")
    if policy == "fgd" and mix is None:
        raise ValueError("the fragmentation-aware policy needs the expected task mix")
    best: tuple[tuple[float, ...], int, tuple[int, ...]] | None = None
    # nodes in the same state (CPU left, sorted GPU shares) score the same: score once
    memo: dict[tuple[str, int, tuple[int, ...]], tuple[tuple[float, ...], int] | None] = {}
    for index, (node, state) in enumerate(zip(cluster.nodes, cluster.state, strict=True)):
        if not _fits_node(pod, node, state):
            continue
        key = state.signature
        if key not in memo:
            memo[key] = _best_on_node(pod, state, policy, mix)
        found = memo[key]
        if found is None:
            continue
        scored, target = found
        if best is None or (scored, index) < best[:2]:
            best = (scored, index, _pick(pod, state.free, target))
    if best is None:
        return None
    scored, index, gpus = best
    return SharePlacement(index, gpus, pod.gpu_milli, _parts(policy, scored))


def _pick(pod: PodRequest, free: Sequence[int], target: int) -> tuple[int, ...]:
    """The GPUs to use: for a fraction, the first GPU with ``target`` milli free."""
    if pod.num_gpu == 0:
        return ()
    if pod.fractional:
        return (next(i for i, left in enumerate(free) if left == target),)
    whole = [i for i, left in enumerate(free) if left == FULL_GPU]
    return tuple(whole[: pod.num_gpu])


def _best_on_node(
    pod: PodRequest, state: _NodeState, policy: str, mix: TaskMix | None
) -> tuple[tuple[float, ...], int] | None:
    """Best score on one node and the free share of the GPU it uses (a fraction's key)."""
    options = _options(pod, state.free)
    if not options:
        return None
    before = fragmentation(state.cpu, state.free, mix, state.model) if mix is not None else 0.0
    best: tuple[tuple[float, ...], int] | None = None
    for gpus in options:
        cpu, free = _after(state, pod, gpus)
        left = float(sum(free))
        chosen_left = float(min((free[g] for g in gpus), default=0))
        if policy == "best-fit":
            scored: tuple[float, ...] = (left, chosen_left, float(cpu))
        elif policy == "worst-fit":
            scored = (-left, -chosen_left, -float(cpu))
        else:
            assert mix is not None
            growth = fragmentation(cpu, free, mix, state.model) - before
            scored = (growth, left, chosen_left, float(cpu))
        target = state.free[gpus[0]] if gpus else FULL_GPU
        if best is None or scored < best[0]:
            best = (scored, target)
    return best


def _parts(policy: str, scored: tuple[float, ...]) -> tuple[ScorePart, ...]:
    if policy == "fgd":
        return (
            ScorePart(
                "fragmentation",
                -scored[0],
                f"expected unusable GPU share grows by {scored[0] / FULL_GPU:.3f} GPUs",
            ),
            ScorePart("best-fit", -scored[1], f"leaves {scored[1] / FULL_GPU:.2f} GPUs free"),
        )
    sign = 1.0 if policy == "best-fit" else -1.0
    left = sign * scored[0]
    return (ScorePart(policy, -scored[0], f"leaves {left / FULL_GPU:.2f} GPUs free on the node"),)


picklable(PodRequest, ShareNode, TaskType, TaskMix, SharePlacement)
