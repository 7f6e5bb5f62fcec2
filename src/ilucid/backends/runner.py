"""Wrapper the local backend runs each job under: it records the exit code.

``python -m ilucid.backends.runner EXIT_FILE [--as USER] -- command...`` runs
the command in the same process group, passes on nothing (the group gets
signals directly), and writes the command's exit code to EXIT_FILE when it
ends, so a restarted service can read how a job it did not start ended.

With ``--as USER`` (the service is root) the command runs as that account, with
its groups and a umask of 022; the wrapper itself stays root only to write
EXIT_FILE, inside the service's private data directory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

from ilucid.backends.accounts import unix_account


def _identity(name: str) -> dict[str, Any]:
    """Popen's arguments that make the child ``name`` (never root)."""
    account = unix_account(name)
    return {
        "user": account.pw_uid,
        "group": account.pw_gid,
        "extra_groups": os.getgrouplist(account.pw_name, account.pw_gid),
    }


def main(argv: list[str]) -> int:
    usage = "usage: python -m ilucid.backends.runner EXIT_FILE [--as USER] -- command..."
    if len(argv) >= 3 and argv[1] == "--as":
        exit_file, who, argv = argv[0], argv[2], [argv[0], *argv[3:]]
    else:
        exit_file, who = (argv[0] if argv else ""), None
    if len(argv) < 3 or argv[1] != "--":
        print(usage, file=sys.stderr)
        return 2
    command = argv[2:]
    # the job's process group receives preemption signals itself; stay alive to record
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGHUP):
        signal.signal(sig, lambda *_: None)
    try:
        identity = _identity(who) if who is not None else {}
        child = subprocess.Popen(command, umask=0o022, **identity)
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"ilucid: cannot start {command[0]!r}: {why}", file=sys.stderr)
        code = 127
    else:
        code = child.wait()
    temporary = exit_file + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(str(code))
    os.replace(temporary, exit_file)
    return 0 if code >= 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
