"""Wrapper the local backend runs each job under: it records the exit code.

``python -m ilucid.backends.runner EXIT_FILE -- command...`` runs the command
in the same process group, passes on nothing (the group gets signals
directly), and writes the command's exit code to EXIT_FILE when it ends, so a
restarted service can read how a job it did not start ended.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m ilucid.backends.runner EXIT_FILE -- command...", file=sys.stderr)
        return 2
    exit_file, command = argv[0], argv[2:]
    # the job's process group receives preemption signals itself; stay alive to record
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGHUP):
        signal.signal(sig, lambda *_: None)
    try:
        child = subprocess.Popen(command)
    except OSError as exc:
        print(f"ilucid: cannot start {command[0]!r}: {exc.strerror}", file=sys.stderr)
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
