"""The replay acts on decisions' typed fields, never on the numbers in their reasons."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Iterator

import pytest
from pure_python import pure_env, runs_compiled

from ilucid.core import (
    Cluster,
    JobSpec,
    Node,
    PoolSpec,
    Reason,
    Scheduler,
    SchedulerConfig,
    make_policy,
)
from ilucid.sim.engine import Replay, simulate


@pytest.fixture
def reasons_without_numbers(
    monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[bool]:
    """Strip every decision's reasons of their numbers before the replay sees them.

    A compiled core's classes cannot be patched: there the test runs again on the
    Python sources (the same code; tests/test_native.py checks that a
    replay is the same either way) and yields False."""
    if runs_compiled():
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", request.node.nodeid],
            cwd=request.config.rootpath,
            env=pure_env(),
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        yield False
        return
    schedule = Scheduler.schedule

    def stripped(self: Scheduler, now: float) -> list:  # type: ignore[type-arg]
        return [
            dataclasses.replace(d, reasons=tuple(Reason(r.code, r.message) for r in d.reasons))
            for d in schedule(self, now)
        ]

    monkeypatch.setattr(Scheduler, "schedule", stripped)
    yield True


def _preempting_run() -> dict[str, tuple[float, float, float]]:
    jobs = [JobSpec("long", 0.0, 4, 1000.0), JobSpec("short", 250.0, 4, 10.0)]
    config = SchedulerConfig(checkpoint_s=100.0)
    result = simulate(jobs, Cluster.homogeneous(1, 4), make_policy("srtf"), config)
    return {r.id: (r.end, r.lost_work_s, r.preemptions) for r in result.records}


def test_preemption_costs_come_from_the_fields(reasons_without_numbers: bool) -> None:
    if not reasons_without_numbers:
        return  # it ran in pure Python (the fixture)
    # long: 250 s run, 50 s lost since its checkpoint, 40 s restore; restarts at 260
    # with 1000 - 250 + 50 + 40 = 840 s of work left -> ends at 1100
    assert _preempting_run() == {"long": (1100.0, 50.0, 1), "short": (260.0, 0.0, 0)}


def test_startup_comes_from_the_field(reasons_without_numbers: bool) -> None:
    if not reasons_without_numbers:
        return  # it ran in pure Python (the fixture)
    # b bursts to the cloud at 0 and holds its GPUs through the 300 s start-up
    config = SchedulerConfig(pools={"cloud": PoolSpec("cloud", 2.5, 300.0)}, value_of_wait=10.0)
    cluster = Cluster((Node("onprem", 4), Node("cloud0", 4, labels={"pool": "cloud"})))
    jobs = [JobSpec("a", 0, 4, 1000, estimate=1000), JobSpec("b", 0, 4, 100, estimate=100)]
    result = simulate(jobs, cluster, make_policy("fifo"), config)
    b = next(r for r in result.records if r.id == "b")
    assert (b.first_start, b.end, b.startup_s) == (0.0, 400.0, 300.0)


def test_simulate_is_a_replay() -> None:
    jobs = [JobSpec("long", 0.0, 4, 1000.0), JobSpec("short", 250.0, 4, 10.0)]
    config = SchedulerConfig(checkpoint_s=100.0)
    replay = Replay(jobs, Cluster.homogeneous(1, 4), make_policy("srtf"), config)
    result = replay.run()
    assert {r.id: (r.end, r.lost_work_s, r.preemptions) for r in result.records} == (
        _preempting_run()
    )
    assert replay.done == 2 and not replay.truth  # every job's truth is forgotten at its end
