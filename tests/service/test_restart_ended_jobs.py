"""Jobs that end while ``ilucid serve`` is down (issue 34, first day point 6).

A real service on 2 virtual GPUs runs four jobs and stops; while it is down two of
them end on their own (their runner records the exit) and one is killed with its
runner (no exit record is left); one runs on. The next start re-adopts the one
that runs, ends the two with their recorded exit code at the time they ended, and
requeues the one whose exit is unknown, saying so in its story and in the log line
that names every job the stop listed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_helpers import run_ilucid, serve_command


def _start(data: Path) -> tuple[subprocess.Popen[str], str, dict[str, str]]:
    """``ilucid serve`` on any free port; its URL and the admin's environment."""
    (data / "url").unlink(missing_ok=True)
    server = subprocess.Popen(
        serve_command(data, 0, 2, 0.2),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not (data / "url").exists():
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            raise AssertionError(f"serve ended: {server.communicate()[0]}")
        time.sleep(0.1)
    url = (data / "url").read_text().strip()
    env = {k: v for k, v in os.environ.items() if k not in ("ILUCID_URL", "ILUCID_TOKEN")}
    env["ILUCID_URL"] = url
    env["ILUCID_TOKEN"] = (data / "admin.token").read_text().strip()
    while run_ilucid("nodes", env=env).returncode != 0:
        if time.monotonic() > deadline:
            server.kill()
            raise AssertionError(f"serve did not come up: {server.communicate()[0]}")
        time.sleep(0.2)
    return server, url, env


def _stop(server: subprocess.Popen[str]) -> str:
    server.send_signal(signal.SIGTERM)
    printed = server.communicate(timeout=30)[0]
    assert server.returncode == 0, printed
    return printed


def _job(url: str, env: dict[str, str], job: str) -> dict[str, Any]:
    answer = httpx.get(
        f"{url}/jobs/{job}", headers={"Authorization": f"Bearer {env['ILUCID_TOKEN']}"}
    )
    answer.raise_for_status()
    body: dict[str, Any] = answer.json()
    return body


def _wait(check: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _runner_pid(data: Path, job: str) -> int:
    return int((data / "jobs" / job / "pid").read_text().split()[0])


def test_a_restart_ends_jobs_that_ended_while_down_and_says_what_it_did(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server, url, env = _start(data)
    submit = ("submit",)
    runs_on = run_ilucid(*submit, "--gpus", "1", "--", "sleep", "300", env=env).stdout.strip()
    succeeds = run_ilucid(*submit, "--gpus", "1", "--", "sleep", "4", env=env).stdout.strip()
    fails = run_ilucid(
        *submit, "--gpus", "0", "--", "sh", "-c", "sleep 4; exit 7", env=env
    ).stdout.strip()
    killed = run_ilucid(*submit, "--gpus", "0", "--", "sleep", "300", env=env).stdout.strip()
    jobs = [runs_on, succeeds, fails, killed]
    pids: list[int] = []
    try:
        _wait(
            lambda: all(_job(url, env, j)["gpu_indices"] not in ("", None) for j in jobs),
            "the four jobs to be launched",
        )
        pids = [_runner_pid(data, j) for j in jobs]
        printed = _stop(server)
        assert "stopping: 4 jobs keep running and will be re-adopted at the next start" in (
            printed
        ), printed
        stopped_at = time.time()
        # while the service is down: two jobs end on their own, their runners record it
        for job in (succeeds, fails):
            _wait(lambda job=job: (data / "jobs" / job / "exit").exists(), f"{job}'s exit")
        ended_by = time.time()
        # one is killed with its runner (a host's OOM killer, a careless kill -9): no record
        os.killpg(_runner_pid(data, killed), signal.SIGKILL)
        _wait(lambda: not Path(f"/proc/{pids[3]}").exists(), "the killed runner to go")
        assert not (data / "jobs" / killed / "exit").exists()

        server, url, env = _start(data)
        ok = _job(url, env, succeeds)
        assert (ok["state"], ok["exit_code"]) == ("succeeded", 0), ok
        # it ended while the service was down, and its end time says so (not the restart's)
        assert stopped_at - 1 <= ok["end_time"] <= ended_by, (ok, stopped_at, ended_by)
        said = ok["transitions"][-1]["reason"]
        assert said.startswith("ended while the service was down: exit 0 at "), said
        bad = _job(url, env, fails)
        assert (bad["state"], bad["exit_code"]) == ("failed", 7), bad
        assert bad["transitions"][-1]["reason"].startswith(
            "ended while the service was down: exit 7 at "
        ), bad["transitions"]
        lost = _job(url, env, killed)
        reasons = [t["reason"] for t in lost["transitions"]]
        assert (
            "ended while the service was down; its exit is unknown (no exit record): requeued"
            in reasons
        ), reasons
        assert _job(url, env, runs_on)["state"] == "running"
        printed = _stop(server)
        assert (
            "restart: 4 jobs were running at the last stop:"
            f" 1 re-adopted ({runs_on});"
            f" 2 ended while the service was down ({succeeds}: exit 0, {fails}: exit 7);"
            f" 1 requeued ({killed}: exit unknown)"
        ) in printed, printed
    finally:
        if server.poll() is None:
            server.kill()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            if (data / "jobs" / killed / "pid").exists():  # its second run, requeued
                os.killpg(_runner_pid(data, killed), signal.SIGKILL)
