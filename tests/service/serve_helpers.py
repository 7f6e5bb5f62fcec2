"""Helpers shared by the tests that run ``ilucid serve`` and the CLI as processes."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from ilucid.service.faults import ENV


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _enterable_cwd() -> str | None:
    """The directory the CLI runs in: ``submit`` sends it as the job's ``cwd``, which a
    root service refuses when the job's account cannot enter it (a checkout under a
    0700 home); those tests are not about that, so they submit from /tmp instead."""
    here = Path.cwd()
    enterable = all(p.stat().st_mode & 0o001 for p in [here, *here.parents])
    return None if enterable else tempfile.gettempdir()


def run_ilucid(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The ``ilucid`` command as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "ilucid.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
        cwd=_enterable_cwd(),
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


@contextlib.contextmanager
def serving(
    data: Path, port: int, gpus: int, env: dict[str, str], *extra: str
) -> Iterator[dict[str, str]]:
    """A real ``ilucid serve`` (0.2 s passes) until the block ends; yields ``env`` with
    the service's URL and admin token, as a user's shell would have them."""
    env = {**env, "ILUCID_URL": f"http://127.0.0.1:{port}"}
    # its output goes to a file beside the data directory, never to a pipe: a pipe no one
    # reads fills (64 KiB of job transitions) and the service blocks on its next log line
    log_path = data.parent / f"{data.name}.serve.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            serve_command(data, port, gpus, 0.2, *extra),
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
    deadline = time.monotonic() + 30
    while run_ilucid("nodes", "--data-dir", str(data), env=env).returncode != 0:
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            process.wait()
            raise AssertionError(f"serve did not start: {log_path.read_text()}")
        time.sleep(0.3)
    env["ILUCID_TOKEN"] = (data / "admin.token").read_text().strip()
    try:
        yield env
    finally:
        process.terminate()
        process.wait(timeout=15)


class Server:
    """One ``ilucid serve`` process at a time on a fixed data directory and port, killed
    and restarted by the crash tests."""

    def __init__(self, command: list[str], env: dict[str, str], url: str) -> None:
        self.command, self.env, self.url = command, env, url
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, crash_at: str | None = None) -> None:
        env = dict(self.env)
        if crash_at is not None:
            env[ENV] = crash_at
        self.process = subprocess.Popen(
            self.command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return  # an armed point was reached during start-up (it ended a job)
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.05)
        self.process.kill()
        raise AssertionError("serve did not come up")

    def kill(self) -> None:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def died_by_itself(self, within_s: float) -> bool:
        assert self.process is not None
        try:
            code = self.process.wait(timeout=within_s)
        except subprocess.TimeoutExpired:
            return False
        return code == -signal.SIGKILL
