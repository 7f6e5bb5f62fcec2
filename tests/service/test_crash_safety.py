"""Crash safety: ``ilucid serve`` is killed with SIGKILL 20 times while jobs are submitted.

After each kill it is restarted on the same data directory. At the end every
submission the API accepted (answered 201) must exist and have run to the end,
none may have started twice (each job appends a line per start to its own file;
no job here is ever preempted), and any job that was requeued carries a reason.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from sqlalchemy import select
from sqlalchemy.orm import Session

from ilucid.service.db import JobRow, TransitionRow, make_engine

KILLS = 20
JOB = 'echo "start $(date +%s.%N)" >> "$OUT/$ILUCID_JOB_ID"; sleep {seconds}'

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_helpers import free_port, serve_command  # noqa: E402


def test_sigkill_twenty_times_loses_and_repeats_nothing(tmp_path: Path) -> None:
    rng = random.Random(7)
    data, out = tmp_path / "data", tmp_path / "out"
    out.mkdir()
    port = free_port()
    env = {**os.environ, "OUT": str(out)}
    # a non-preemptive profile: a second start of a job here can only be a duplicate launch
    command = serve_command(data, port, 4, 0.1, "--policy", "tiered")
    url = f"http://127.0.0.1:{port}"
    accepted: list[str] = []

    def start() -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    return process
            except httpx.HTTPError:
                time.sleep(0.1)
        process.kill()
        raise AssertionError("serve did not come back")

    server = start()
    token = (data / "admin.token").read_text().strip()
    headers = {"Authorization": f"Bearer {token}"}
    for _kill in range(KILLS):
        kill_at = time.monotonic() + rng.uniform(0.2, 1.2)
        while time.monotonic() < kill_at:
            body = {
                "command": ["sh", "-c", JOB.format(seconds=rng.choice([0.2, 0.5, 1.0]))],
                "gpus": rng.choice([1, 1, 2]),
            }
            try:
                response = httpx.post(f"{url}/jobs", json=body, headers=headers, timeout=5)
            except httpx.HTTPError:
                continue  # not accepted: no answer
            if response.status_code == 201:
                accepted.append(response.json()["id"])
        server.send_signal(signal.SIGKILL)
        server.wait()
        server = start()

    engine = make_engine(f"sqlite:///{data / 'ilucid.db'}")
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with Session(engine) as session:
                rows = {r.id: r.state for r in session.scalars(select(JobRow))}
            if all(rows.get(j) == "succeeded" for j in accepted):
                break
            time.sleep(0.5)
    finally:
        server.terminate()
        server.wait(timeout=15)
    assert len(accepted) >= KILLS
    missing = [j for j in accepted if j not in rows]
    assert not missing, f"accepted but lost: {missing}"
    unfinished = {j: rows[j] for j in accepted if rows[j] != "succeeded"}
    assert not unfinished, unfinished
    starts = {j: (out / j).read_text().count("start") for j in accepted}
    twice = {j: n for j, n in starts.items() if n != 1}
    assert not twice, f"started more or less than once: {twice}"
    with Session(engine) as session:
        requeued = session.scalars(
            select(TransitionRow).where(
                TransitionRow.from_state == "running", TransitionRow.to_state == "pending"
            )
        ).all()
        assert all(t.reason for t in requeued)
    engine.dispose()
