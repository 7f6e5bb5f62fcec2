"""Group commit: requests that arrive together share one database transaction.

A commit costs the same for one row as for twenty, so while one transaction is
being written, the requests that arrive queue up; when it is done, one of the
waiting threads takes everything queued and writes it as the next transaction.
No thread of its own: the request threads take turns as the writer, and each
returns only once its item is committed (or the transaction that held it
failed, when it raises that transaction's error).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

__all__ = ["GroupCommit"]

Item = TypeVar("Item")
Result = TypeVar("Result")


class _Ticket(Generic[Item, Result]):
    """One item waiting for its transaction, then what it got. ``woken`` is set when it
    is done, or when its thread is to write the next transaction."""

    __slots__ = ("done", "error", "item", "result", "woken")

    def __init__(self, item: Item) -> None:
        self.item = item
        self.done = False
        self.result: Result | None = None
        self.error: BaseException | None = None
        self.woken = threading.Event()


class GroupCommit(Generic[Item, Result]):
    """``write(items)`` stores ``items`` in one transaction and returns one result per
    item, in order; :meth:`submit` hands one item to the next such transaction."""

    def __init__(self, write: Callable[[Sequence[Item]], Sequence[Result]]) -> None:
        self._write = write
        self._lock = threading.Lock()
        self._queued: list[_Ticket[Item, Result]] = []
        self._writing = False  # a transaction is being written (or handed on)
        #: transactions written, and the items they held (for tests and the bench)
        self.transactions = 0
        self.items = 0

    def submit(self, item: Item) -> Result:
        """``item``'s result, once the transaction that holds it has committed."""
        ticket: _Ticket[Item, Result] = _Ticket(item)
        with self._lock:
            self._queued.append(ticket)
            waits, self._writing = self._writing, True
        if waits:
            ticket.woken.wait()  # done, or handed the next transaction
            if ticket.done:
                return _outcome(ticket)
        with self._lock:  # this thread writes everything queued so far
            batch, self._queued = self._queued, []
        try:
            self._write_batch(batch)
        finally:
            with self._lock:
                if self._queued:  # arrived meanwhile: the oldest one's thread writes next
                    self._queued[0].woken.set()
                else:
                    self._writing = False
        return _outcome(ticket)

    def _write_batch(self, batch: list[_Ticket[Item, Result]]) -> None:
        try:
            results = self._write([ticket.item for ticket in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"group commit: {len(results)} results for {len(batch)} items")
        except BaseException as exc:  # every item of the failed transaction says why
            for ticket in batch:
                ticket.error, ticket.done = exc, True
                ticket.woken.set()
            return
        self.transactions += 1
        self.items += len(batch)
        for ticket, result in zip(batch, results, strict=True):
            ticket.result, ticket.done = result, True
            ticket.woken.set()


def _outcome(ticket: _Ticket[Item, Result]) -> Result:
    if ticket.error is not None:
        raise ticket.error
    return ticket.result  # type: ignore[return-value]
