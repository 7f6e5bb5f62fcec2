"""``SortedSums.take_within`` is the entry-by-entry greedy walk, by block sums."""

from __future__ import annotations

import random

import pytest

from ilucid.core.sorted_sums import Entry, SortedSums


def _greedy(entries: list[Entry], low: Entry | None, high: Entry | None, budget: float):
    left = budget
    for entry in entries:
        if (low is not None and entry < low) or (high is not None and entry >= high):
            continue
        if entry[-1] > left:
            return left, entry
        left -= entry[-1]
    return left, None


@pytest.mark.parametrize("seed", range(40))
def test_take_within_matches_the_greedy_walk(seed: int) -> None:
    rng = random.Random(seed)
    sums = SortedSums(load=rng.choice([2, 4, 16]))
    entries: list[Entry] = []
    for seq in range(rng.randrange(0, 300)):
        entry = (float(rng.randrange(0, 50)), float(seq), float(rng.choice([1, 2, 4, 8])))
        sums.add(entry)
        entries.append(entry)
    for entry in rng.sample(entries, len(entries) // 4):
        sums.remove(entry)
        entries.remove(entry)
    entries.sort()
    assert sums.whole
    for _ in range(30):
        low = (float(rng.randrange(-1, 51)), -1.0, 0.0) if rng.random() < 0.7 else None
        high = (float(rng.randrange(-1, 51)), -1.0, 0.0) if rng.random() < 0.7 else None
        budget = rng.choice([0.0, 0.5, 3.25, float(rng.randrange(0, 400)), 399.1])
        assert sums.take_within(low, high, budget) == _greedy(entries, low, high, budget)


def test_a_fractional_weight_makes_the_sums_inexact() -> None:
    sums = SortedSums()
    sums.add((1.0, 0.0, 1.0))
    assert sums.whole
    sums.add((2.0, 1.0, 0.1))
    assert not sums.whole
    sums.remove((2.0, 1.0, 0.1))
    assert sums.whole


@pytest.mark.parametrize("seed", range(20))
def test_the_lowest_wholly_free_nodes_from_the_heaps_are_the_sorted_ones(seed: int) -> None:
    from ilucid.core.free_gpus import FreeGpus
    from ilucid.core.model import Cluster, Placement

    rng = random.Random(seed)
    free = FreeGpus(Cluster.homogeneous(rng.randrange(1, 60), 8))
    held: list[Placement] = []
    for _ in range(rng.randrange(0, 300)):
        if held and rng.random() < 0.4:
            free.give_back(held.pop(rng.randrange(len(held))))
            continue
        node = rng.randrange(len(free.free))
        if free.free[node]:
            placement = Placement(((node, rng.randrange(1, free.free[node] + 1)),))
            free.take(placement)
            held.append(placement)
        for count in (1, 2, 5):
            assert free.lowest_uniform_wholly_free(count) == free.wholly_free()[:count]
