"""``ilucid serve`` as a user starts it, driven by the ``ilucid`` client commands."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ilucid(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ilucid.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


@pytest.fixture
def served(tmp_path: Path):  # type: ignore[no-untyped-def]
    port = free_port()
    data = tmp_path / "data"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ilucid.cli",
            "serve",
            "--data-dir",
            str(data),
            "--gpus",
            "2",
            "--port",
            str(port),
            "--interval",
            "0.2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    env = {**os.environ, "ILUCID_URL": f"http://127.0.0.1:{port}"}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if ilucid("nodes", "--data-dir", str(data), env=env).returncode == 0:
            break
        time.sleep(0.3)
    else:
        server.kill()
        raise AssertionError(f"serve did not come up: {server.communicate()[0]}")
    yield data, env
    server.terminate()
    server.wait(timeout=10)


def test_submit_queue_explain_logs_and_cancel_through_the_cli(served) -> None:  # type: ignore[no-untyped-def]
    data, env = served
    common = ("--data-dir", str(data))
    long = ilucid(
        "submit", *common, "--gpus", "2", "--estimate", "600", "--", "sleep", "30", env=env
    ).stdout.strip()
    short = ilucid(
        "submit", *common, "--gpus", "1", "--", "sh", "-c", "echo hi $CUDA_VISIBLE_DEVICES", env=env
    ).stdout.strip()
    time.sleep(1.0)
    jobs = ilucid("jobs", *common, env=env).stdout
    assert f"{long}  admin  training  2     running" in jobs
    queue = ilucid("queue", *common, env=env).stdout
    assert short in queue and "in " in queue  # expected start shown
    why = ilucid("explain", short, *common, env=env).stdout
    assert "pending (position 1 in tiered order)" in why
    assert ilucid("cancel", long, *common, env=env).stdout.strip() == f"{long}: stopping"
    deadline = time.monotonic() + 20
    while (
        time.monotonic() < deadline and "succeeded" not in ilucid("jobs", *common, env=env).stdout
    ):
        time.sleep(0.3)
    assert ilucid("logs", short, *common, env=env).stdout.startswith("hi ")
    final = ilucid("jobs", *common, env=env).stdout
    assert "cancelled" in final and "succeeded" in final
    bad = ilucid("explain", "j999999", *common, env=env)
    assert bad.returncode == 2 and "404: no job j999999" in bad.stderr


def test_submit_without_a_command_is_a_clear_error(served) -> None:  # type: ignore[no-untyped-def]
    data, env = served
    result = ilucid("submit", "--data-dir", str(data), env=env)
    assert result.returncode == 2 and "give the command after --" in result.stderr
