"""SortedBlocks against a plain sorted list, under random inserts and removes."""

from __future__ import annotations

import bisect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ilucid.core.sorted_blocks import SortedBlocks

operations = st.lists(
    st.tuples(st.booleans(), st.integers(0, 30), st.integers(0, 35)), max_size=250
)


@settings(max_examples=150, deadline=None)
@given(ops=operations, load=st.integers(1, 5))
def test_matches_a_sorted_list(ops: list[tuple[bool, int, int]], load: int) -> None:
    fast = SortedBlocks(load=load)
    plain: list[tuple[int, int]] = []
    for seq, (remove, key, probe) in enumerate(ops):
        if remove and plain:
            value = plain[key % len(plain)]
            plain.remove(value)
            fast.remove(value)
        else:
            value = (key // 3, seq % 4)  # duplicates: equal pairs recur
            bisect.insort(plain, value)
            fast.add(value)
        assert len(fast) == len(plain) and bool(fast) == bool(plain)
        assert list(fast) == plain
        bound = (probe // 3, 1)
        assert fast.bisect_left(bound) == bisect.bisect_left(plain, bound)
        assert fast.bisect_right(bound) == bisect.bisect_right(plain, bound)
        assert [fast.at(i) for i in range(len(plain))] == plain
        walked = []
        position = fast.first()
        while position is not None:
            walked.append(position[0])
            position = fast.following(position[1], position[2])
        assert walked == plain


def test_removing_an_absent_element_and_indexing_past_the_end_fail() -> None:
    blocks = SortedBlocks(load=2)
    for value in (1.0, 2.0, 3.0):
        blocks.add(value)
    with pytest.raises(ValueError, match=r"2\.5"):
        blocks.remove(2.5)
    with pytest.raises(IndexError):
        blocks.at(3)
    assert SortedBlocks().first() is None
