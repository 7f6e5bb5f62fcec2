"""Duration-model refits on a Dask cluster (issue 20): the service hands a refit to
the workers of a separate ``dask scheduler`` (``serve --workers tcp://...``); a
worker lost in the middle of a refit only delays it: Dask runs it again on another
worker and the new version is installed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from ilucid.core import JobSpec
from ilucid.service.db import JobRow, make_engine, migrate
from ilucid.service.duration_keeper import GATE_ENV, DurationKeeper

pytestmark = pytest.mark.xdist_group("dask")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _worker(address: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """One worker process without a nanny: killed, it stays dead."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "distributed.cli.dask_worker",
            address,
            "--no-nanny",
            "--nthreads",
            "1",
            "--no-dashboard",
            "--host",
            "127.0.0.1",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.fixture
def scheduler() -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "distributed.cli.dask_scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-dashboard",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield f"tcp://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(30)


def _history(tmp_path: Path, jobs: int = 40) -> str:
    url = f"sqlite:///{tmp_path / 'ilucid.db'}"
    migrate(url)
    engine = make_engine(url)
    with Session(engine) as session:
        for i in range(jobs):
            submit = 1000.0 * i
            session.add(
                JobRow(
                    id=f"j{i:06d}",
                    user=("ann", "bob")[i % 2],
                    tenant="vision",
                    job_class="training",
                    gpus=1 + i % 4,
                    command='["true"]',
                    state="succeeded",
                    submit_time=submit,
                    first_start=submit + 10,
                    end_time=submit + 10 + 300 * (1 + i % 4),
                    gpu_indices="0",
                    preemptions=0,
                )
            )
        session.commit()
    engine.dispose()
    return url


def _wait_for(path: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


def test_a_refit_runs_on_a_dask_worker_and_survives_losing_it(
    tmp_path: Path, scheduler: str
) -> None:
    gate = tmp_path / "gate"
    env = {**os.environ, GATE_ENV: str(gate)}
    first = _worker(scheduler, env)
    url = _history(tmp_path)
    engine = make_engine(url)
    models = tmp_path / "models"
    models.mkdir()
    keeper = DurationKeeper(model_dir=models, min_jobs=20, workers=scheduler)
    keeper.start(engine)
    try:
        gate.touch()  # the worker holds the fitted model here until the gate goes
        assert keeper.refit()["status"] == "started"
        _wait_for(Path(f"{gate}.reached"), 120)
        first.send_signal(signal.SIGKILL)  # lost mid-refit
        first.wait(30)
        assert keeper.status()["refitting"]  # not failed: waiting for a worker
        gate.unlink()
        second = _worker(scheduler, env)
        try:
            done = keeper.refit(wait_s=120)
            assert done == {"status": "done", "version": 1}, done
            assert (models / "duration-v1.pkl").exists()
            estimate = keeper.estimate(JobSpec("new", 0.0, 2, 0.0, tenant="vision", user="ann"))
            assert estimate.version == "v1" and estimate.seconds is not None
        finally:
            second.terminate()
            second.wait(30)
    finally:
        keeper.close()
        engine.dispose()


def test_closing_ends_a_local_refit_under_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``serve`` stopping (SIGINT, SIGTERM) closes the keeper: a refit held in its
    worker process is abandoned at once instead of holding the service's exit."""
    gate = tmp_path / "gate"
    monkeypatch.setenv(GATE_ENV, str(gate))  # the spawned worker inherits it
    url = _history(tmp_path)
    engine = make_engine(url)
    models = tmp_path / "models"
    models.mkdir()
    keeper = DurationKeeper(model_dir=models, min_jobs=20)
    keeper.start(engine)
    gate.touch()
    assert keeper.refit()["status"] == "started"
    _wait_for(Path(f"{gate}.reached"), 120)
    began = time.monotonic()
    keeper.close()
    import multiprocessing

    deadline = time.monotonic() + 10
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not multiprocessing.active_children(), "the refit worker outlived close()"
    assert time.monotonic() - began < 10
    assert not (models / "duration-v1.pkl").exists()  # abandoned, never half-written
    engine.dispose()
