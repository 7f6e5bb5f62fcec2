"""A process that runs ``ilucid.service.db.migrate`` in one forked child per request, so
a test can kill migrations a hundred times without paying Python's, SQLAlchemy's and
Alembic's imports each time (about 0.6 s a start on this machine).

One request per line on stdin: ``POINT URL`` (POINT ``-``: arm nothing). The child
arms POINT (:func:`ilucid.service.faults.arm`, as ``ILUCID_CRASH_AT`` would) and
migrates the database at URL; an armed point SIGKILLs it exactly there. One answer
per line on stdout: the child's exit code (``-9`` when killed), a tab, and its error
when it failed (one line).
"""

from __future__ import annotations

import os
import sys

from ilucid.service import faults
from ilucid.service.db import migrate


def _child(point: str, url: str, report: int) -> None:
    """Never returns: exits 0 once migrated, 1 with the error written to ``report``."""
    try:
        faults.arm("" if point == "-" else point)
        migrate(url)
    except BaseException as exc:
        os.write(report, " ".join(f"{type(exc).__name__}: {exc}".split()).encode())
        os._exit(1)
    os._exit(0)


def main() -> None:
    for line in sys.stdin:
        point, url = line.split()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            _child(point, url, write)
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            error = pipe.read().decode(errors="replace")
        _, status = os.waitpid(pid, 0)
        print(f"{os.waitstatus_to_exitcode(status)}\t{error}", flush=True)


if __name__ == "__main__":
    main()
