"""Where the local backend's runner comes from: a copy in the service's private data
directory, so what runs as root before a job drops to its user's uid is a file
only the service can write, run isolated (``python -I``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ilucid.backends import runner as runner_module

__all__ = ["can_hide_proc", "install_runner"]


def install_runner(data_dir: Path) -> Path:
    """The runner's copy in ``data_dir`` (rewritten when the installed one changed)."""
    source = Path(runner_module.__file__ or "").read_bytes()
    target = data_dir / "runner.py"
    if not target.exists() or target.read_bytes() != source:
        temporary = target.with_name(f".runner.{os.getpid()}.tmp")
        temporary.write_bytes(source)
        temporary.chmod(0o644)
        os.replace(temporary, target)
    return target


def can_hide_proc(runner: Path) -> bool:
    """Whether a job's private ``/proc`` (hidepid) can be mounted here: the runner
    tries it in a child of its own."""
    probe = [sys.executable, "-I", str(runner), "--probe-proc"]
    try:
        return subprocess.run(probe, cwd="/", timeout=10, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
