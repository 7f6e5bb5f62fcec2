"""What the service promised survives a ``kill -9``: an acknowledged cancel is kept.

Issue 30's finding 1: a running job that ignores SIGTERM is cancelled (the API
answers ``stopping``), the service is killed within a second and restarted. The
cancel lived only in memory, so the job ran on and was recorded ``succeeded``.
The intent is now committed before it is answered, and a restart finishes it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session

from ilucid.service.db import JobRow, make_engine

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_helpers import Server, free_port, serve_command

#: a unique sleep, so the cleanup finds this test's job and nothing else
SLEEP = "45.0417"


@pytest.mark.xdist_group("crash")
def test_an_acknowledged_cancel_survives_a_kill(tmp_path: Path, job_scratch: Path) -> None:
    data, port = tmp_path / "data", free_port()
    url = f"http://127.0.0.1:{port}"
    out = job_scratch / "job.out"
    script = f'trap "" TERM; echo started >> {out}; sleep {SLEEP}; echo finished >> {out}'
    command = serve_command(data, port, 1, 1, "--grace", "5", "--policy", "tiered")
    server = Server(command, dict(os.environ), url)
    server.start()
    try:
        headers = {"Authorization": f"Bearer {(data / 'admin.token').read_text().strip()}"}
        body = {"command": ["bash", "-c", script], "gpus": 1}
        job = httpx.post(f"{url}/jobs", json=body, headers=headers, timeout=10).json()["id"]
        deadline = time.monotonic() + 30
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert out.exists(), "the job never started"
        answer = httpx.delete(f"{url}/jobs/{job}", headers=headers, timeout=10).json()
        assert answer["state"] == "stopping"
        server.kill()  # within a second of the acknowledgement
        server.start()

        engine = make_engine(f"sqlite:///{data / 'ilucid.db'}")
        deadline = time.monotonic() + 40
        state = "running"
        while time.monotonic() < deadline:
            with Session(engine) as session:
                row = session.get(JobRow, job)
                assert row is not None
                state = row.state
            if state not in ("pending", "running"):
                break
            time.sleep(0.25)
        engine.dispose()
        assert state == "cancelled", f"an acknowledged cancel ended {state}"
        assert "finished" not in out.read_text(), "the cancelled job ran to its end"
        story = httpx.get(f"{url}/jobs/{job}/explain", headers=headers, timeout=10).json()
        assert any("cancel" in line["stimulus"] for line in story["story"])
    finally:
        if server.process is not None and server.process.poll() is None:
            server.process.terminate()
            server.process.wait(timeout=15)
        subprocess.run(["pkill", "-KILL", "-f", f"sleep {SLEEP}"], check=False)
