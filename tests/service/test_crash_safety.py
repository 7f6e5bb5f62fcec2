"""Crash safety: ``ilucid serve`` is killed 100 times while jobs are submitted and end.

Two kinds of kill, each followed by a restart on the same data directory:

* **at each step of a job's end** (``ilucid.service.faults``): the service is
  armed to SIGKILL itself when it has seen a job's exit, recorded it, committed
  it, or forgotten the job's files. Every point is hit several times;
* **at random moments** under a stream of submissions.

At the end every submission the API accepted (answered 201) must exist and have
run to the end, none may have started twice (each job appends a line per start
to its own file; no job here is ever preempted), and any job that was requeued
carries a reason. Under the random kills some accepted jobs are cancelled: each
acknowledged cancel must end ``cancelled`` (never ``succeeded``), and such a job
starts at most once.
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

import httpx
from sqlalchemy import select
from sqlalchemy.orm import Session

from ilucid.service.db import JobRow, TransitionRow, make_engine
from ilucid.service.faults import CRASH_POINTS

KILLS = 100
#: kills at each crash point on the end path (the rest are random)
PER_POINT = 5
JOB = 'echo "start $(date +%s.%N)" >> "$OUT/$ILUCID_JOB_ID"; sleep {seconds}'

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_helpers import Server, free_port, serve_command  # noqa: E402


def _submit(url: str, headers: dict[str, str], rng: random.Random) -> str | None:
    body = {
        "command": ["sh", "-c", JOB.format(seconds=rng.choice([0.1, 0.3, 0.8]))],
        "gpus": rng.choice([1, 1, 2]),
    }
    try:
        response = httpx.post(f"{url}/jobs", json=body, headers=headers, timeout=5)
    except httpx.HTTPError:
        return None  # not accepted: no answer
    return str(response.json()["id"]) if response.status_code == 201 else None


def _expected(job: str, cancelled: set[str]) -> str:
    return "cancelled" if job in cancelled else "succeeded"


def _cancel(url: str, headers: dict[str, str], job: str) -> bool:
    """Whether the service acknowledged the cancel (the job must then end cancelled)."""
    try:
        response = httpx.delete(f"{url}/jobs/{job}", headers=headers, timeout=5)
    except httpx.HTTPError:
        return False  # no answer: no promise
    return response.status_code == 200 and response.json()["state"] in ("stopping", "cancelled")


def test_hundred_kills_lose_and_repeat_nothing(tmp_path: Path, job_scratch: Path) -> None:
    rng = random.Random(7)
    data, out = tmp_path / "data", job_scratch
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # a non-preemptive profile: a second start of a job here can only be a duplicate launch
    command = serve_command(data, port, 4, 0.05, "--policy", "tiered")
    server = Server(command, {**os.environ, "OUT": str(out)}, url)
    accepted: list[str] = []
    cancelled: set[str] = set()  # acknowledged cancels
    kills = 0
    by_point = dict.fromkeys(CRASH_POINTS, 0)

    engine = make_engine(f"sqlite:///{data / 'ilucid.db'}")
    try:
        server.start()
        headers = {"Authorization": f"Bearer {(data / 'admin.token').read_text().strip()}"}
        for point in CRASH_POINTS * PER_POINT:
            server.kill()
            server.start(crash_at=point)
            for _try in range(20):  # a job must end for the point to be reached
                if server.process is None or server.process.poll() is not None:
                    break  # it died at the point already (a leftover end at start-up)
                job = _submit(url, headers, rng)
                if job is not None:
                    accepted.append(job)
                    break
                time.sleep(0.25)
            assert server.died_by_itself(within_s=30), f"crash point {point} was never reached"
            kills += 1
            by_point[point] += 1
            server.start()
        while kills < KILLS:
            kill_at = time.monotonic() + rng.uniform(0.1, 0.8)
            while time.monotonic() < kill_at:
                job = _submit(url, headers, rng)
                if job is not None:
                    accepted.append(job)
                if accepted and rng.random() < 0.3:  # a cancel under load
                    victim = rng.choice(accepted[-8:])
                    if victim not in cancelled and _cancel(url, headers, victim):
                        cancelled.add(victim)
            server.kill()
            kills += 1
            server.start()

            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                with Session(engine) as session:
                    rows = {r.id: r.state for r in session.scalars(select(JobRow))}
                if all(rows.get(j) == _expected(j, cancelled) for j in accepted):
                    break
                time.sleep(0.5)
    finally:  # never leave a server behind, even when an assertion failed
        if server.process is not None and server.process.poll() is None:
            server.process.terminate()
            server.process.wait(timeout=15)
    print(
        f"kills: {kills} ({by_point} at crash points), accepted jobs: {len(accepted)},"
        f" acknowledged cancels: {len(cancelled)}"
    )
    assert kills >= KILLS and all(n == PER_POINT for n in by_point.values())
    assert len(accepted) >= KILLS
    missing = [j for j in accepted if j not in rows]
    assert not missing, f"accepted but lost: {missing}"
    unfinished = {j: rows[j] for j in accepted if rows[j] != _expected(j, cancelled)}
    assert not unfinished, f"stuck, or a cancel not honoured: {unfinished}"
    assert len(cancelled) >= 20, "too few cancels under load to say anything"
    starts = {
        j: (out / j).read_text().count("start") if (out / j).exists() else 0 for j in accepted
    }
    twice = {j: n for j, n in starts.items() if n > 1 or (n == 0 and j not in cancelled)}
    assert not twice, f"started more or less than once: {twice}"
    leftovers = [p.parent.name for p in (data / "jobs").glob("*/exit")]
    assert not leftovers, f"ended jobs whose files were never forgotten: {leftovers}"
    with Session(engine) as session:
        requeued = session.scalars(
            select(TransitionRow).where(
                TransitionRow.from_state == "running", TransitionRow.to_state == "pending"
            )
        ).all()
        assert all(t.reason for t in requeued)
    engine.dispose()
