"""Policies replayed in worker processes: results come back, and a failure fails the run.

With ``multiprocessing.Pool``, a result the parent could not unpickle killed the
pool's result thread and the caller waited for ever (a compiled class's pickling
bug hung ``ilucid simulate`` that way); the runner must raise instead.
"""

from __future__ import annotations

import copyreg
from collections.abc import Iterator
from concurrent.futures.process import BrokenProcessPool

import pytest

from ilucid.core import Cluster, JobSpec
from ilucid.sim.runner import PolicyRun, run_policies


def _jobs() -> list[JobSpec]:
    return [JobSpec(f"j{i}", i * 60.0, 1 + i % 4, 900.0 + 30 * i) for i in range(60)]


def test_two_processes_give_what_one_gives() -> None:
    cluster = Cluster.homogeneous(2, 4)
    alone = run_policies(_jobs(), cluster, ["fifo", "sjf"], processes=1)
    together = run_policies(_jobs(), cluster, ["fifo", "sjf"], processes=2)
    for one, two in zip(alone, together, strict=True):
        assert one.result is not None and two.result is not None
        assert [(r.id, r.first_start, r.end) for r in one.result.records] == [
            (r.id, r.first_start, r.end) for r in two.result.records
        ]


def _unreadable() -> None:
    raise RuntimeError("this result cannot be read back")


def _reduce_unreadably(run: PolicyRun) -> tuple[object, tuple[()]]:
    return _unreadable, ()


@pytest.fixture
def unreadable_results() -> Iterator[None]:
    """Workers (forked after this) pickle a run so that unpickling it raises."""
    copyreg.pickle(PolicyRun, _reduce_unreadably)
    try:
        yield
    finally:
        del copyreg.dispatch_table[PolicyRun]


@pytest.mark.timeout(120)
def test_a_result_that_cannot_be_read_back_fails_the_run(unreadable_results: None) -> None:
    with pytest.raises(BrokenProcessPool):
        run_policies(_jobs(), Cluster.homogeneous(2, 4), ["fifo", "sjf"], processes=2)


def _square(value: int) -> int:
    return value * value


def _unreadable_square(value: int) -> object:
    return _Unreadable() if value == 3 else value * value


class _Unreadable:
    def __reduce__(self) -> tuple[object, tuple[()]]:
        return _unreadable, ()


def test_forked_map_keeps_the_order_and_fails_on_an_unreadable_result() -> None:
    """The helper behind mixed, hetero, hybrid and fragmentation's worker processes."""
    from ilucid.sim.forked import forked_map

    assert list(forked_map(_square, range(6), 2)) == [0, 1, 4, 9, 16, 25]
    with pytest.raises(BrokenProcessPool):
        list(forked_map(_unreadable_square, range(6), 2))
