"""SortedSums against a plain sorted list, under random adds and removes."""

from __future__ import annotations

import bisect

from hypothesis import given, settings
from hypothesis import strategies as st

from ilucid.core.sorted_sums import SortedSums

operations = st.lists(
    st.tuples(st.booleans(), st.integers(0, 50), st.integers(1, 8), st.integers(0, 60)),
    max_size=200,
)


@settings(max_examples=150, deadline=None)
@given(ops=operations, load=st.integers(1, 4))
def test_matches_a_sorted_list(ops: list[tuple[bool, int, int, int]], load: int) -> None:
    fast = SortedSums(load=load)
    plain: list[tuple[float, ...]] = []
    for seq, (remove, key, weight, probe) in enumerate(ops):
        if remove and plain:
            entry = plain[key % len(plain)]
            plain.remove(entry)
            fast.remove(entry)
        else:
            entry = (float(key), seq, weight)
            bisect.insort(plain, entry)
            fast.add(entry)
        bound = (float(probe), -1)
        assert fast.sum_below(bound) == sum(e[-1] for e in plain if e < bound)
        assert fast.total == sum(e[-1] for e in plain)
        assert len(fast) == len(plain)
        assert list(fast.iter_range(None, None)) == plain
        low = (float(probe // 2), -1)
        assert list(fast.iter_range(low, bound)) == [e for e in plain if low <= e < bound]
