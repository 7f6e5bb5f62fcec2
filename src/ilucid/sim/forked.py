"""Functions run in forked worker processes that fail rather than hang.

Each item runs in a process of its own (at most ``workers`` at once), forked so
that it inherits the trace a module global holds instead of unpickling it. The
worker sends its result back through a pipe and exits. How a worker can fail,
and what the caller gets instead of a wait for ever:

* it dies before sending its result (a crash, a kill): :class:`WorkerDied`, with
  its exit code;
* its result cannot be read back here (a class that does not unpickle):
  :class:`WorkerDied`, from the unpickling error;
* it does not exit within ``exit_within_s`` of its result arriving: it is killed
  and its :class:`Outcome` carries a :class:`WorkerStuck` naming it. This is how a
  worker hangs after its work is done: multiprocessing's exit handler joins the
  worker's non-daemonic children, and one of them never ends (a replay's fit
  process did, issue 30).

Why not ``multiprocessing.Pool``: when a worker dies, or its result cannot be
unpickled in the parent, a Pool's result thread dies and ``map`` waits for ever.
Why not ``ProcessPoolExecutor``: its shutdown joins its workers with no bound, so
a worker stuck in its exit handler held ``ilucid simulate`` for ever after its
last result had arrived.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from multiprocessing.reduction import ForkingPickler
from typing import Any, Generic, TypeVar

__all__ = ["EXIT_WITHIN_S", "Outcome", "WorkerDied", "WorkerStuck", "forked_map", "run_forked"]

T = TypeVar("T")
R = TypeVar("R")

#: seconds a worker may take to exit once its result has arrived
EXIT_WITHIN_S = 30.0


class WorkerDied(BrokenProcessPool):
    """A worker ended without a result this process could read (a ``BrokenProcessPool``,
    as an executor would have raised)."""


class WorkerStuck(RuntimeError):
    """A worker had not exited a bounded time after its result arrived; it was killed."""

    def __init__(self, label: str, pid: int, bound_s: float) -> None:
        super().__init__(
            f"the worker of {label} (pid {pid}) had not exited {bound_s:g} s after its result"
            " arrived, so it was killed (multiprocessing's exit waits for a worker's"
            " non-daemonic child processes: one of them was still running)"
        )
        self.label, self.pid, self.bound_s = label, pid, bound_s


@dataclass(frozen=True, slots=True)
class Outcome(Generic[R]):
    """One item's result, the worker that made it, and whether that worker then hung."""

    label: str
    pid: int
    value: R
    stuck: WorkerStuck | None = None


def _work(function: Callable[[Any], Any], item: Any, conn: Connection) -> None:
    """In the worker: run, then send ``("value", result)`` or ``("raised", exception)``."""
    try:
        message: tuple[str, Any] = ("value", function(item))
    except BaseException as exc:  # every failure goes back to the caller
        message = ("raised", exc)
    try:
        conn.send(message)
    except Exception as exc:  # the result (or the exception) does not pickle
        conn.send(("raised", RuntimeError(f"the worker's result could not be sent: {exc!r}")))
    conn.close()


