"""A sorted list in blocks: insert and remove without moving the whole list.

A plain sorted list moves every element after the one inserted or removed: at
100k pending jobs a start took a 55k-entry memmove (a tenth of a cold pass), and
the partner index and the window of finished run times paid the same. Blocks of
at most ``2 * load`` elements bound that to one block; the order, ranks and
positions are a plain sorted list's.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import Any

__all__ = ["SortedBlocks"]


class SortedBlocks:
    """Sorted elements (duplicates allowed) with a sorted list's ranks and positions.

    Elements are compared with ``<`` only; a position is a (block, offset) pair,
    valid until the next insert or remove."""

    __slots__ = ("_blocks", "_len", "_load", "_maxes")

    def __init__(self, load: int = 256) -> None:
        self._load = load
        self._blocks: list[list[Any]] = []
        self._maxes: list[Any] = []  # the last element of each block
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def __iter__(self) -> Iterator[Any]:
        for block in self._blocks:
            yield from block

    def add(self, value: Any) -> None:
        """Insert ``value`` after any equal ones (as ``bisect.insort``)."""
        self._len += 1
        blocks, maxes = self._blocks, self._maxes
        if not blocks:
            blocks.append([value])
            maxes.append(value)
            return
        i = bisect.bisect_right(maxes, value)
        if i == len(maxes):
            i -= 1
            blocks[i].append(value)
            maxes[i] = value
        else:
            bisect.insort(blocks[i], value)
        block = blocks[i]
        if len(block) > 2 * self._load:
            half = block[self._load :]
            del block[self._load :]
            blocks.insert(i + 1, half)
            maxes[i] = block[-1]
            maxes.insert(i + 1, half[-1])

    def remove(self, value: Any) -> None:
        """Remove the first element equal to ``value`` (ValueError: none)."""
        blocks, maxes = self._blocks, self._maxes
        i = bisect.bisect_left(maxes, value)
        if i < len(maxes):
            block = blocks[i]
            j = bisect.bisect_left(block, value)
            if j < len(block) and not value < block[j] and not block[j] < value:
                del block[j]
                self._len -= 1
                if not block:
                    del blocks[i], maxes[i]
                elif j == len(block):
                    maxes[i] = block[-1]
                return
        raise ValueError(f"{value!r} is not in the list")

    def bisect_left(self, value: Any) -> int:
        """How many elements are less than ``value``."""
        i = bisect.bisect_left(self._maxes, value)
        before = sum(len(self._blocks[k]) for k in range(i))
        if i < len(self._blocks):
            before += bisect.bisect_left(self._blocks[i], value)
        return before

    def bisect_right(self, value: Any) -> int:
        """How many elements are at most ``value``."""
        i = bisect.bisect_right(self._maxes, value)
        before = sum(len(self._blocks[k]) for k in range(i))
        if i < len(self._blocks):
            before += bisect.bisect_right(self._blocks[i], value)
        return before

    def at(self, index: int) -> Any:
        """The element at ``index`` (0-based, from the first) of the sorted order."""
        if not 0 <= index < self._len:
            raise IndexError(index)
        for block in self._blocks:
            if index < len(block):
                return block[index]
            index -= len(block)
        raise IndexError(index)  # unreachable: _len counts the blocks' elements

    def first(self) -> tuple[Any, int, int] | None:
        """The first element and its position, or None when empty."""
        if not self._blocks:
            return None
        return self._blocks[0][0], 0, 0

    def following(self, block: int, offset: int) -> tuple[Any, int, int] | None:
        """The element after position ``(block, offset)`` and its position, or None."""
        blocks = self._blocks
        offset += 1
        if offset == len(blocks[block]):
            block, offset = block + 1, 0
            if block == len(blocks):
                return None
        return blocks[block][offset], block, offset
