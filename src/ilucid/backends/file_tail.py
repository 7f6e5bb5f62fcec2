"""The end of a file a job can write, read as the service may: never through a link,
never blocking on a FIFO, only a regular file (of its owner, where one is given)."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import NamedTuple

__all__ = ["Tail", "read_tail"]


class Tail(NamedTuple):
    """The end of a file: its bytes, whether anything came before them, its mtime."""

    data: bytes
    cut: bool
    mtime: float


def read_tail(path: Path, owner: int | None, tail_bytes: int) -> Tail | None:
    """The last ``tail_bytes`` of the regular file at ``path``, opened without following
    a link, if ``owner`` (None: anyone) owns it; None otherwise or if it is missing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with contextlib.closing(os.fdopen(fd, "rb", buffering=0)) as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or (owner is not None and info.st_uid != owner):
            return None
        start = max(0, info.st_size - tail_bytes)
        handle.seek(start)
        return Tail(handle.read(tail_bytes) or b"", start > 0, info.st_mtime)