class _Worker:
    """One forked worker and what has come back from it."""

    def __init__(self, context: Any, function: Callable[[Any], Any], item: Any, label: str) -> None:
        self.label = label
        reader, writer = context.Pipe(duplex=False)
        self.process: BaseProcess = context.Process(
            target=_work, args=(function, item, writer), name=f"ilucid worker ({label})"
        )
        self.process.start()
        writer.close()  # the worker holds the only writer: its exit is our end of file
        self.conn: Connection = reader
        self.message: tuple[str, Any] | None = None
        self.arrived = 0.0  # monotonic time the message was read
        self.ended_early = False  # end of file with no message

    @property
    def pid(self) -> int:
        assert self.process.pid is not None
        return self.process.pid

    def waits_on(self) -> list[Any]:
        """What to select on: the pipe until something came, and the exit."""
        reading = self.message is None and not self.ended_early
        return [self.conn, self.process.sentinel] if reading else [self.process.sentinel]

    def read(self) -> None:
        """Read the message if one is ready; raises what the worker's function raised."""
        if self.message is not None or self.ended_early or not self.conn.poll():
            return
        try:
            data = self.conn.recv_bytes()
        except (EOFError, OSError):
            self.ended_early = True
            return
        try:
            message = ForkingPickler.loads(data)
        except Exception as exc:
            raise WorkerDied(
                f"{self.label}: the result of worker pid {self.pid} could not be read back: {exc!r}"
            ) from exc
        self.message, self.arrived = message, time.monotonic()
        if message[0] == "raised":
            raise message[1]

    def outcome(self, exit_within_s: float) -> Outcome[Any] | None:
        """The finished outcome, None while the worker may still run."""
        self.read()
        if not self.process.is_alive():
            self.process.join()
            self.read()  # sent just before it exited
            if self.message is None:
                raise WorkerDied(
                    f"{self.label}: worker pid {self.pid} exited with code"
                    f" {self.process.exitcode} before sending its result"
                )
            return Outcome(self.label, self.pid, self.message[1])
        if self.message is not None and time.monotonic() - self.arrived > exit_within_s:
            stuck = WorkerStuck(self.label, self.pid, exit_within_s)
            self.end()
            return Outcome(self.label, stuck.pid, self.message[1], stuck)
        return None

    def deadline(self, exit_within_s: float) -> float | None:
        return None if self.message is None else self.arrived + exit_within_s

    def end(self) -> None:
        """Kill the worker if it still runs, and reap it."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.conn.close()


def run_forked(
    function: Callable[[T], R],
    items: Iterable[T],
    workers: int,
    labels: Sequence[str] | None = None,
    exit_within_s: float = EXIT_WITHIN_S,
    on_tick: Callable[[], None] | None = None,
    tick_s: float = 0.2,
) -> Iterator[Outcome[R]]:
    """``function`` over ``items``, each in its own forked process, ``workers`` at once;
    outcomes in the items' order. ``labels`` name the items in errors (default: "item N").
    ``on_tick`` is called every ``tick_s`` while workers run. Stopping early, or an error,
    kills the workers still running."""
    todo = deque(enumerate(items))
    names = list(labels) if labels is not None else [f"item {i}" for i in range(len(todo))]
    if len(names) != len(todo):
        raise ValueError(f"{len(names)} labels for {len(todo)} items")
    context = mp.get_context("fork")
    running: dict[int, _Worker] = {}
    finished: dict[int, Outcome[R]] = {}
    given = 0
    try:
        while todo or running:
            while todo and len(running) < max(1, workers):
                index, item = todo.popleft()
                running[index] = _Worker(context, function, item, names[index])
            deadlines = [
                d for w in running.values() if (d := w.deadline(exit_within_s)) is not None
            ]
            timeout = tick_s
            if deadlines:
                timeout = max(0.0, min(timeout, min(deadlines) - time.monotonic()))
            wait([o for w in running.values() for o in w.waits_on()], timeout)
            for index, worker in list(running.items()):
                outcome = worker.outcome(exit_within_s)
                if outcome is not None:
                    finished[index] = outcome
                    del running[index]
            if on_tick is not None:
                on_tick()
            while given in finished:
                yield finished.pop(given)
                given += 1
    finally:
        for worker in running.values():
            worker.end()


def forked_map(
    function: Callable[[T], R],
    items: Iterable[T],
    workers: int,
    exit_within_s: float = EXIT_WITHIN_S,
) -> Iterator[R]:
    """``function`` over ``items`` in ``workers`` forked processes, results in order;
    raises :class:`WorkerStuck` for a worker that does not exit after its result."""
    for outcome in run_forked(function, items, workers, exit_within_s=exit_within_s):
        if outcome.stuck is not None:
            raise outcome.stuck
        yield outcome.value
