"""A sorted multiset of tuples with fast prefix sums of their last element.

Preemptive re-planning must ask "how many GPUs do the running jobs ahead of
this pending job hold?" thousands of times per simulated day. Blocks of at
most ``2 * load`` sorted entries with a per-block sum answer that in
O(number of blocks + block size), about O(sqrt n), without leaving the
standard library.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator

__all__ = ["PrefixCursor", "SortedSums"]

Entry = tuple[float, ...]


class SortedSums:
    """Sorted distinct entries; ``entry[-1]`` is the weight that is summed."""

    __slots__ = ("_blocks", "_fractional", "_load", "_maxes", "_sums", "_weights", "total")

    def __init__(self, load: int = 64) -> None:
        self._load = load
        self._blocks: list[list[Entry]] = []
        self._weights: list[list[float]] = []  # entry weights, parallel to _blocks
        self._maxes: list[Entry] = []
        self._sums: list[float] = []
        self.total = 0.0
        self._fractional = 0  # entries whose weight is not a whole number

    def __len__(self) -> int:
        return sum(len(b) for b in self._blocks)

    def __bool__(self) -> bool:
        return bool(self._blocks)

    @property
    def whole(self) -> bool:
        """Every weight is a whole number: sums are exact, in any order."""
        return self._fractional == 0

    def add(self, entry: Entry) -> None:
        weight = entry[-1]
        self.total += weight
        if weight != int(weight):
            self._fractional += 1
        if not self._blocks:
            self._blocks.append([entry])
            self._weights.append([weight])
            self._maxes.append(entry)
            self._sums.append(weight)
            return
        i = bisect.bisect_left(self._maxes, entry)
        if i == len(self._maxes):
            i -= 1
            self._blocks[i].append(entry)
            self._weights[i].append(weight)
            self._maxes[i] = entry
        else:
            j = bisect.bisect_left(self._blocks[i], entry)
            self._blocks[i].insert(j, entry)
            self._weights[i].insert(j, weight)
        self._sums[i] += weight
        block = self._blocks[i]
        if len(block) > 2 * self._load:
            weights = self._weights[i]
            half, half_weights = block[self._load :], weights[self._load :]
            del block[self._load :], weights[self._load :]
            self._blocks.insert(i + 1, half)
            self._weights.insert(i + 1, half_weights)
            self._maxes[i] = block[-1]
            self._maxes.insert(i + 1, half[-1])
            moved = sum(half_weights)
            self._sums[i] -= moved
            self._sums.insert(i + 1, moved)

    def remove(self, entry: Entry) -> None:
        i = bisect.bisect_left(self._maxes, entry)
        if i == len(self._maxes):
            raise KeyError(entry)
        block = self._blocks[i]
        j = bisect.bisect_left(block, entry)
        if j == len(block) or block[j] != entry:
            raise KeyError(entry)
        del block[j], self._weights[i][j]
        self._sums[i] -= entry[-1]
        self.total -= entry[-1]
        if entry[-1] != int(entry[-1]):
            self._fractional -= 1
        if not block:
            del self._blocks[i], self._weights[i], self._maxes[i], self._sums[i]
        elif j == len(block):
            self._maxes[i] = block[-1]

    def sum_below(self, bound: Entry) -> float:
        """Total weight of entries strictly less than ``bound``."""
        i = bisect.bisect_left(self._maxes, bound)
        total = sum(self._sums[:i], 0.0)
        if i < len(self._blocks):
            block = self._blocks[i]
            j = bisect.bisect_left(block, bound)
            total += sum(self._weights[i][:j], 0.0)
        return total

    def cursor(self) -> PrefixCursor:
        """A :class:`PrefixCursor` over these entries (valid while they do not change)."""
        return PrefixCursor(self)

    def take_within(
        self, low: Entry | None, high: Entry | None, budget: float
    ) -> tuple[float, Entry | None]:
        """Walk the entries ``low <= e < high`` in order, taking each while its weight
        fits what is left of ``budget``: what is left, and the first entry that did
        not fit (None: all fitted). Whole blocks are taken by their sums, so call it
        only when :attr:`whole`: subtracting whole numbers from the budget is then exact,
        so what is left equals the entry-by-entry walk's to the last bit."""
        blocks, weights, maxes, sums = self._blocks, self._weights, self._maxes, self._sums
        if low is None:
            i, j = 0, 0
        else:
            i = bisect.bisect_left(maxes, low)
            if i == len(blocks):
                return budget, None
            j = bisect.bisect_left(blocks[i], low)
        left = budget
        while i < len(blocks):
            block = blocks[i]
            if j == 0 and (high is None or block[-1] < high) and sums[i] <= left:
                left -= sums[i]
            else:
                block_weights = weights[i]
                for k in range(j, len(block)):
                    entry = block[k]
                    if high is not None and entry >= high:
                        return left, None
                    if block_weights[k] > left:
                        return left, entry
                    left -= block_weights[k]
            i += 1
            j = 0
        return left, None

    def iter_range(self, low: Entry | None, high: Entry | None) -> Iterator[Entry]:
        """Entries ``e`` with ``low <= e < high`` in order (``None`` = unbounded)."""
        blocks = self._blocks
        if low is None:
            i, j = 0, 0
        else:
            i = bisect.bisect_left(self._maxes, low)
            if i == len(blocks):
                return
            j = bisect.bisect_left(blocks[i], low)
        while i < len(blocks):
            block = blocks[i]
            for k in range(j, len(block)):
                entry = block[k]
                if high is not None and entry >= high:
                    return
                yield entry
            i += 1
            j = 0


class PrefixCursor:
    """:meth:`SortedSums.sum_below` for a run of bounds that mostly grow (a re-plan walk
    asks one per pending candidate, in order): what lies below the last bound (whole
    blocks, then the head of the block it fell in) is summed once, not again for every
    bound, so a walk costs O(blocks + entries passed) in all. The sums are the same
    additions in the same order as ``sum_below``'s (each a left-to-right sum from 0.0),
    so equal to the last bit. Valid only while the entries do not change."""

    __slots__ = ("_acc", "_index", "_offset", "_partial", "_sums")

    def __init__(self, sums: SortedSums) -> None:
        self._sums = sums
        self._index = 0  # blocks [0, _index) all lie below the last bound
        self._acc = 0.0  # their summed weight, added left to right from 0.0
        self._offset = 0  # entries [0, _offset) of block _index lie below it too
        self._partial = 0.0  # their summed weight, added left to right from 0.0

    def sum_below(self, bound: Entry) -> float:
        """Total weight of entries strictly less than ``bound``."""
        owner = self._sums
        maxes, sums = owner._maxes, owner._sums
        i, acc = self._index, self._acc
        offset, partial = self._offset, self._partial
        if (i > 0 and not maxes[i - 1] < bound) or (
            offset > 0 and not owner._blocks[i][offset - 1] < bound
        ):  # a lower bound than before: start over
            i, acc, offset, partial = 0, 0.0, 0, 0.0
        count = len(maxes)
        while i < count and maxes[i] < bound:
            acc += sums[i]
            i += 1
            offset, partial = 0, 0.0
        total = acc
        if i < count:
            block, weights = owner._blocks[i], owner._weights[i]
            end = bisect.bisect_left(block, bound, offset)
            for k in range(offset, end):
                partial += weights[k]
            offset = end
            total += partial
        self._index, self._acc, self._offset, self._partial = i, acc, offset, partial
        return total
