"""Reading a job's progress from files on this host: its output's tail, its progress file.

Both are written by the job (as its own user) and read by the service (perhaps as
root), so neither is trusted: the output is read only from its end (a job writes a
lot), and the progress file only when it is a small regular file owned by the job's
user, opened without following a link (a job cannot make the service read another
file in its place). Each read says when the report was written (the file's mtime),
so the newer of the two ways wins.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from ilucid.backends.file_tail import read_tail
from ilucid.backends.progress_read import MAX_FILE_BYTES, Progress, last_in_output, parse_file

__all__ = ["OUTPUT_TAIL_BYTES", "Stamped", "newest", "read_output_tail", "read_progress_file"]

#: how much of the end of a job's output is looked at for its last report
OUTPUT_TAIL_BYTES = 16384

#: a report with the time (epoch s) its file was last written
Stamped = tuple[Progress, float]


def read_output_tail(path: Path | str, tail_bytes: int = OUTPUT_TAIL_BYTES) -> Stamped | None:
    """The last report in the end of the output file at ``path``, if any."""
    tail = read_tail(Path(path), None, tail_bytes)
    if tail is None:
        return None
    found = last_in_output(tail.data, cut=tail.cut)
    return (found, tail.mtime) if found is not None else None


def read_progress_file(path: Path | str, owner: int | None = None) -> Stamped | None:
    """The report in the progress file at ``path``: read only as a regular file of at
    most :data:`~ilucid.backends.progress_read.MAX_FILE_BYTES`, owned by ``owner``
    (the job's uid; None: any), reached without following a link at its last two
    steps (its folder, which the job owns, and the file)."""
    path = Path(path)
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        folder = os.open(path.parent, flags | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        fd = os.open(path.name, flags | os.O_NONBLOCK, dir_fd=folder)
    except OSError:
        return None
    finally:
        os.close(folder)
    with contextlib.closing(os.fdopen(fd, "rb", buffering=0)) as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
            return None
        if owner is not None and info.st_uid != owner:
            return None
        data = handle.read(MAX_FILE_BYTES + 1)
    found = parse_file(data or b"")
    return (found, info.st_mtime) if found is not None else None


def newest(*reports: Stamped | None) -> Progress | None:
    """Of reports read from several places, the one written last."""
    present = [report for report in reports if report is not None]
    return max(present, key=lambda report: report[1])[0] if present else None
