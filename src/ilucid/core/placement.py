"""The consolidating placer, and why a job finds no room.

Filters (:mod:`ilucid.core.filters`) judge whether a kind of node can ever host a
job; the placer then picks concrete nodes among the free GPUs. Both explain a refusal
with a sentence that leads with the binding constraint, then counts the other
nodes the way ``kubectl describe pod`` does: "all 1,200 A100 GPUs are busy
(1,100 training, 100 inference); other nodes: 22 with GPU type V100 (needs A100)".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from ilucid.core.decision import Reason, ScorePart
from ilucid.core.filters import DEFAULT_FILTERS, Filter, allowed_types
from ilucid.core.free_gpus import FULL_GPU, MAIN_POOL, FreeGpus
from ilucid.core.jobs import JobState
from ilucid.core.model import Cluster, JobSpec, Placement
from ilucid.core.reason_codes import ReasonCode
from ilucid.core.type_speeds import TypeSpeeds
from ilucid.core.wait_words import busy_by_class, class_split, plural, pool_open_to, pool_words

__all__ = [
    "ConsolidatingPlacer",
    "Placer",
    "explain_unplaceable",
    "never_placeable",
    "why_unplaced",
]


class Placer(Protocol):
    def place(self, job: JobSpec, free: FreeGpus, pool: str = MAIN_POOL) -> Placement | None: ...

    def explain(self, job: JobSpec, placement: Placement, free: FreeGpus) -> tuple[ScorePart, ...]:
        """Score parts of a placement already chosen, computed only when asked for."""
        ...


class ConsolidatingPlacer:
    """Pack jobs onto as few nodes as possible.

    Semantics of the Lucid artifact's ``consolidate`` placer: a job that fits in
    one node goes to the node with the fewest free GPUs that still holds it; a
    larger job takes whole free nodes, most-free first, and puts any remainder
    on the next node in that order. A job is never split across partly busy
    nodes, which keeps gang jobs inside as few machines as possible.
    """

    def __init__(self, filters: Sequence[Filter] = DEFAULT_FILTERS) -> None:
        self.filters = tuple(filters)
        #: ranks a job's GPU types by measured speed when it states no preference (None:
        #: one type, or ranking off)
        self.type_speeds: TypeSpeeds | None = None
        self._types_cache: dict[
            tuple[str | None, float | None, float | None, float | None], tuple[str, ...] | None
        ] = {}

    def _types(self, job: JobSpec, free: FreeGpus) -> tuple[str, ...] | None:
        key = (job.gpu_type, job.gpu_memory_gb, job.cpus, job.memory_gb)
        if key not in self._types_cache:
            self._types_cache[key] = allowed_types(job, free.cluster, self.filters)
        return self._types_cache[key]

    def place(self, job: JobSpec, free: FreeGpus, pool: str = MAIN_POOL) -> Placement | None:
        need = job.num_gpus
        if need == 0:
            return self._place_host(job, free, pool)
        if job.gpu_milli < FULL_GPU:
            return self._place_fraction(job, free, pool)
        if need > free.pool_free.get(pool, 0):
            return None
        if job.cpus is not None or job.memory_gb is not None or job.shape is not None:
            return self._place_constrained(job, free, pool)
        types = self._types(job, free)
        ranked = self._preferred(job, free)
        waits = False
        for preferred in ranked:  # soft: first the types it runs best on
            if preferred in free.types and (types is None or preferred in types):
                if self._waits_for_faster(job, preferred, ranked):
                    waits = True
                    continue
                placement = self._place_on(need, (preferred,), free, pool)
                if placement is not None:
                    return placement
        return None if waits else self._place_on(need, types, free, pool)

    def _waits_for_faster(self, job: JobSpec, gpu_type: str, ranked: tuple[str, ...]) -> bool:
        """Whether the job waits for a faster type rather than start on ``gpu_type``."""
        book = self.type_speeds
        if book is None or book.patience <= 0.0 or job.preferred_gpu_types:
            return False
        fastest = book.fastest(job.id, ranked)
        return fastest is not None and book.wait_left(job.id, gpu_type, fastest) > 0.0

    def waiting_for_faster(self, job: JobSpec, free: FreeGpus) -> Reason | None:
        """Why a job that could start on a slower type waits (None: it does not)."""
        book = self.type_speeds
        if book is None or book.patience <= 0.0 or job.preferred_gpu_types:
            return None
        ranked = self._preferred(job, free)
        fastest = book.fastest(job.id, ranked)
        if fastest is None:
            return None
        for gpu_type in ranked:
            left = book.wait_left(job.id, gpu_type, fastest)
            if left > 0.0 and gpu_type in free.types and free.best_fit(job.num_gpus, (gpu_type,)):
                return Reason(
                    ReasonCode.WAITING_FOR_FASTER_TYPE,
                    f"{job.num_gpus} {gpu_type} GPU(s) are free, but it waits up to"
                    f" {left:,.0f} s more for {fastest}, where it runs"
                    f" {book.speedup(job.id, fastest, gpu_type):.2g}x as fast",
                )
        return None

    def _preferred(self, job: JobSpec, free: FreeGpus) -> tuple[str, ...]:
        """The job's own preference, else its types ranked by measured speed."""
        if job.preferred_gpu_types or self.type_speeds is None:
            return job.preferred_gpu_types
        return self.type_speeds.ranking(job.id, self._types(job, free) or free.types)

    def _tries(self, job: JobSpec, free: FreeGpus) -> list[tuple[str, ...] | None]:
        """The GPU types to look among, in turn: each preferred one, then all allowed."""
        types = self._types(job, free)
        tries: list[tuple[str, ...] | None] = [
            (t,)
            for t in self._preferred(job, free)
            if t in free.types and (types is None or t in types)
        ]
        tries.append(types)
        return tries

    def _place_fraction(self, job: JobSpec, free: FreeGpus, pool: str) -> Placement | None:
        """A share of one GPU: the shared GPU with the least room that holds it (on a
        preferred type first), else a whole GPU placed by best fit and opened to share."""
        cpus, memory, room = _host_room(job, free)
        tries = self._tries(job, free)
        for wanted in tries:
            shared = free.best_share(job.gpu_milli, wanted, pool, room)
            if shared is not None:
                return Placement(((shared[0], 1),), shared[1], job.gpu_milli, cpus, memory)
        for wanted in tries:
            node = (
                free.best_fit(1, wanted, pool)
                if room is None
                else free.best_fit_where(1, wanted, pool, room)
            )
            if node is not None:
                share = free.new_share(node)
                return Placement(((node, 1),), share, job.gpu_milli, cpus, memory)
        return None

    def _place_host(self, job: JobSpec, free: FreeGpus, pool: str) -> Placement | None:
        """A job of no GPUs: nowhere, unless it states CPUs or memory; then booked on the
        node of ``pool`` that has them with the fewest CPUs free (best fit, as GPUs)."""
        cpus, memory, room = _host_room(job, free)
        if room is None:
            return Placement(())
        types = self._types(job, free)
        nodes = free.cluster.nodes
        fitting = [
            i
            for i, p in enumerate(free.pool_of)
            if p == pool and (types is None or nodes[i].gpu_type in types) and room(i)
        ]
        if not fitting:
            return None
        best = min(fitting, key=lambda i: (free.cpus_free[i], free.memory_free[i], i))
        return Placement(((best, 0),), cpus=cpus, memory_gb=memory)

    def _place_constrained(self, job: JobSpec, free: FreeGpus, pool: str) -> Placement | None:
        """A job that states CPUs or memory per node, or a gang shape (``nodes`` x
        ``gpus_per_node``): only nodes with that much free count, in the consolidating
        order; a gang's parts go to distinct nodes, the largest part first, each to the
        node that fits it best."""
        cpus, memory, host_room = _host_room(job, free)
        room = host_room or _anywhere
        need = job.num_gpus
        for wanted in self._tries(job, free):
            parts: tuple[tuple[int, int], ...] | None
            if job.shape is not None:
                parts = _gang(job.shape, wanted, pool, free, room)
            else:
                node = free.best_fit_where(need, wanted, pool, room)
                parts = (
                    ((node, need),)
                    if node is not None
                    else _spread(need, [i for i in free.descending(wanted, pool) if room(i)], free)
                )
            if parts is not None:
                return Placement(parts, cpus=cpus, memory_gb=memory)
        return None

    def _place_on(
        self, need: int, types: tuple[str, ...] | None, free: FreeGpus, pool: str
    ) -> Placement | None:
        node = free.best_fit(need, types, pool)
        if node is not None:
            return Placement(((node, need),))
        if free.uniform:
            return self._place_across_uniform(need, free, types, pool)
        parts = _spread(need, free.descending(types, pool), free)
        return None if parts is None else Placement(parts)

    @staticmethod
    def _place_across_uniform(
        need: int, free: FreeGpus, types: tuple[str, ...] | None, pool: str
    ) -> Placement | None:
        """The multi-node rule on identical nodes, without sorting every node."""
        cap = free.capacity[0]
        if need <= cap:
            return None  # best fit already found no single node that holds it
        whole, rest = divmod(need, cap)
        if free.count_uniform_wholly_free(types, pool) < whole:
            return None
        full = free.lowest_uniform_wholly_free(whole + 1, types, pool)
        if len(full) < whole:
            return None
        parts = [(index, cap) for index in full[:whole]]
        if rest:
            if len(full) > whole:
                parts.append((full[whole], rest))
            else:
                ordered = free.descending(types, pool)
                partial = ordered[whole] if len(ordered) > whole else None
                if partial is None or free.free[partial] < rest:
                    return None
                parts.append((partial, rest))
        return Placement(tuple(parts))

    def explain(self, job: JobSpec, placement: Placement, free: FreeGpus) -> tuple[ScorePart, ...]:
        nodes = free.cluster.nodes
        left = sum(free.free[i] for i in placement.node_indices)
        preference: tuple[ScorePart, ...] = ()
        ranked = self.type_speeds
        if not job.preferred_gpu_types and ranked is not None and placement.parts:
            got = nodes[placement.parts[0][0]].gpu_type
            said = ranked.words(job.id, got, self._types(job, free) or free.types)
            if said is not None:
                preference = (ScorePart("gpu-type", 0.0, said),)
        elif job.preferred_gpu_types:
            got = nodes[placement.parts[0][0]].gpu_type if placement.parts else "none"
            rank = job.preferred_gpu_types.index(got) + 1 if got in job.preferred_gpu_types else 0
            preference = (
                ScorePart(
                    "gpu-type",
                    float(-rank if rank else -len(job.preferred_gpu_types) - 1),
                    f"on {got}, preference #{rank} of {', '.join(job.preferred_gpu_types)}"
                    if rank
                    else f"on {got}: none of {', '.join(job.preferred_gpu_types)} had room",
                ),
            )
        return (
            *preference,
            *_share_part(placement, free),
            ScorePart(
                "consolidation",
                -float(len(placement.parts)),
                # shown inside "consolidation -1 (...)": no parentheses of its own
                f"spans {plural(len(placement.parts), 'node')}:"
                f" {', '.join(nodes[i].name for i in placement.node_indices)}",
            ),
            ScorePart(
                "best-fit",
                -float(left),
                f"leaves {plural(left, 'GPU')} free there",
            ),
        )


