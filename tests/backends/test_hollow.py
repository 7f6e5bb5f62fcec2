"""The hollow backend (benchmarks only): it keeps the backend contract on nodes that
exist in memory, and ends jobs on a schedule drawn from durations."""

from __future__ import annotations

import statistics

import pytest

from ilucid.backends.base import ProcessState
from ilucid.backends.hollow import HOLLOW_EXIT_STOPPED, HollowBackend, HollowDurations


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _backend(clock: Clock, **kwargs: object) -> HollowBackend:
    durations = HollowDurations((10.0, 20.0, 30.0), mean_s=20.0, seed=3)
    return HollowBackend(4, 8, durations, clock=clock, **kwargs)  # type: ignore[arg-type]


def test_it_books_the_placement_and_reports_the_job_until_it_ends() -> None:
    clock = Clock()
    backend = _backend(clock)
    node = backend.cluster.nodes[1].name
    gpus = backend.start("j1", ["train"], 3, placement=[(node, 3)])
    assert gpus == (0, 1, 2)
    seen = backend.observe().jobs["j1"]
    assert seen.state is ProcessState.RUNNING and seen.parts == ((node, 3),)
    # the same node's next job gets the GPUs left
    assert backend.start("j2", ["train"], 5, placement=[(node, 5)]) == (3, 4, 5, 6, 7)
    # a full node refuses (None: not free yet), as a real backend while GPUs are held
    assert backend.start("j3", ["train"], 1, placement=[(node, 1)]) is None
    clock.now += 31  # longer than any drawn run time
    ended = backend.observe().jobs
    assert ended["j1"].state is ProcessState.EXITED and ended["j1"].exit_code == 0
    assert backend.start("j3", ["train"], 1, placement=[(node, 1)]) == (0,)


def test_stop_ends_the_job_as_a_signal_would_and_forget_drops_it() -> None:
    clock = Clock()
    backend = _backend(clock)
    node = backend.cluster.nodes[0].name
    backend.start("j1", ["train"], 8, placement=[(node, 8)])
    backend.stop("j1")
    seen = backend.observe().jobs["j1"]
    assert seen.state is ProcessState.EXITED and seen.exit_code == HOLLOW_EXIT_STOPPED
    backend.forget("j1")
    assert "j1" not in backend.observe().jobs
    # its GPUs are free again, and the job may start again (a preempted job's restart)
    assert backend.start("j1", ["train"], 8, placement=[(node, 8)]) == tuple(range(8))


def test_a_running_job_is_never_started_twice_and_placements_are_checked() -> None:
    backend = _backend(Clock())
    node = backend.cluster.nodes[0].name
    backend.start("j1", ["train"], 1, placement=[(node, 1)])
    with pytest.raises(ValueError, match="already running"):
        backend.start("j1", ["train"], 1, placement=[(node, 1)])
    with pytest.raises(ValueError, match="no node"):
        backend.start("j2", ["train"], 1, placement=[("nowhere", 1)])
    with pytest.raises(ValueError, match="placement"):
        backend.start("j3", ["train"], 1)


def test_run_times_are_the_durations_scaled_to_the_mean() -> None:
    clock = Clock()
    durations = HollowDurations((1.0, 2.0, 3.0), mean_s=200.0, seed=1)
    backend = HollowBackend(500, 8, durations, clock=clock)
    for index, node in enumerate(backend.cluster.nodes):
        backend.start(f"j{index}", ["train"], 8, placement=[(node.name, 8)])
    ends = sorted(job.ends_at - clock.now for job in backend._jobs.values())
    assert set(round(end) for end in ends) == {100, 200, 300}  # 1, 2, 3 x (200 / 2)
    assert statistics.fmean(ends) == pytest.approx(200.0, rel=0.1)


def test_jobs_found_running_end_at_the_steady_rate_from_the_first_pass() -> None:
    """Without it, the many short jobs of a fresh fill end at once: with durations of
    2 s and 198 s (mean 100 s), half the fill would end before its first 2 s pass."""
    clock = Clock()
    durations = HollowDurations((2.0, 198.0), mean_s=100.0, seed=5)
    counts = {}
    for found in (False, True):
        backend = HollowBackend(
            2000, 8, durations, clock=clock, found_running=found, pass_interval_s=2.0
        )
        for index, node in enumerate(backend.cluster.nodes):
            for gpu in range(8):
                backend.start(f"j{index}-{gpu}", ["t"], 1, placement=[(node.name, 1)])
        start = clock.now
        backend.observe()  # the pass after the fill
        clock.now = start + 2.0
        ended = sum(j.state is ProcessState.EXITED for j in backend.observe().jobs.values())
        counts[found] = ended / 16_000
        clock.now = start
    assert counts[False] == pytest.approx(0.5, abs=0.03)
    # steady state: a job holds its GPUs for 1 pass (2 s) or 99 passes, half of each, so
    # 1 / mean(1, 99) = 2 % of the running jobs end per pass
    assert counts[True] == pytest.approx(0.02, abs=0.005)


def test_durations_are_checked() -> None:
    with pytest.raises(ValueError):
        HollowDurations((), mean_s=1.0)
    with pytest.raises(ValueError):
        HollowDurations((1.0, -2.0), mean_s=1.0)
    with pytest.raises(ValueError):
        HollowDurations((1.0,), mean_s=0.0)
