"""A replay collects garbage rarely, and leaves the collector as it found it."""

from __future__ import annotations

import gc
import threading

import pytest

from ilucid.core import Cluster, JobSpec, make_policy
from ilucid.sim.engine import simulate
from ilucid.sim.quiet_gc import few_collections


def tracked(thing: object) -> bool:
    """Whether the collector scans ``thing`` (frozen objects are left out)."""
    return any(o is thing for o in gc.get_objects())


def test_a_replay_raises_the_threshold_and_restores_it() -> None:
    before = gc.get_threshold()
    old: list[int] = [1]  # existed before the replay: frozen during it, then thawed
    inside: list[tuple[tuple[int, int, int], bool]] = []
    with few_collections():
        inside.append((gc.get_threshold(), tracked(old)))
    threshold, old_tracked = inside[0]
    assert threshold[0] > before[0]
    assert not old_tracked
    assert gc.get_threshold() == before
    assert tracked(old)
    assert gc.get_freeze_count() == 0


def test_what_a_replay_leaves_goes_to_the_oldest_generation_unscanned() -> None:
    with few_collections():
        left: list[list[int]] = [[i] for i in range(1000)]
    oldest = gc.get_objects(generation=2)
    assert any(o is left for o in oldest)
    assert not any(o is left for o in gc.get_objects(generation=0))


def test_objects_frozen_by_someone_else_stay_frozen() -> None:
    theirs: list[int] = [1]
    gc.freeze()
    try:
        assert not tracked(theirs)
        with few_collections():
            mine: list[int] = [2]
            assert tracked(mine)
        assert not tracked(theirs)
    finally:
        gc.unfreeze()
    assert tracked(theirs)


def test_concurrent_replays_restore_once_the_last_one_ends() -> None:
    before = gc.get_threshold()
    inside = threading.Event()
    leave = threading.Event()

    def other() -> None:
        with few_collections():
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=other)
    thread.start()
    inside.wait(10)
    with few_collections():
        pass
    assert gc.get_threshold() != before  # the other replay still runs
    leave.set()
    thread.join(10)
    assert gc.get_threshold() == before


def test_a_failing_replay_restores_the_collector() -> None:
    before = gc.get_threshold()
    jobs = [JobSpec("too-big", 0.0, 16, 10.0)]
    with pytest.raises(ValueError, match="needs 16 GPUs"):
        simulate(jobs, Cluster.homogeneous(1, 8), make_policy("fifo"))
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def _busy_trace(count: int = 400) -> list[JobSpec]:
    """Jobs of 1-8 GPUs arriving faster than 2 nodes serve them: waits, preemptions,
    packing and starts of every kind."""
    return [
        JobSpec(f"j{i}", i * 90.0, (1, 2, 4, 8)[i % 4], 600.0 + (i * 7919) % 20_000,
                tenant=("a", "b")[i % 2], estimate=3600.0)
        for i in range(count)
    ]  # fmt: skip


@pytest.mark.parametrize("name", ["ilucid", "lucid", "tiered", "tiresias", "srtf", "fifo"])
def test_a_replay_leaves_no_reference_cycles(name: str) -> None:
    """Collecting rarely is safe only if a replay's objects die by reference counting.
    A compiled nested function refers back to its enclosing call, so one in a hot path
    once left 2.7 million objects per Philly replay for the collector."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        result = simulate(_busy_trace(), Cluster.homogeneous(2, 8), make_policy(name))
        assert sum(r.end >= 0 for r in result.records) == 400
        del result
        gc.collect()
        ours = [o for o in gc.garbage if type(o).__module__.startswith("ilucid")]
        kinds = sorted({type(o).__qualname__ for o in ours})
        assert not ours, f"{len(ours)} objects of ilucid's in reference cycles: {kinds}"
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