def _anywhere(index: int) -> bool:
    return True


def _host_room(job: JobSpec, free: FreeGpus) -> tuple[float, float, Callable[[int], bool] | None]:
    """The CPUs and memory ``job`` books on each node, and which nodes have them free
    (None when it states neither: every node does)."""
    cpus, memory = job.cpus or 0.0, job.memory_gb or 0.0
    if not (cpus or memory):
        return cpus, memory, None
    return cpus, memory, lambda index: free.has_room(index, cpus, memory)


def _gang(
    shape: Sequence[int],
    types: tuple[str, ...] | None,
    pool: str,
    free: FreeGpus,
    room: Callable[[int], bool],
) -> tuple[tuple[int, int], ...] | None:
    """Each part of a gang on its own node, largest first, by best fit (largest-first
    best fit finds distinct nodes whenever any assignment exists), in node order."""
    used: set[int] = set()
    parts: list[tuple[int, int]] = []
    for size in sorted(shape, reverse=True):
        node = free.best_fit_where(size, types, pool, lambda i: i not in used and room(i))
        if node is None:
            return None
        used.add(node)
        parts.append((node, size))
    return tuple(sorted(parts))


def _spread(
    need: int, ordered: Sequence[int], free: FreeGpus
) -> tuple[tuple[int, int], ...] | None:
    """Whole free nodes in ``ordered`` (most free first), then the remainder on the next
    one; None if a partly busy node comes before the job is whole."""
    parts: list[tuple[int, int]] = []
    for index in ordered:
        cap = free.capacity[index]
        if need >= cap and free.free[index] == cap:
            parts.append((index, cap))
            need -= cap
        elif free.free[index] >= need:
            parts.append((index, need))
            need = 0
        else:
            return None
        if need == 0:
            return tuple(parts)
    return None


