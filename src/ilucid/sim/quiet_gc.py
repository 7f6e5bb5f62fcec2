"""Garbage collection tuned for a replay: rare young collections, old objects frozen."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["few_collections"]

#: young objects allocated between two garbage collections during a replay (Python's
#: default is 700; see :func:`few_collections`)
_GC_YOUNG = 50_000
_gc_lock = threading.Lock()
_gc_replays = 0  # replays running in this process
_gc_saved: tuple[tuple[int, int, int], bool] = ((700, 10, 10), False)


@contextmanager
def few_collections() -> Iterator[None]:
    """Collect garbage rarely while a replay runs; afterwards, as before.

    A replay allocates millions of short-lived tuples while long-lived objects
    (the trace, a record per job, the imported libraries) make every full
    collection long: with Python's defaults a Philly replay spent about a fifth
    of its CPU time in the collector. Its objects are freed by reference
    counting and cycles are rare, so the young generation is collected every
    50,000 allocations instead of 700, and what existed before the replay is
    frozen (never rescanned) until it ends, when it and what the replay left
    join the oldest generation. Nothing a replay decides depends on it. Replays
    in threads share one setting: the first sets it, the last restores it;
    objects frozen by someone else stay frozen."""
    global _gc_replays, _gc_saved
    with _gc_lock:
        if _gc_replays == 0:
            freeze = gc.get_freeze_count() == 0
            _gc_saved = (gc.get_threshold(), freeze)
            if freeze:
                gc.freeze()
            gc.set_threshold(_GC_YOUNG, 20, 100)
        _gc_replays += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_replays -= 1
            if _gc_replays == 0:
                thresholds, froze = _gc_saved
                if froze:
                    # what the replay left goes to the oldest generation unscanned: with
                    # the default thresholds back, the young ones (up to a million objects
                    # on Philly) would be scanned at the next allocation (0.25 s)
                    gc.freeze()
                    gc.unfreeze()
                gc.set_threshold(*thresholds)
