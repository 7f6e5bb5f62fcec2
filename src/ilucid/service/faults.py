"""Named crash points that a crash test arms, so a kill lands on the exact step it
means instead of wherever a sleep happens to end.

``ILUCID_CRASH_AT=end-committed`` makes the service SIGKILL itself the first
time it reaches :func:`crash_point` ``("end-committed")``; ``end-committed:3``
the third time. Unset (always, outside tests), a crash point costs one dict
lookup.
"""

from __future__ import annotations

import os
import signal

__all__ = ["CRASH_POINTS", "ENV", "crash_point"]

ENV = "ILUCID_CRASH_AT"
#: the steps between a job's end and the service forgetting its files, in order
CRASH_POINTS: tuple[str, ...] = ("end-seen", "end-recorded", "end-committed", "end-forgotten")


def _armed(text: str) -> dict[str, int]:
    armed: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, count = item.partition(":")
        if name not in CRASH_POINTS:
            raise ValueError(f"{ENV}: unknown crash point {name!r} (known: {CRASH_POINTS})")
        armed[name] = int(count) if count else 1
    return armed


_left = _armed(os.environ.get(ENV, ""))


def crash_point(name: str) -> None:
    """Die here, without any cleanup, if a test armed this point and its count is up."""
    if name not in _left:
        return
    _left[name] -= 1
    if _left[name] <= 0:
        os.kill(os.getpid(), signal.SIGKILL)
