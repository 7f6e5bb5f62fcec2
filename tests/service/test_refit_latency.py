"""A duration-model refit on a Dask worker leaves the reconcile pass's p99 latency
within 10% of passes without one (issue 20).

Why the comparison is fair: the refit starts where the live service starts it
(``maybe_refit`` at the end of the pass that records a finished job) and runs in
another process, a Dask worker; the reconcile thread only hands it over and then
finds its future still running. The worker stands in for one on another host:
after its first fit it shares the loop thread's CPU under SCHED_IDLE, so it fits
only while the loop waits between passes. Run beside the loop on this machine's
other vCPU instead, the fit slowed every pass (medians too) by 20-45% on a quiet
machine even under SCHED_IDLE, and by 40-80% at nice 0: the cost of sharing two
vCPUs, which a worker on its own host does not impose. Both conditions run the
same live loop (``service.run`` in its own thread, as ``ilucid serve`` does) on
the same service (SQLite, local backend, 16 virtual GPUs: 14 held by running jobs,
100 pending jobs too large for the 2 free ones, 12,000 finished jobs to fit on),
and every block starts and ends one short job; only each second finished job
(``refit_every=2``) starts a refit. Blocks alternate (without, with, without, ...)
and a block without lasts as long as the block with a refit before it, so whatever
else loads the machine (``pytest -n 2``) hits both alike. A p99 is a tail figure
on shared cores: the check is repeated up to three times and passes when one
attempt holds; p99s under 2 ms count as 2 ms. It fails when the refit runs in the
reconcile thread (that pass lasts the whole fit: p99 ~2 s against ~20 ms) or in a
thread of the service's process (the fit holds the GIL: p99 1.2-1.8x).
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_refit_on_dask import _history, _worker, scheduler  # noqa: F401

from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory
from ilucid.core import Decision
from ilucid.service.db import make_engine
from ilucid.service.duration_keeper import DurationKeeper
from ilucid.service.job_store import JobRequest
from ilucid.service.scheduler_service import SchedulerService

pytestmark = pytest.mark.xdist_group("dask")

HISTORY = 12_000  # finished jobs: a refit on them takes one to three seconds of a core
GPUS, HELD, PENDING = 16, 14, 100
INTERVAL_S = 0.002  # the live loop's pass interval (``serve --interval``)
CPU = min(os.sched_getaffinity(0))  # the loop's and the worker's
FLOOR_S = 0.002  # p99s under this count as this
PAIRS = 3  # blocks with a refit per attempt (and as many without)
ATTEMPTS = 3
POLL_S = 0.02  # how often the test looks at the keeper (as an API client might)
FIRST_BLOCK_S = 2.0  # the first block without a refit (later ones: the last refit's)


def p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


class TimedService(SchedulerService):
    """The live service; each reconcile pass timed and tagged with the block it began in."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.block = -1
        self.passes: list[tuple[int, float]] = []
        super().__init__(*args, **kwargs)

    def reconcile(self) -> list[Decision]:
        block, start = self.block, time.perf_counter()
        try:
            return super().reconcile()
        finally:
            self.passes.append((block, time.perf_counter() - start))


def _wait(done: Callable[[], bool], seconds: float, what: str) -> None:
    """Poll every POLL_S (alike in both kinds of block: the poll takes the GIL too)."""
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(POLL_S)


class Blocks:
    """Runs the blocks (one short job each; every second one starts a refit)."""

    def __init__(self, service: TimedService, keeper: DurationKeeper) -> None:
        self.service = service
        self.keeper = keeper
        self.refits: list[int] = []

    def run(self, refit: bool, at_least_s: float) -> float:
        """One block: its job submitted, until it is recorded (and, with ``refit``, the
        refit it starts is installed) and at least ``at_least_s`` went by; its length."""
        finished, version = self.keeper.live.finished_jobs, self.keeper.live.version
        began = time.monotonic()
        self.service.block += 1
        if refit:
            self.refits.append(self.service.block)
        self.service.submit(JobRequest(["true"], gpus=1, user="ann", tenant="vision"))
        _wait(lambda: self.keeper.live.finished_jobs > finished, 30, "the block's job")
        if refit:
            # a guard against a hang, not a speed check: the worker runs under SCHED_IDLE,
            # and on a CI machine busy with other tests a 6 s refit once took 43 s
            _wait(lambda: self.keeper.live.version > version, 300, "the block's refit")
        _wait(lambda: time.monotonic() - began >= at_least_s, at_least_s + 1, "the block's end")
        assert (self.keeper.live.version > version) == refit, "a refit where none was due"
        assert refit or not self.keeper.status()["refitting"], "a refit where none was due"
        return time.monotonic() - began

    def attempt(self) -> tuple[list[float], list[float]]:
        """PAIRS blocks without a refit and PAIRS with, alternating: pass times of each."""
        first = self.service.block + 1
        length = FIRST_BLOCK_S
        for _ in range(PAIRS):
            self.run(False, length)
            length = self.run(True, 0.0)
        self.service.block += 1  # passes from here on belong to no block
        ours = [(b, s) for b, s in list(self.service.passes) if b >= first]
        during = [s for b, s in ours if b in self.refits]
        return [s for b, s in ours if b not in self.refits], during