def _share_part(placement: Placement, free: FreeGpus) -> tuple[ScorePart, ...]:
    """For a fraction of one GPU: how full the shared GPU it runs on is (fuller is better:
    fractions consolidate, leaving whole GPUs for whole-GPU jobs)."""
    if placement.share is None:
        return ()
    ((index, _),) = placement.parts
    left = free.shares_left(index).get(placement.share, FULL_GPU - placement.milli)
    # (the share is a label of the books: which physical GPU holds it is the backend's
    # to say, at launch; naming the label here read as a GPU index and contradicted it)
    return (
        ScorePart(
            "gpu-share",
            float(FULL_GPU - left),
            f"takes {placement.milli} milli-GPUs of a GPU shared on"
            f" {free.cluster.nodes[index].name}: {FULL_GPU - left} of {FULL_GPU} taken there"
            f" now, {left} left",
        ),
    )


def explain_unplaceable(
    job: JobSpec,
    free: FreeGpus,
    filters: Sequence[Filter] = DEFAULT_FILTERS,
    held: Callable[[], Mapping[int, Mapping[str, int]]] | None = None,
) -> Reason:
    """Why ``job`` finds no room, the binding constraint first (computed only on demand).

    The nodes the job may use (an open pool, the right GPU type and memory) are
    judged together: too few free GPUs (``held`` gives the GPUs per node and job
    class, to say who holds them; asked only then), or free GPUs spread too
    thin. The other nodes follow, counted by why they do not count, as
    ``kubectl describe pod`` counts them.
    """
    cluster = free.cluster
    others: Counter[str] = Counter()
    usable: list[int] = []
    for index, node in enumerate(cluster.nodes):
        pool = free.pool_of[index]
        if not pool_open_to(job, pool):
            others[pool_words(pool)] += 1
            continue
        rejection = next((r for f in filters if (r := f.reject(job, node)) is not None), None)
        if rejection is not None:
            others[rejection.message] += 1
            continue
        usable.append(index)
    room = [free.free[i] for i in usable]
    sizes = [free.capacity[i] for i in usable]
    numbers = {
        "nodes": float(len(cluster.nodes)),
        "usable_nodes": float(len(usable)),
        "fitting": float(sum(1 for r in room if r >= job.num_gpus)),
        "free_gpus": float(sum(room)),
        "usable_gpus": float(sum(sizes)),
    }
    tally = ", ".join(f"{n} {text}" for text, n in others.most_common())
    if not usable:
        return Reason(
            ReasonCode.UNSCHEDULABLE, f"0/{len(cluster.nodes)} nodes fit: {tally}", numbers
        )

    def busy() -> str:
        """Who holds the busy GPUs; GPUs no job accounts for (foreign) are ``other``."""
        if held is None:
            return ""
        counts: Counter[str] = Counter()
        table = held()
        for index in usable:
            counts.update(table.get(index, {}))
        unknown = sum(sizes) - sum(room) - sum(counts.values())
        if unknown > 0:
            counts["other"] += unknown
        return class_split(counts)

    short = None
    if sum(room) >= job.num_gpus:
        short = _host_short(job, free, usable) or _gang_short(job, free, usable)
    if short is not None:
        return Reason(
            ReasonCode.INSUFFICIENT_HOST,
            short + (f"; other nodes: {tally}" if tally else ""),
            numbers,
        )
    code, head = _binding(job, room, sizes, busy, bool(others))
    if job.gpu_milli < FULL_GPU:
        head += _shares_full(job, free, usable)
    return Reason(code, head + (f"; other nodes: {tally}" if tally else ""), numbers)


