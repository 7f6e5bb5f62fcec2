"""The walk's prefix cursor gives ``sum_below``'s sums to the last bit, in any bound order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ilucid.core.sorted_sums import SortedSums

entries = st.lists(
    st.tuples(st.integers(0, 80), st.sampled_from([1.0, 2.0, 8.0, 0.1, 0.3, 1.7])),
    max_size=300,
)
bounds = st.lists(st.integers(-5, 90), min_size=1, max_size=40)


@settings(max_examples=200, deadline=None)
@given(items=entries, probes=bounds, load=st.integers(1, 8), ascending=st.booleans())
def test_a_cursor_sums_as_sum_below(
    items: list[tuple[int, float]], probes: list[int], load: int, ascending: bool
) -> None:
    sums = SortedSums(load=load)
    for seq, (key, weight) in enumerate(items):
        sums.add((float(key), seq, weight))
    cursor = sums.cursor()
    for probe in sorted(probes) if ascending else probes:
        bound = (float(probe), -1)
        # fractional weights: only the same additions in the same order give equal sums
        assert cursor.sum_below(bound) == sums.sum_below(bound)
