"""``ilucid sweep --scheduler``: a separate Dask scheduler and two workers on 127.0.0.1; one
worker is killed while it runs a cell, and the sweep still finishes every cell."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sweep_helpers import figures, run_sweep_cli, write_trace

from ilucid.sweep import ResultTable

pytestmark = pytest.mark.xdist_group("dask")

STARTUP_S = 60.0


def _dask(*args: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as handle:
        return subprocess.Popen(
            [sys.executable, "-m", "dask", *args], stdout=handle, stderr=subprocess.STDOUT
        )


def _wait_for(what: str, ready: Callable[[], bool], deadline: float) -> None:
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} after {STARTUP_S:.0f} s")
        time.sleep(0.1)


@pytest.fixture
def dask_cluster(tmp_path: Path) -> Iterator[tuple[str, list[subprocess.Popen[bytes]]]]:
    """A scheduler on a free port of 127.0.0.1 (port 0: the OS picks one) and two
    single-threaded workers without nannies (a killed worker stays dead)."""
    info = tmp_path / "scheduler.json"
    started = []
    try:
        scheduler = _dask(
            *("scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard"),
            *("--scheduler-file", str(info)),
            log=tmp_path / "scheduler.log",
        )
        started.append(scheduler)
        deadline = time.monotonic() + STARTUP_S
        _wait_for("scheduler file", lambda: info.exists() and info.stat().st_size > 0, deadline)
        address = json.loads(info.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        worker = ["worker", address, "--nthreads", "1", "--no-nanny", "--no-dashboard"]
        workers = [
            _dask(*worker, "--name", f"w{i}", log=tmp_path / f"worker{i}.log") for i in range(2)
        ]
        started += workers
        yield address, workers
    finally:
        for process in started:  # test processes: nothing of theirs outlives the test
            if process.poll() is None:
                process.kill()
            process.wait()


def test_a_worker_killed_mid_run_loses_no_cell(
    dask_cluster: tuple[str, list[subprocess.Popen[bytes]]], tmp_path: Path
) -> None:
    from distributed import Client

    address, workers = dask_cluster
    victim = workers[0]
    out = tmp_path / "remote.csv"
    killed: dict[str, object] = {}
    with Client(address, timeout="60s") as watcher:
        watcher.wait_for_workers(2, timeout=STARTUP_S)
        by_pid = {pid: addr for addr, pid in watcher.run(os.getpid).items()}
        victim_address = by_pid[victim.pid]

        def kill_when_busy() -> None:
            """Once the victim has finished a cell and holds another, kill it (SIGKILL)."""
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and "at" not in killed:
                rows = list(ResultTable(out).rows()) if out.exists() else []
                done_there = [r for r in rows if r["worker"].endswith(f":{victim.pid}")]
                holding = watcher.processing(workers=[victim_address]).get(victim_address, [])
                if done_there and holding:
                    victim.kill()
                    killed.update(at=len(rows), holding=list(holding))
                time.sleep(0.05)

        thread = threading.Thread(target=kill_when_busy, daemon=True)
        thread.start()
        trace = write_trace(tmp_path / "jobs.csv", jobs=400)  # the workers read it here
        grid = ["--traces", str(trace), "--policy", "fifo,srtf", "--seeds", "0-5", "--nodes", "4"]
        run = run_sweep_cli([*grid, "--scheduler", address, "--out", str(out)])
        thread.join(5)
    assert "at" in killed, "the victim never held a cell with one done; nothing was killed"
    assert victim.wait(10) == -signal.SIGKILL
    assert run.code == 0, run.stderr
    rows = list(ResultTable(out).rows())
    assert len(figures(out)) == 12 and all(r["status"] == "ok" for r in rows)
    after = rows[int(str(killed["at"])) + 1 :]  # rows written after the kill and its cell's end
    assert all(not r["worker"].endswith(f":{victim.pid}") for r in after)
    assert len(after) >= 1  # the cell the victim held finished elsewhere