def _host_short(job: JobSpec, free: FreeGpus, usable: Sequence[int]) -> str | None:
    """When the free GPUs would do but their nodes lack the CPUs or memory the job
    states: how many such nodes, and the most free on one."""
    if job.cpus is None and job.memory_gb is None:
        return None
    cpus, memory = job.cpus or 0.0, job.memory_gb or 0.0
    with_gpus = [i for i in usable if free.free[i] > 0 or job.num_gpus == 0]
    short = [i for i in with_gpus if not free.has_room(i, cpus, memory)]
    if not short:
        return None
    nodes = free.cluster.nodes
    named = ", ".join(nodes[i].name for i in short[:3])
    if len(short) > 3:
        named += f" and {len(short) - 3:,} more"
    wants = ", ".join(
        f"{need:g} {unit}"
        for need, unit in ((job.cpus, "CPUs"), (job.memory_gb, "GB of memory"))
        if need is not None
    )
    most = ", ".join(
        f"{max(books[i] for i in short):g} {unit}"
        for need, books, unit in (
            (job.cpus, free.cpus_free, "CPUs"),
            (job.memory_gb, free.memory_free, "GB"),
        )
        if need is not None
    )
    which = "" if job.num_gpus == 0 else " with free GPUs"
    return (
        f"{len(short)} of {plural(len(with_gpus), 'node')}{which}"
        f" {'lacks' if len(short) == 1 else 'lack'} the free CPUs or memory ({named}; the"
        f" most free on one of them: {most}); the job needs {wants} on each node"
    )


