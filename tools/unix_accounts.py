"""Real, unprivileged Unix accounts for the tests that run jobs as another user (root only)."""

from __future__ import annotations

import pwd
import shutil
import subprocess


def ensure_account(name: str) -> str:
    """``name``, a system account without a home, made once per machine if missing."""
    try:
        pwd.getpwnam(name)
    except KeyError:
        useradd = shutil.which("useradd") or "/usr/sbin/useradd"
        subprocess.run([useradd, "--system", "--no-create-home", name], check=True)
    return name
