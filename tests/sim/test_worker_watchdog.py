"""A worker that has not exited a bounded time after its result arrived is killed and
named (issue 30): the caller never waits for ever on a worker whose work is done."""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
import re
import time
from collections.abc import Iterator, Sequence

import pytest

from ilucid.core import Cluster, JobSpec
from ilucid.core.arg_reader import NoArgs
from ilucid.core.framework import (
    BuildContext,
    Part,
    Phase,
    PluginRef,
    PluginSpec,
    plugin_spec,
    register,
)
from ilucid.core.policies import PROFILES, register_profile
from ilucid.sim.forked import WorkerStuck, forked_map, run_forked
from ilucid.sim.runner import run_policies

BOUND_S = 2.0


def _linger(parent: int) -> None:
    """A non-daemonic child that ends only when its parent is gone (as a fit process
    does): multiprocessing's exit in the parent waits for it for ever."""
    while os.getppid() == parent:
        time.sleep(0.1)


def _leave_a_child(value: int) -> int:
    if value == 1:
        mp.get_context("fork").Process(target=_linger, args=(os.getpid(),)).start()
    return value * 10


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.timeout(60)
def test_a_worker_that_does_not_exit_after_its_result_is_killed_and_named() -> None:
    started = time.monotonic()
    outcomes = list(
        run_forked(_leave_a_child, [0, 1, 2], 3, ["first", "lingers", "third"], BOUND_S)
    )
    took = time.monotonic() - started
    assert [o.value for o in outcomes] == [0, 10, 20]  # its result still came back
    assert [o.stuck is None for o in outcomes] == [True, False, True]
    stuck = outcomes[1].stuck
    assert stuck is not None
    assert stuck.pid == outcomes[1].pid and stuck.label == "lingers"
    assert f"the worker of lingers (pid {stuck.pid}) had not exited 2 s" in str(stuck)
    assert BOUND_S <= took < BOUND_S + 15
    assert _gone(stuck.pid)


@pytest.mark.timeout(60)
def test_forked_map_raises_for_a_worker_that_does_not_exit() -> None:
    with pytest.raises(WorkerStuck, match=r"the worker of item 1 \(pid \d+\)"):
        list(forked_map(_leave_a_child, range(3), 2, exit_within_s=BOUND_S))


@pytest.fixture
def lingering_profile() -> Iterator[str]:
    """fifo, under a name whose build leaves a lingering child in a worker process (a
    site's profile could); built in the test's own process, it leaves none."""
    here = os.getpid()
    head_of_line = plugin_spec("head-of-line")

    def build(args: object, context: BuildContext, parts: Sequence[Part]) -> object:
        if os.getpid() != here:
            mp.get_context("fork").Process(target=_linger, args=(os.getpid(),)).start()
        return head_of_line.build(args, context, parts)

    register(PluginSpec("lingering-head-of-line", Phase.PLAN, "lingers", NoArgs.decode, build))
    name = "lingers"
    fifo = PROFILES["fifo"]
    plugins = (fifo.plugins[0], PluginRef(Phase.PLAN, "lingering-head-of-line"))
    register_profile(dataclasses.replace(fifo, name=name, plugins=plugins))
    try:
        yield name
    finally:
        del PROFILES[name]


@pytest.mark.timeout(120)
def test_the_runner_fails_the_replay_whose_worker_does_not_exit(lingering_profile: str) -> None:
    jobs = [JobSpec(f"j{i}", i * 60.0, 1 + i % 4, 900.0 + 30 * i) for i in range(60)]
    started = time.monotonic()
    runs = run_policies(
        jobs,
        Cluster.homogeneous(2, 4),
        ["fifo", lingering_profile, "sjf"],
        processes=2,
        exit_within_s=BOUND_S,
    )
    took = time.monotonic() - started
    assert [r.name for r in runs] == ["fifo", "lingers", "sjf"]
    assert runs[0].result is not None and runs[2].result is not None
    failed = runs[1]
    assert failed.result is None and failed.error is not None
    found = re.search(r"the worker of lingers \(pid (\d+)\) had not exited 2 s", failed.error)
    assert found, failed.error
    assert _gone(int(found.group(1)))
    assert took < BOUND_S + 30
