"""What a restart did with each job the database held running at the stop.

``ilucid serve`` listed those jobs as it stopped ("4 jobs keep running"); the next
start says what became of every one of them: re-adopted (its process still runs),
ended while the service was down (its exit read from the backend's record), or
requeued (nothing of it runs and no exit was recorded, so it must run again).
The same words go into each job's story.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ilucid.service.running_sentence import clock

__all__ = ["RestartOutcome", "ended_while_down", "exit_unknown"]


def ended_while_down(code: int | None, ended_at: float | None, now: float) -> str:
    """``ended while the service was down: exit 0 at 14:02:05`` (its time where the
    backend recorded it)."""
    at = "" if ended_at is None else f" at {clock(ended_at, now)}"
    return f"ended while the service was down: exit {code}{at}"


def exit_unknown(why: str | None) -> str:
    """The story of a launched job found without a process and without an exit record."""
    return (
        f"ended while the service was down; its exit is unknown ({why or 'no exit record'}):"
        " requeued"
    )


@dataclass
class RestartOutcome:
    """The jobs stored running at the last stop, by what the restart found."""

    readopted: list[str] = field(default_factory=list)
    #: (job id, how it ended: ``exit 0``, ``cancelled``)
    ended: list[tuple[str, str]] = field(default_factory=list)
    #: (job id, why it runs again: ``exit unknown``, ``never launched``)
    requeued: list[tuple[str, str]] = field(default_factory=list)

    def sentence(self) -> str | None:
        """One line for the service's log, naming every job; None when none ran."""
        total = len(self.readopted) + len(self.ended) + len(self.requeued)
        if not total:
            return None
        parts = []
        if self.readopted:
            parts.append(f"{len(self.readopted)} re-adopted ({', '.join(self.readopted)})")
        if self.ended:
            said = ", ".join(f"{job}: {how}" for job, how in self.ended)
            parts.append(f"{len(self.ended)} ended while the service was down ({said})")
        if self.requeued:
            said = ", ".join(f"{job}: {why}" for job, why in self.requeued)
            parts.append(f"{len(self.requeued)} requeued ({said})")
        jobs = "1 job was" if total == 1 else f"{total} jobs were"
        return f"restart: {jobs} running at the last stop: {'; '.join(parts)}"