def _gang_short(job: JobSpec, free: FreeGpus, usable: Sequence[int]) -> str | None:
    """For a gang (``nodes`` x ``gpus_per_node``) whose GPUs are free but not on enough
    nodes: how many nodes have a part's worth free."""
    if job.shape is None or len(job.shape) < 2:
        return None
    part, count = max(job.shape), len(job.shape)
    fitting = sum(1 for i in usable if free.free[i] >= part)
    verb = "has" if fitting == 1 else "have"
    return (
        f"the job needs {count} x {part} {_noun(job, part)}: {fitting} of"
        f" {plural(len(usable), 'node')} {verb} {part} free (needs {count} such nodes)"
    )


def _shares_full(job: JobSpec, free: FreeGpus, usable: Sequence[int]) -> str:
    """Why a fraction of one GPU finds no shared GPU to join either."""
    lefts = [left for i in usable for left in free.shares_left(i).values()]
    if not lefts:
        return ""
    return (
        f"; and no shared GPU has {job.gpu_milli} milli-GPUs left"
        f" ({plural(len(lefts), 'shared GPU')}, the most left on one: {max(lefts)})"
    )


def _noun(job: JobSpec, count: int) -> str:
    """``GPUs``, ``A100 GPU``, ``GPUs of 40 GB or more``: the GPUs the job may use."""
    kind = f"{' or '.join(job.gpu_type.split('|'))} " if job.gpu_type else ""
    memory = f" of {job.gpu_memory_gb:g} GB or more" if job.gpu_memory_gb else ""
    return f"{kind}{'GPU' if count == 1 else 'GPUs'}{memory}"


def _gpus(job: JobSpec, count: int) -> str:
    return f"{count:,} {_noun(job, count)}"


