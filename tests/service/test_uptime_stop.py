"""How a stop of ``ilucid serve`` ends its uptime run: exactly when serve has stopped
cleanly (SIGINT or SIGTERM), at the last heartbeat after ``kill -9``. A real service
process each time."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from ilucid.service.db import make_engine
from ilucid.service.uptime import BEAT_S, UptimeRow, down_periods

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_helpers import free_port, serve_command

Servers = list[subprocess.Popen[str]]


@pytest.fixture
def servers() -> Iterator[Servers]:
    """The processes a test started; any still running at its end is killed."""
    started: Servers = []
    yield started
    for server in started:
        if server.poll() is None:
            server.kill()
            server.wait()
        if server.stdout is not None:
            server.stdout.close()


def _start(servers: Servers, data: Path, command: list[str] | None = None) -> subprocess.Popen[str]:
    """``ilucid serve`` on 1 virtual GPU (or ``command``), once it listens (its lifespan
    recorded the run)."""
    server = subprocess.Popen(
        command or serve_command(data, free_port(), 1, 0.05),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    servers.append(server)
    assert server.stdout is not None
    for line in server.stdout:
        if line.startswith("API on "):
            return server
    raise AssertionError(f"ilucid serve did not come up (exit {server.wait()})")


def _runs(data: Path) -> list[tuple[float, float]]:
    engine = make_engine(f"sqlite:///{data / 'ilucid.db'}")
    with Session(engine) as session:
        rows = session.execute(
            select(UptimeRow.started, UptimeRow.last_seen).order_by(UptimeRow.id)
        )
        return [(started, seen) for started, seen in rows]


def test_a_clean_stop_ends_the_run_when_serve_has_stopped(tmp_path: Path, servers: Servers) -> None:
    # within the first BEAT_S seconds no heartbeat was written: any bound but the stop
    # itself would be the start
    data = tmp_path / "data"
    server = _start(servers, data)
    time.sleep(0.5)  # a few reconcile passes
    signalled = time.time()
    server.send_signal(signal.SIGINT)
    assert server.wait(timeout=30) == 0
    exited = time.time()
    ((started, last_seen),) = _runs(data)
    assert exited - started < BEAT_S  # (no heartbeat could explain last_seen)
    assert signalled <= last_seen <= exited
    # after the scheduling loop's last pass (it touches this file after each one)
    assert last_seen >= (data / "heartbeat").stat().st_mtime


#: serve's stop path around a real service whose scheduling loop, asked to stop, still
#: works for 1 s after the API has shut down (a last pass starting jobs, say)
SLOW_TO_STOP = """
import argparse, sys, time
from pathlib import Path
from ilucid.backends.local_host import GpuInventory
from ilucid.backends.local import LocalBackend
from ilucid.cli.serve.log_setup import configure_logging
from ilucid.cli.serve.run import _serve_until_stopped
from ilucid.service.db import make_engine, migrate
from ilucid.service.scheduler_service import SchedulerService

class SlowToStop(SchedulerService):
    def run(self, *args, **kwargs):
        super().run(*args, **kwargs)
        time.sleep(1.0)
        print(f"loop ended at {self.clock()!r}", flush=True)

data = Path(sys.argv[1])
url = f"sqlite:///{data / 'ilucid.db'}"
migrate(url)
service = SlowToStop(make_engine(url), LocalBackend(data, GpuInventory(1, "virtual", 0, "v")))
args = argparse.Namespace(
    data_dir=data, interval=0.05, host="127.0.0.1", port=int(sys.argv[2]), metrics_public=False,
    user_config=False
)
configure_logging("info", "text")  # as serve does: it announces "API on ..." as a report
_serve_until_stopped(args, service, None)
"""


def test_the_stop_is_recorded_once_the_scheduling_loop_has_ended(
    tmp_path: Path, servers: Servers
) -> None:
    # the API's own last beat comes 1 s too early here: the service still worked
    data = tmp_path / "data"
    data.mkdir()
    script = tmp_path / "slow_to_stop.py"
    script.write_text(SLOW_TO_STOP, encoding="utf-8")
    server = _start(servers, data, [sys.executable, str(script), str(data), str(free_port())])
    server.send_signal(signal.SIGINT)
    assert server.stdout is not None
    said = server.stdout.read()
    assert server.wait(timeout=30) == 0
    loop_ended = float(said.split("loop ended at ")[1].split()[0])
    ((_, last_seen),) = _runs(data)
    assert loop_ended <= last_seen < loop_ended + 1.0


def test_after_kill_9_the_down_period_starts_at_the_last_heartbeat(
    tmp_path: Path, servers: Servers
) -> None:
    data = tmp_path / "data"
    server = _start(servers, data)
    time.sleep(0.5)
    killed = time.time()
    server.kill()  # SIGKILL: nothing of the service runs to say when it stopped
    server.wait(timeout=30)
    ((started, last_seen),) = _runs(data)
    assert last_seen == started < killed  # no beat yet: the start is the last sign of life
    server = _start(servers, data)
    server.send_signal(signal.SIGINT)
    assert server.wait(timeout=30) == 0
    (_, (restarted, _)) = _runs(data)
    assert down_periods(make_engine(f"sqlite:///{data / 'ilucid.db'}"), 0, 2e10) == [
        (last_seen, restarted)
    ]
