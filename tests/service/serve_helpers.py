"""Helpers shared by the tests that run ``ilucid serve`` and the CLI as processes."""

from __future__ import annotations

import socket
import subprocess
import sys


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_ilucid(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The ``ilucid`` command as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "ilucid.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def serve_command(data: object, port: int, gpus: int, interval: float, *extra: str) -> list[str]:
    """``ilucid serve`` on ``gpus`` virtual GPUs, state in ``data``, API on ``port``."""
    return [
        sys.executable,
        "-m",
        "ilucid.cli",
        "serve",
        "--data-dir",
        str(data),
        "--gpus",
        str(gpus),
        "--port",
        str(port),
        "--interval",
        str(interval),
        *extra,
    ]
