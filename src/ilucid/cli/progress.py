"""The one progress display of long commands (``rich``), on stderr so stdout stays the
result: a bar per task on a terminal; elsewhere (a log, CI) a line every quarter.

Two shapes share it: :class:`ProgressDisplay` for tasks that report a fraction done
(a replay's simulated time), :class:`CountDisplay` for a count of items that each end
done or failed (a sweep's cells)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from ilucid.cli.common import printable

__all__ = ["CountDisplay", "ProgressDisplay"]


class _Display:
    """The console both displays write to, and the bars they show on a terminal only."""

    def __init__(self) -> None:
        self.console = Console(stderr=True, highlight=False)
        self._bars: Progress | None = None

    def _start(self, *columns: ProgressColumn) -> Progress | None:
        """Bars with ``columns`` when stderr is a terminal, else None (lines instead)."""
        if not self.console.is_terminal:
            return None
        self._bars = Progress(*columns, console=self.console, transient=False)
        self._bars.start()
        return self._bars

    def note(self, text: str) -> None:
        """A line of its own on stderr (above the bars while they show), taken literally
        (no markup; control characters escaped)."""
        text = printable(text)
        if self._bars is not None:
            self._bars.console.print(text, markup=False)
        else:
            print(text, file=sys.stderr, flush=True)

    def _finished(self) -> None:
        """The work ended without an error (a display may show it complete)."""

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if kind is None:
            self._finished()
        if self._bars is not None:
            self._bars.stop()


class ProgressDisplay(_Display):
    """Progress of named tasks, each a fraction from 0 to 1.

    Use it as a context manager and call :meth:`update` with every task's fraction;
    on leaving, every task is shown complete (on success) and the display ends.
    """

    def __init__(self, labels: Sequence[str], what: str = "simulated") -> None:
        super().__init__()
        self.labels = list(labels)
        self.what = what
        self._quarter = -1
        self._tasks: list[TaskID] = []

    def __enter__(self) -> ProgressDisplay:
        columns = (TaskProgressColumn(), TimeElapsedColumn())
        bars = self._start(TextColumn("{task.description}"), BarColumn(), *columns)
        if bars is not None:
            self._tasks = [bars.add_task(label, total=1.0) for label in self.labels]
        return self

    def update(self, fractions: Sequence[float]) -> None:
        """Show each task's fraction done (in the order of ``labels``)."""
        if self._bars is not None:
            for task, fraction in zip(self._tasks, fractions, strict=True):
                self._bars.update(task, completed=min(1.0, max(0.0, fraction)))
            return
        overall = sum(fractions) / max(1, len(fractions))
        quarter = int(overall * 4)
        if quarter > self._quarter:
            self._quarter = quarter
            self.note(f"{self.what} {overall:.0%} ({', '.join(self.labels)})")

    def _finished(self) -> None:
        self.update([1.0] * len(self.labels))


class CountDisplay(_Display):
    """``total`` items, each ending done or failed: ``sweep 3/40 cells, 1 failed``.

    On a terminal, one bar with the count, the failures, the time taken and the time
    left; elsewhere a line each tenth of the items and at the last. Failures are
    counted apart because a sweep goes on past them and the user must see them early.
    """

    def __init__(self, total: int, what: str, unit: str) -> None:
        super().__init__()
        self.total, self.what, self.unit = total, what, unit
        self.done = 0
        self.failed = 0
        self._tenth = 0
        self._task: TaskID | None = None

    def __enter__(self) -> CountDisplay:
        bars = self._start(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(f"{self.unit}, [red]{{task.fields[failed]}} failed"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
        )
        if bars is not None:
            self._task = bars.add_task(self.what, total=self.total, failed=0)
        return self

    def advance(self, failed: bool = False) -> None:
        """One more item ended; ``failed`` when it ended in failure."""
        self.done += 1
        self.failed += failed
        if self._bars is not None and self._task is not None:
            self._bars.update(self._task, advance=1, failed=self.failed)
            return
        tenth = self.done * 10 // max(1, self.total)
        if tenth > self._tenth or self.done == self.total:
            self._tenth = tenth
            self.note(f"{self.what}: {self.done}/{self.total} {self.unit}, {self.failed} failed")
