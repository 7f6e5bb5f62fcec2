"""Free-GPU bookkeeping of a cluster, indexed for fast consolidating placement.

Nodes are bucketed by their number of free GPUs (per GPU type), so best-fit
lookups cost O(GPUs per node) instead of O(nodes): this is what lets one
scheduling pass over a 1,000-node cluster take microseconds.

CPUs and memory are kept per node for jobs that state them (``cpus``,
``memory_gb``); a node whose cluster manager does not report them has no limit.

A GPU shared by fractional jobs (``gpu_milli`` < 1000) leaves the free count when
its first job opens it and comes back when its last one ends; in between, the
books keep its milli-GPUs left under a share label on its node.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable

from ilucid.core.model import Cluster, Placement

__all__ = ["FULL_GPU", "MAIN_POOL", "UNAVAILABLE_POOL", "FreeGpus"]

#: One GPU in milli-GPUs.
FULL_GPU = 1000

#: The pool every node starts in; policies may move nodes to others (e.g. a profiler).
MAIN_POOL = "main"
#: Nodes the cluster manager took out of service (drained, down, cordoned): nothing is
#: placed there, and jobs already there keep their GPUs in the books until they end.
UNAVAILABLE_POOL = "unavailable"


class FreeGpus:
    """Free GPUs per node with buckets ``free count -> node indices`` for each GPU type."""

    __slots__ = (
        "_buckets",
        "_fenced",
        "_fragmented",
        "_heaps",
        "_shares",
        "_top",
        "capacity",
        "cluster",
        "cpus_free",
        "free",
        "free_total",
        "memory_free",
        "pool_free",
        "pool_of",
        "types",
        "uniform",
    )

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.capacity: list[int] = [n.num_gpus for n in cluster.nodes]
        self.free: list[int] = list(self.capacity)
        self.free_total = sum(self.capacity)
        self._fragmented = 0
        self.types: tuple[str, ...] = tuple(sorted({n.gpu_type for n in cluster.nodes}))
        self.uniform = len({n.num_gpus for n in cluster.nodes}) == 1
        self._top = cluster.max_gpus_per_node + 1
        # a node's ``pool`` label places it (e.g. ``cloud``); unlabelled nodes are on-prem
        self.pool_of: list[str] = [n.labels.get("pool", MAIN_POOL) for n in cluster.nodes]
        self.pool_free: dict[str, int] = {MAIN_POOL: 0}
        self._fenced: dict[int, str] = {}  # unavailable node -> the pool it returns to
        self._shares: dict[int, dict[int, int]] = {}  # node -> {share: milli-GPUs left}
        inf = float("inf")
        self.cpus_free: list[float] = [n.cpus or inf for n in cluster.nodes]
        self.memory_free: list[float] = [n.memory_gb or inf for n in cluster.nodes]
        self._buckets: dict[tuple[str, str], list[set[int]]] = {}
        #: the same buckets as heaps with lazy deletion: best fit takes the lowest node of
        #: a bucket in O(log n) instead of min() over a set of up to every node
        self._heaps: dict[tuple[str, str], list[list[int]]] = {}
        for index, node in enumerate(cluster.nodes):
            pool = self.pool_of[index]
            self._bucket(pool, node.gpu_type)[node.num_gpus].add(index)
            self._heaps[(pool, node.gpu_type)][node.num_gpus].append(index)
            self.pool_free[pool] = self.pool_free.get(pool, 0) + node.num_gpus

    def _bucket(self, pool: str, gpu_type: str) -> list[set[int]]:
        key = (pool, gpu_type)
        buckets = self._buckets.get(key)
        if buckets is None:
            buckets = self._buckets[key] = [set() for _ in range(self._top)]
            self._heaps[key] = [[] for _ in range(self._top)]
        return buckets

    def _push(self, key: tuple[str, str], free: int, index: int) -> None:
        """``index`` joined bucket ``free`` of ``key``: into its heap too (compacted when
        stale entries outnumber the live ones)."""
        heap = self._heaps[key][free]
        heapq.heappush(heap, index)
        if len(heap) > 2 * len(self._buckets[key][free]) + 64:
            heap[:] = self._buckets[key][free]
            heapq.heapify(heap)

    def _lowest(self, key: tuple[str, str], free: int) -> int | None:
        """The lowest node in bucket ``free`` of ``key``, or None."""
        bucket = self._buckets[key][free]
        if not bucket:
            return None
        heap = self._heaps[key][free]
        while heap[0] not in bucket:
            heapq.heappop(heap)
        return heap[0]

    def _chosen(self, types: Iterable[str] | None, pool: str) -> list[list[set[int]]]:
        wanted = self.types if types is None else types
        return [b for t in wanted if (b := self._buckets.get((pool, t))) is not None]

    def set_pool(self, index: int, pool: str) -> None:
        """Move a node to another pool; jobs on it keep running. An unavailable node
        stays out of every pool: the move takes effect when it is available again."""
        if index in self._fenced:
            self._fenced[index] = pool
            return
        old = self.pool_of[index]
        if old == pool:
            return
        gpu_type = self.cluster.nodes[index].gpu_type
        self._bucket(old, gpu_type)[self.free[index]].discard(index)
        self._bucket(pool, gpu_type)[self.free[index]].add(index)
        self._push((pool, gpu_type), self.free[index], index)
        self.pool_of[index] = pool
        self.pool_free[old] -= self.free[index]
        self.pool_free[pool] = self.pool_free.get(pool, 0) + self.free[index]

    def set_unavailable(self, indices: Iterable[int]) -> None:
        """Exactly ``indices`` are unavailable now (the cluster manager drained, cordoned
        or lost them): they move to :data:`UNAVAILABLE_POOL`, where no placement looks,
        while their running jobs stay accounted there; the others that were unavailable
        return to the pool they were in (or the one a policy moved them to meanwhile)."""
        wanted = set(indices)
        for index in [i for i in self._fenced if i not in wanted]:
            self.set_pool(index, self._fenced.pop(index))
        for index in sorted(wanted - self._fenced.keys()):
            home = self.pool_of[index]
            self.set_pool(index, UNAVAILABLE_POOL)
            self._fenced[index] = home

    def unavailable(self) -> list[int]:
        """The nodes :meth:`set_unavailable` set apart, in node order."""
        return sorted(self._fenced)

    def pool_nodes(self, pool: str) -> list[int]:
        return [i for i, p in enumerate(self.pool_of) if p == pool]

    # -- updates ---------------------------------------------------------------
    def take(self, placement: Placement) -> None:
        """Mark the placement's GPUs busy; raises if any node would be over-committed."""
        hosts = placement.cpus > 0 or placement.memory_gb > 0
        if hosts:
            for index, _ in placement.parts:
                if not self.has_room(index, placement.cpus, placement.memory_gb):
                    raise ValueError(
                        f"node {self.cluster.nodes[index].name} has"
                        f" {self.cpus_free[index]:g} CPUs and {self.memory_free[index]:g} GB free,"
                        f" cannot take {placement.cpus:g} and {placement.memory_gb:g} GB"
                    )
        if placement.share is not None:
            self._join_share(placement)
        else:
            self._take_gpus(placement)
        if hosts:
            self._host(placement, -1.0)

    def _host(self, placement: Placement, sign: float) -> None:
        for index, _ in placement.parts:
            self.cpus_free[index] += sign * placement.cpus
            self.memory_free[index] += sign * placement.memory_gb

    def has_room(self, index: int, cpus: float, memory_gb: float) -> bool:
        """Whether node ``index`` has ``cpus`` and ``memory_gb`` free (1e-9: float sums)."""
        return self.cpus_free[index] + 1e-9 >= cpus and self.memory_free[index] + 1e-9 >= memory_gb

    def _take_gpus(self, placement: Placement) -> None:
        taken = 0
        for index, count in placement.parts:
            taken += count
            if count > self.free[index]:
                raise ValueError(
                    f"node {self.cluster.nodes[index].name} has {self.free[index]} free GPUs,"
                    f" cannot take {count}"
                )
        for index, count in placement.parts:
            self._move(index, self.free[index] - count)
        self.free_total -= taken

    def give_back(self, placement: Placement) -> None:
        if placement.share is not None:
            self._leave_share(placement)
        else:
            self._give_back_gpus(placement)
        if placement.cpus > 0 or placement.memory_gb > 0:
            self._host(placement, +1.0)

    def _give_back_gpus(self, placement: Placement) -> None:
        returned = 0
        for index, count in placement.parts:
            returned += count
            if self.free[index] + count > self.capacity[index]:
                raise ValueError(
                    f"node {self.cluster.nodes[index].name} would have more free GPUs than it has"
                )
        for index, count in placement.parts:
            self._move(index, self.free[index] + count)
        self.free_total += returned

    def _join_share(self, placement: Placement) -> None:
        """A fraction of one GPU: join its share, or open it on a whole free GPU."""
        assert placement.share is not None
        ((index, _),) = placement.parts
        left = self._shares.get(index, {}).get(placement.share)
        name = self.cluster.nodes[index].name
        if left is None and self.free[index] < 1:
            raise ValueError(f"node {name} has no free GPU to share")
        if placement.milli > (FULL_GPU if left is None else left):
            raise ValueError(
                f"node {name}: shared GPU {placement.share} has {left} milli-GPUs left,"
                f" cannot take {placement.milli}"
            )
        if left is None:
            self._move(index, self.free[index] - 1)
            self.free_total -= 1
            left = FULL_GPU
        self._shares.setdefault(index, {})[placement.share] = left - placement.milli

    def _leave_share(self, placement: Placement) -> None:
        assert placement.share is not None
        ((index, _),) = placement.parts
        shares = self._shares.get(index, {})
        left = shares.get(placement.share)
        if left is None or left + placement.milli > FULL_GPU:
            raise ValueError(
                f"node {self.cluster.nodes[index].name}: shared GPU {placement.share}"
                f" does not hold {placement.milli} milli-GPUs"
            )
        left += placement.milli
        if left < FULL_GPU:
            shares[placement.share] = left
            return
        del shares[placement.share]  # its last job ended: the GPU is whole again
        if not shares:
            del self._shares[index]
        self._move(index, self.free[index] + 1)
        self.free_total += 1

    def _move(self, index: int, new_free: int) -> None:
        pool = self.pool_of[index]
        key = (pool, self.cluster.nodes[index].gpu_type)
        buckets = self._buckets[key]
        old_free = self.free[index]
        self.pool_free[pool] += new_free - old_free
        capacity = self.capacity[index]
        buckets[old_free].discard(index)
        buckets[new_free].add(index)
        self._push(key, new_free, index)
        self.free[index] = new_free
        if 0 < old_free < capacity:
            self._fragmented -= old_free
        if 0 < new_free < capacity:
            self._fragmented += new_free

    # -- queries ---------------------------------------------------------------
    def best_fit(
        self, count: int, types: Iterable[str] | None = None, pool: str = MAIN_POOL
    ) -> int | None:
        """Node with the fewest free GPUs that still holds ``count``; ties go to node order."""
        wanted = self.types if types is None else types
        keys = [(pool, t) for t in wanted if (pool, t) in self._buckets]
        for k in range(count, self._top):
            best: int | None = None
            for key in keys:
                candidate = self._lowest(key, k)
                if candidate is not None and (best is None or candidate < best):
                    best = candidate
            if best is not None:
                return best
        return None

    def most_free(self, gpu_type: str, pool: str = MAIN_POOL) -> int:
        """The most GPUs free together on one node of ``gpu_type`` (0: none free)."""
        buckets = self._buckets.get((pool, gpu_type))
        if buckets is not None:
            for k in range(self._top - 1, 0, -1):
                if buckets[k]:
                    return k
        return 0

    def best_fit_where(
        self,
        count: int,
        types: Iterable[str] | None,
        pool: str,
        where: Callable[[int], bool],
    ) -> int | None:
        """:meth:`best_fit` among the nodes ``where`` accepts (CPUs, memory): slower, for
        the jobs that state such needs."""
        chosen = self._chosen(types, pool)
        for k in range(count, self._top):
            level = sorted(i for buckets in chosen for i in buckets[k])
            best = next((i for i in level if where(i)), None)
            if best is not None:
                return best
        return None

    def wholly_free(self, types: Iterable[str] | None = None, pool: str = MAIN_POOL) -> list[int]:
        """Nodes with every GPU free, in node order."""
        nodes: list[int] = []
        for buckets in self._chosen(types, pool):
            for k in range(1, len(buckets)):
                nodes.extend(i for i in buckets[k] if self.capacity[i] == k)
        nodes.sort()
        return nodes

    def lowest_uniform_wholly_free(
        self, count: int, types: Iterable[str] | None = None, pool: str = MAIN_POOL
    ) -> list[int]:
        """The first ``count`` of :meth:`wholly_free` on a cluster of identical nodes, from
        the heaps (O(count log n)), not a sort of every wholly free node."""
        top = self._top - 1
        wanted = self.types if types is None else types
        lowest: list[list[int]] = []
        for key in [(pool, t) for t in wanted if (pool, t) in self._buckets]:
            bucket, heap = self._buckets[key][top], self._heaps[key][top]
            taken: list[int] = []
            while heap and len(taken) < count:
                index = heapq.heappop(heap)
                if index in bucket and (not taken or taken[-1] != index):
                    taken.append(index)
            for index in taken:
                heapq.heappush(heap, index)
            lowest.append(taken)
        return list(heapq.merge(*lowest))[:count]

    def count_uniform_wholly_free(
        self, types: Iterable[str] | None = None, pool: str = MAIN_POOL
    ) -> int:
        """How many nodes have every GPU free, on a cluster of identical nodes (a count of
        buckets, no scan: a wide job that cannot fit learns it without a list)."""
        top = self._top - 1
        return sum(len(buckets[top]) for buckets in self._chosen(types, pool))

    def descending(self, types: Iterable[str] | None = None, pool: str = MAIN_POOL) -> list[int]:
        """Nodes with free GPUs, most free first, ties in node order."""
        chosen = self._chosen(types, pool)
        ordered: list[int] = []
        for k in range(self._top - 1, 0, -1):
            level: set[int] = set()
            for buckets in chosen:
                level |= buckets[k]
            ordered.extend(sorted(level))
        return ordered

    def best_share(
        self,
        milli: int,
        types: Iterable[str] | None = None,
        pool: str = MAIN_POOL,
        where: Callable[[int], bool] | None = None,
    ) -> tuple[int, int] | None:
        """(node, share) of the shared GPU with the fewest milli-GPUs left that still
        holds ``milli``: fractions consolidate, as whole GPUs do by best fit."""
        wanted = None if types is None else set(types)
        nodes = self.cluster.nodes
        best: tuple[int, int, int] | None = None
        for index, shares in self._shares.items():
            if self.pool_of[index] != pool:
                continue
            if wanted is not None and nodes[index].gpu_type not in wanted:
                continue
            if where is not None and not where(index):
                continue
            for share, left in shares.items():
                if left >= milli and (best is None or (left, index, share) < best):
                    best = (left, index, share)
        return None if best is None else (best[1], best[2])

    def new_share(self, index: int) -> int:
        """The label a GPU opened for sharing on node ``index`` gets: the lowest unused."""
        used = self._shares.get(index, {})
        return next(s for s in range(len(used) + 1) if s not in used)

    def shares_left(self, index: int) -> dict[int, int]:
        """Milli-GPUs left on each shared GPU of node ``index``."""
        return dict(self._shares.get(index, {}))

    def fragmented_free(self) -> int:
        """Free GPUs stranded on partly busy nodes (unusable by a whole-node job)."""
        return self._fragmented
