"""What the service benchmarks share: the ``ilucid`` CLI and ``ilucid serve`` run as
subprocesses of the ilucid this bench imports (a relative PYTHONPATH would not do)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

import ilucid

__all__ = ["ENV", "free_port", "ilucid_cli", "serving"]

ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(
        [str(Path(ilucid.__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]
    ),
}


def ilucid_cli(*args: str) -> str:
    """``ilucid ARGS`` from a neutral directory: its stdout, or RuntimeError with stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "ilucid.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=tempfile.gettempdir(),
        env=ENV,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ilucid {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def serving(
    serve_args: list[str], port: int, log: Path, start_timeout_s: float = 60.0
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``ilucid serve SERVE_ARGS --port PORT`` (output to ``log``) until the block ends,
    once ``/healthz`` answers: its URL and process. Stopped with SIGTERM after."""
    command = [sys.executable, "-m", "ilucid.cli", "serve", *serve_args, "--port", str(port)]
    with log.open("wb") as output:
        server = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=ENV)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_timeout_s
        while True:
            try:
                httpx.get(f"{url}/healthz", timeout=5)
                break
            except httpx.HTTPError:
                if server.poll() is not None or time.monotonic() > deadline:
                    tail = log.read_text(errors="replace")[-3000:]
                    raise RuntimeError(f"serve did not start: {tail}") from None
                time.sleep(0.2)
        yield url, server
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
