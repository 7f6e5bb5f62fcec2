"""Nothing hangs (issue 30, finding 5): ``ilucid simulate`` with the default profile among
several policies exits, and a replay's fit process ends with its replay.

How it hung: the default profile's replay refits its duration model in a spawned
fit process. When the replay ended with a fit still running, its pool worker
asked the fit process's executor to stop without waiting, returned its result,
and exited; multiprocessing's exit handler first stopped the executor's queue
feeder (so the executor's later stop signal never reached the fit process), then
joined the fit process, which waited for work for ever; and the CLI waited for
that worker in ``ProcessPoolExecutor.shutdown``, after printing ``simulated 100%``.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ilucid
from ilucid.estimators.fit_process import FitsAside
from ilucid.sim.estimates import FIT_ASIDE_FROM, WEEK

#: a run of the test trace takes ~5 s on 2 busy cores; one that hangs never ends
RUN_TIMEOUT_S = 90


def write_refit_trace(path: Path, weeks: int = 2, seed: int = 1) -> Path:
    """A generic-CSV trace long enough to fit in a fit process (:data:`FIT_ASIDE_FROM`
    jobs), with arrivals at exactly 0, 1, ..., ``weeks`` weeks: refits start at the first
    arrival and every week after it, so the last arrival starts one, and that fit is
    still running when the replay ends (a fit lags its refit by a simulated day)."""
    rng = random.Random(seed)
    span = weeks * WEEK
    rows = [(k * WEEK, 1, 60.0) for k in range(weeks + 1)]
    rows += [
        (rng.uniform(0, span), rng.choice((1, 1, 2, 4, 8)), max(30.0, rng.lognormvariate(7.5, 1.2)))
        for _ in range(FIT_ASIDE_FROM - len(rows))
    ]
    rows.sort(key=lambda row: row[0])
    lines = ["id,submit_time,num_gpus,duration,user"]
    lines += [
        f"j{i:06d},{t:.1f},{gpus},{duration:.1f},u{rng.randrange(20)}"
        for i, (t, gpus, duration) in enumerate(rows)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def simulate_cli(trace: Path, policies: str, out: Path) -> tuple[int, str, float]:
    """``ilucid simulate`` in its own session; on a timeout the whole session (the CLI,
    its workers and their fit processes) is killed and the test fails."""
    env = {**os.environ, "PYTHONPATH": str(Path(ilucid.__file__).parents[1])}
    command = [sys.executable, "-m", "ilucid.cli", "simulate", "--trace", str(trace)]
    command += ["--policy", policies, "--processes", "2", "--out", str(out)]
    started = time.monotonic()
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(
            f"ilucid simulate --policy {policies} had not exited after {RUN_TIMEOUT_S} s:"
            f"\n{output[-2000:]}"
        )
    return process.returncode, output, time.monotonic() - started


@pytest.mark.timeout(4 * RUN_TIMEOUT_S)
def test_simulate_with_the_default_profile_among_others_exits_every_time(tmp_path: Path) -> None:
    trace = write_refit_trace(tmp_path / "refits.csv")
    # the default profile ends last in each order (it is the slowest), so its worker's
    # exit is what the CLI waits for; the same order twice: the hang needs no bad luck
    orders = [
        "ilucid,tiresias,srtf",
        "srtf,tiresias,ilucid",
        "tiresias,ilucid",
        "ilucid,tiresias,srtf",
    ]
    for run, policies in enumerate(orders):
        code, output, took = simulate_cli(trace, policies, tmp_path / f"out{run}")
        assert code == 0, f"--policy {policies}: exit code {code}\n{output[-2000:]}"
        assert "simulated 100%" in output and "wrote" in output
        print(f"--policy {policies}: exited 0 in {took:.1f} s")


def _slow_fit(started: Path, seconds: float) -> float:
    started.touch()
    time.sleep(seconds)
    return seconds


def _fit_and_wait_till_it_runs(fits: FitsAside, started: Path) -> None:
    """A fit that is running (its worker started and took it) and would run for long."""
    fits.fit(_slow_fit, started, 600.0)
    deadline = time.monotonic() + 60
    while not started.exists():
        assert time.monotonic() < deadline, "the fit process never started the fit"
        time.sleep(0.05)


def _replay_that_ends_mid_fit(started: Path) -> None:
    """A process (as a replay's pool worker) whose fit is still running when it ends."""
    fits = FitsAside()
    _fit_and_wait_till_it_runs(fits, started)
    fits.close()


@pytest.mark.timeout(180)
def test_a_process_whose_replay_ends_mid_fit_exits_at_once(tmp_path: Path) -> None:
    worker = mp.get_context("fork").Process(
        target=_replay_that_ends_mid_fit, args=(tmp_path / "started",)
    )
    worker.start()
    try:
        deadline = time.monotonic() + 90
        while not (tmp_path / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        ended = time.monotonic()
        worker.join(30)
        assert not worker.is_alive(), (
            f"still running {time.monotonic() - ended:.0f} s after its fit started"
        )
        assert worker.exitcode == 0
    finally:
        if worker.is_alive():
            worker.kill()  # its fit process dies with it (it watches its parent)
            worker.join()


@pytest.mark.timeout(120)
def test_close_ends_a_fit_process_that_is_busy_fitting(tmp_path: Path) -> None:
    before = {p.pid for p in mp.active_children()}
    fits = FitsAside()
    (worker,) = [p for p in mp.active_children() if p.pid not in before]
    try:
        _fit_and_wait_till_it_runs(fits, tmp_path / "started")
        started = time.monotonic()
        fits.close()
        assert time.monotonic() - started < 10
        assert not worker.is_alive(), "the fit process outlived close()"
        assert worker.daemon, "a process's exit never waits for it"
    finally:
        if worker.is_alive():
            worker.kill()
        fits.close()