def _within(base: float, refit: float) -> bool:
    return refit <= 1.10 * max(base, FLOOR_S)


def _refit_latency(service: TimedService, keeper: DurationKeeper) -> None:
    """Up to ATTEMPTS attempts; passes when one attempt's p99s hold."""
    blocks = Blocks(service, keeper)
    figures = []
    for _ in range(ATTEMPTS):
        without, during = blocks.attempt()
        base, refit = p99(without), p99(during)
        figures.append(
            f"{base * 1000:.2f} ms ({len(without)} passes) -> {refit * 1000:.2f} ms"
            f" ({len(during)} passes)"
        )
        print(
            f"reconcile pass p99 without a refit {base * 1000:.2f} ms ({len(without)} passes),"
            f" with a refit on the Dask worker {refit * 1000:.2f} ms ({len(during)} passes)",
            flush=True,
        )
        if _within(base, refit):
            break
    assert _within(base, refit), f"p99 without -> with a refit, each attempt: {figures}"
    # the loop kept passing while the worker fitted: enough passes for a p99
    assert len(during) >= 100, f"too few passes during the refits for a p99: {figures}"


def _beside_the_loop(pid: int) -> None:
    """Every thread of ``pid`` on the loop's CPU under SCHED_IDLE (threads it starts
    later inherit both): it runs only while the loop waits between passes."""
    for task in map(int, os.listdir(f"/proc/{pid}/task")):
        os.sched_setaffinity(task, {CPU})
        os.sched_setscheduler(task, os.SCHED_IDLE, os.sched_param(0))
        assert os.sched_getscheduler(task) == os.SCHED_IDLE


def _loop(service: TimedService, stop: threading.Event) -> None:
    """The live loop, as ``serve`` runs it, on one CPU (the worker's)."""
    os.sched_setaffinity(0, {CPU})  # this thread only
    service.run(INTERVAL_S, stop)


@pytest.fixture
def live(tmp_path: Path, scheduler: str) -> Iterator[tuple[TimedService, DurationKeeper]]:  # noqa: F811
    """The service, its live loop running and its first model fitted on the worker."""
    worker = _worker(scheduler, dict(os.environ))
    url = _history(tmp_path, HISTORY)
    engine = make_engine(url)
    models = tmp_path / "models"
    models.mkdir()
    keeper = DurationKeeper(model_dir=models, min_jobs=20, refit_every=2, workers=scheduler)
    backend = LocalBackend(tmp_path, GpuInventory(GPUS, "virtual", 0, "virtual"), grace_s=1.0)
    service = TimedService(engine, backend, durations=keeper)
    stop = threading.Event()
    loop = threading.Thread(target=_loop, args=(service, stop), daemon=True)
    try:
        for i in range(HELD):
            service.submit(JobRequest(["sleep", "600"], gpus=1, user=("ann", "bob")[i % 2]))
        for i in range(PENDING):
            service.submit(JobRequest(["true"], gpus=4, user=("ann", "bob")[i % 2]))
        # the first pass starts the held jobs and the first refit (no model yet),
        # which warms the worker up (imports, the Dask client's connection)
        loop.start()
        _wait(lambda: keeper.live.version == 1, 300, "the first refit")
        _beside_the_loop(worker.pid)  # after its imports and first fit
        running = [j for j in service.scheduler.jobs.values() if j.status.value == "running"]
        assert len(running) == HELD, "the 14 held jobs run; the 4-GPU ones wait"
        yield service, keeper
    finally:
        stop.set()
        loop.join(30)
        keeper.close()
        for job_id, state in list(service.scheduler.jobs.items()):
            if state.status.value == "running":
                backend.stop(job_id)
        worker.terminate()
        worker.wait(30)
        engine.dispose()


def test_a_refit_on_a_dask_worker_keeps_the_reconcile_p99(
    live: tuple[TimedService, DurationKeeper],
) -> None:
    _refit_latency(*live)