def _binding(
    job: JobSpec, room: list[int], sizes: list[int], busy: Callable[[], str], others: bool
) -> tuple[ReasonCode, str]:
    """The constraint that keeps ``job`` off the nodes it may use: (code, sentence)."""
    need, total, free_now = job.num_gpus, sum(sizes), sum(room)
    if need > total:
        where = "only {} are open to it" if others else "the cluster has only {}"
        return ReasonCode.TOO_LARGE, f"the job needs {_gpus(job, need)} but {where.format(total)}"
    if free_now < need:
        split = busy()
        if free_now == 0:
            held = f" ({split})" if split else ""
            if total == 1:
                return ReasonCode.INSUFFICIENT_GPUS, f"the only {_noun(job, 1)} is busy{held}"
            return ReasonCode.INSUFFICIENT_GPUS, f"all {_gpus(job, total)} are busy{held}"
        held = f" ({total - free_now:,} busy: {split})" if split else ""
        verb = "is" if free_now == 1 else "are"
        return (
            ReasonCode.INSUFFICIENT_GPUS,
            f"only {free_now:,} of {_gpus(job, total)} {verb} free{held}"
            f" and the job needs {need:,}",
        )
    spread = sum(1 for r in room if r)
    if need <= max(sizes) and max(room) < need:
        return (
            ReasonCode.FRAGMENTED,
            f"{_gpus(job, free_now)} are free but on {plural(spread, 'node')}"
            f" (at most {max(room)} on one); the job needs {need} on one node",
        )
    whole = sum(1 for r, s in zip(room, sizes, strict=True) if r == s)
    if need > max(sizes):
        nodes = f"only {whole} of {len(sizes)} nodes" if whole else f"none of {len(sizes)} nodes"
        verb = "is" if whole == 1 else "are"
        if len(set(sizes)) == 1:
            count, rest = divmod(need, sizes[0])
            wanted = plural(count, "whole node") + (f" and {rest} GPUs on one more" if rest else "")
        else:
            wanted = f"{need} GPUs on whole free nodes"
        return (
            ReasonCode.FRAGMENTED,
            f"{_gpus(job, free_now)} are free but {nodes} {verb} wholly free;"
            f" the job needs {wanted}",
        )
    return (
        ReasonCode.NO_PLACEMENT,
        f"{_gpus(job, free_now)} are free on {plural(spread, 'node')}, but the placer finds"
        f" no set of them that holds all {need} together",
    )


def why_unplaced(
    job: JobSpec,
    free: FreeGpus,
    placer: Placer,
    running: Iterable[JobState],
    partners: Mapping[str, str],
) -> Reason | None:
    """Why ``job`` cannot start now on any node open to it; None when it could.

    ``running`` (with ``partners``, the packed pairs) tells who holds the busy
    GPUs; it is read only when GPUs are short.
    """
    for pool, left in free.pool_free.items():
        room = left >= job.num_gpus or job.gpu_milli < FULL_GPU  # a fraction may join a share
        fits = room and pool_open_to(job, pool)
        if fits and placer.place(job, free, pool) is not None:
            return None
    if isinstance(placer, ConsolidatingPlacer):
        waiting = placer.waiting_for_faster(job, free)
        if waiting is not None:
            return waiting
    return explain_unplaceable(job, free, held=lambda: busy_by_class(running, partners))


def never_placeable(
    jobs: Sequence[JobSpec], cluster: Cluster, placer: Placer | None = None
) -> dict[str, Reason]:
    """Jobs that could not be placed even on the empty cluster, with the reason.

    A replay must leave these out (they would wait forever); they are checked
    once per distinct request shape, not once per job.
    """
    placer = placer or ConsolidatingPlacer()
    empty = FreeGpus(cluster)
    verdicts: dict[tuple[object, ...], Reason | None] = {}
    refused: dict[str, Reason] = {}
    for job in jobs:
        shape = (job.num_gpus, job.gpu_type, job.gpu_memory_gb, job.cpus, job.memory_gb, job.shape)
        if shape not in verdicts:
            fits = placer.place(job, empty) is not None
            verdicts[shape] = None if fits else explain_unplaceable(job, empty)
        reason = verdicts[shape]
        if reason is not None:
            refused[job.id] = reason
    return refused
