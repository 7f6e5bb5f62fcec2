"""The one progress display of long commands (``rich``), on stderr so stdout stays the
result: a bar per task on a terminal; elsewhere (a log, CI) a line every quarter."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)

__all__ = ["ProgressDisplay"]


class ProgressDisplay:
    """Progress of named tasks, each a fraction from 0 to 1.

    Use it as a context manager and call :meth:`update` with every task's fraction;
    on leaving, every task is shown complete (on success) and the display ends.
    """

    def __init__(self, labels: Sequence[str], what: str = "simulated") -> None:
        self.labels = list(labels)
        self.what = what
        self.console = Console(stderr=True, highlight=False)
        self._quarter = -1
        self._bars: Progress | None = None
        self._tasks: list[TaskID] = []

    def __enter__(self) -> ProgressDisplay:
        if self.console.is_terminal:
            self._bars = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TaskProgressColumn(),
                TimeElapsedColumn(),
                console=self.console,
                transient=False,
            )
            self._tasks = [self._bars.add_task(label, total=1.0) for label in self.labels]
            self._bars.start()
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
            print(
                f"{self.what} {overall:.0%} ({', '.join(self.labels)})",
                file=sys.stderr,
                flush=True,
            )

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if kind is None:
            self.update([1.0] * len(self.labels))
        if self._bars is not None:
            self._bars.stop()
