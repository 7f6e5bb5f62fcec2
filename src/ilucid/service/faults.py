"""Named crash points that a crash test arms, so a kill lands on the exact step it
means instead of wherever a sleep happens to end.

``ILUCID_CRASH_AT=end-committed`` makes the service SIGKILL itself the first
time it reaches :func:`crash_point` ``("end-committed")``; ``end-committed:3``
the third time. Unset (always, outside tests), a crash point costs one dict
lookup.

Two families: the steps of a job's end (:data:`CRASH_POINTS`), and the steps of
every schema migration, named by :func:`migration_point` (``migration-0006-stamped``)
for whichever revisions exist, so a migration added later has its points without
an edit here.
"""

from __future__ import annotations

import os
import re
import signal

__all__ = ["CRASH_POINTS", "ENV", "MIGRATION_STEPS", "arm", "crash_point", "migration_point"]

ENV = "ILUCID_CRASH_AT"
#: the steps between a job's end and the service forgetting its files, in order
CRASH_POINTS: tuple[str, ...] = ("end-seen", "end-recorded", "end-committed", "end-forgotten")
#: the steps of one migration, in order: its transaction begun and nothing written;
#: its schema changes made but its version not stamped; stamped but not committed;
#: committed (before the next migration's transaction begins)
MIGRATION_STEPS: tuple[str, ...] = ("before", "after-ddl", "stamped", "committed")
_MIGRATION = re.compile(rf"migration-[0-9A-Za-z_]+-({'|'.join(MIGRATION_STEPS)})")


def migration_point(revision: str, step: str) -> str:
    """The crash point at ``step`` (one of :data:`MIGRATION_STEPS`) of migration ``revision``."""
    name = f"migration-{revision}-{step}"
    if not _MIGRATION.fullmatch(name):
        raise ValueError(f"no crash point for step {step!r} of migration {revision!r}")
    return name


def _armed(text: str) -> dict[str, int]:
    armed: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, count = item.partition(":")
        if name not in CRASH_POINTS and not _MIGRATION.fullmatch(name):
            raise ValueError(
                f"{ENV}: unknown crash point {name!r} (known: {CRASH_POINTS},"
                f" and migration-<revision>-<step> for a step in {MIGRATION_STEPS})"
            )
        armed[name] = int(count) if count else 1
    return armed


_left = _armed(os.environ.get(ENV, ""))


def arm(text: str) -> None:
    """Arm the points ``text`` names (as :data:`ENV` does), in place of those armed now:
    for a process forked after this module was imported (a crash test forks one child
    per kill instead of paying the imports each time)."""
    global _left
    _left = _armed(text)


def crash_point(name: str) -> None:
    """Die here, without any cleanup, if a test armed this point and its count is up."""
    if name not in _left:
        return
    _left[name] -= 1
    if _left[name] <= 0:
        os.kill(os.getpid(), signal.SIGKILL)
