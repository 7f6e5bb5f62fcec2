"""A throw-away PostgreSQL server from Debian's packages, for tests and benchmarks.

Installs ``postgresql`` with apt when it is missing (as root), creates a cluster owned
by the ``postgres`` user in a temporary directory, listens only on a Unix socket
there, and removes it afterwards. Tests (``tests/service/conftest.py``) and
``bench/service_scale.py`` share it, so both measure the same real server.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["PostgresUnavailable", "throwaway_postgres"]


class PostgresUnavailable(RuntimeError):
    """PostgreSQL is not installed and cannot be installed here (needs root and apt)."""


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    which = shutil.which("initdb")
    return Path(which).parent if which else None


def _install() -> None:
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    wait = ["-o", "DPkg::Lock::Timeout=600"]  # other test fixtures may be installing too
    subprocess.run(["apt-get", *wait, "update", "-q"], check=False, env=env, capture_output=True)
    subprocess.run(
        ["apt-get", *wait, "install", "-y", "-q", "--no-install-recommends", "postgresql"],
        check=False,
        env=env,
        capture_output=True,
    )


def _as_postgres(*command: str) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else list(command)


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[str]:
    """A running server's SQLAlchemy URL until the block ends; then it is stopped and
    its files removed. Raises :class:`PostgresUnavailable` when it cannot be had."""
    bin_dir = _bin_dir()
    if bin_dir is None:
        _install()
        bin_dir = _bin_dir()
    if bin_dir is None:
        raise PostgresUnavailable(
            "PostgreSQL is not installed and cannot be installed here (needs root + apt)"
        )
    # the server runs as ``postgres``: its directory must not sit under root-only paths
    root = Path(tempfile.mkdtemp(prefix="ilucid-pg-"))
    data, sockets = root / "data", root / "run"
    sockets.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sockets, "postgres")
        root.chmod(0o755)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    pg_ctl = str(bin_dir / "pg_ctl")
    try:
        subprocess.run(
            _as_postgres(str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust"),
            check=True,
            capture_output=True,
        )
        options = f"-p {port} -k {sockets} -c listen_addresses=''"
        start = [pg_ctl, "-D", str(data), "-o", options, "-w", "start", "-l", str(root / "log")]
        subprocess.run(_as_postgres(*start), check=True, capture_output=True)
        try:
            yield f"postgresql+psycopg://postgres@/postgres?host={sockets}&port={port}"
        finally:
            subprocess.run(
                _as_postgres(pg_ctl, "-D", str(data), "-m", "fast", "stop"),
                check=False,
                capture_output=True,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
