"""One Kubernetes resource kept in memory: listed once, then followed by a watch.

Why a background thread per resource rather than a short watch inside each pass: a
watch request holds its connection until the server has something to say, so a
pass that watched for even one second per resource would wait four seconds; a
thread keeps the connection open, applies each event as it comes, and the pass
only reads the copy in memory (``Informer.snapshot``), which costs no API call.

The protocol is the API server's own (client-go's reflector does the same):

* list, note the list's ``resourceVersion``, then watch from it with
  ``allowWatchBookmarks``: bookmarks move the version forward even when nothing
  this watch selects changed, so a reconnect rarely asks for expired history;
* a watch ends by itself after ``timeoutSeconds`` (4 min here) and is opened again
  from the last version seen; every ``resync_s`` (5 min) the resource is listed
  afresh, which heals an event lost anywhere;
* a watch that asks for a version the server no longer keeps gets ``410 Gone``
  (an ``ERROR`` event or the response status): list again and watch from there;
* any other error is kept in ``error`` (the backend reports the API as unavailable
  while it is set) and retried with a growing delay; nothing escapes the thread;
* an optional resource that is not served (404: a CRD not installed) or not to
  ilucid (403: an older RBAC) is ``missing`` with the reason, not an error, and is
  looked for again at the next resync.

Objects are the API's JSON (dicts). The backend's own writes are put in at once
(``wrote``) so that the next pass never sees an older state than the one it wrote;
an event older than what is held is ignored.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from ilucid.backends.base import BackendUnavailable

__all__ = ["Informer", "api_error", "status_of"]

Obj = dict[str, Any]


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of an API error (None for a failure that got no answer)."""
    from kubernetes.client.exceptions import ApiException

    return exc.status if isinstance(exc, ApiException) else None


def api_error(exc: Exception) -> BackendUnavailable:
    """The API's own status and reason when it answered, else what kind of failure."""
    from kubernetes.client.exceptions import ApiException

    if isinstance(exc, ApiException):
        status, reason = exc.status, exc.reason or type(exc).__name__
        return BackendUnavailable(f"Kubernetes API: {status or ''} {reason}".strip())
    return BackendUnavailable(f"Kubernetes API: {type(exc).__name__}")


def key_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


def _version(obj: Mapping[str, Any]) -> int | None:
    text = str((obj.get("metadata") or {}).get("resourceVersion") or "")
    return int(text) if text.isdigit() else None


def _older(candidate: Mapping[str, Any], held: Mapping[str, Any]) -> bool:
    """Whether ``candidate`` is an older state than ``held``. Resource versions are
    opaque strings to clients; etcd's are integers, and only then are they compared."""
    new, old = _version(candidate), _version(held)
    return new is not None and old is not None and new < old


class Informer:
    """One resource's objects by ``namespace/name``, listed once and kept current by a
    watch in a daemon thread (see the module's docstring)."""

    def __init__(
        self,
        what: str,
        call: Callable[..., Any],
        label_selector: str | None = None,
        resync_s: float = 300.0,
        watch_s: float = 240.0,
        optional: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what = what
        self._call = call  # the API's list function; with watch=True it watches
        self._selector = {"label_selector": label_selector} if label_selector else {}
        self.resync_s, self.watch_s = resync_s, watch_s
        self.optional = optional
        self.clock = clock
        self._lock = threading.Lock()
        self._objects: dict[str, Obj] = {}
        self.resource_version: str | None = None
        self.synced = threading.Event()  # the first list is in
        self.error: str | None = None
        self.missing: str | None = None  # why an optional kind is not there
        self.generation = 0  # moves on every change held (a key for derived views)
        self.lists = self.expired = self.bookmarks = self.events = 0
        self._listed_at = 0.0
        self._stop = threading.Event()
        self._watch: Any = None
        self._thread: threading.Thread | None = None

    # -- reading ------------------------------------------------------------------------
    def snapshot(self) -> list[Obj]:
        with self._lock:
            return list(self._objects.values())

    def get(self, key: str) -> Obj | None:
        with self._lock:
            return self._objects.get(key)

    def wrote(self, obj: Obj) -> None:
        """What the API answered to the backend's own write: held at once."""
        self._hold(key_of(obj), obj)

    def deleted(self, key: str) -> None:
        """The backend deleted this object: dropped at once (its DELETED event may lag)."""
        with self._lock:
            if self._objects.pop(key, None) is not None:
                self.generation += 1

    # -- running ------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name=f"ilucid-watch-{self.what}", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        watch = self._watch
        if watch is not None:
            watch.stop()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        delay = 1.0
        while not self._stop.is_set():
            try:
                due = self.clock() - self._listed_at >= self.resync_s
                if self.resource_version is None or due:
                    self._list()
                self._follow()
                delay = 1.0
            except Exception as exc:  # the thread never dies: it says so and retries
                if self._stop.is_set():
                    return
                status = status_of(exc)
                if status == 410:  # the history it asked for is gone: list again
                    self.expired += 1
                    self.resource_version = None
                    continue
                if status in (403, 404) and self.optional:  # no CRD, or not granted
                    self._absent(f"{self.what}: {api_error(exc)}")
                    continue
                self.error = f"{self.what}: {api_error(exc)}"
                self._stop.wait(delay)
                delay = min(delay * 2, 30.0)

    def _list(self) -> None:
        response = self._call(**self._selector, _preload_content=False, _request_timeout=30)
        document = json.loads(response.data)
        objects = {key_of(obj): obj for obj in document.get("items") or []}
        with self._lock:
            self._objects = objects
            self.resource_version = str(document["metadata"]["resourceVersion"])
            self.generation += 1
        self.lists += 1
        self._listed_at = self.clock()
        self.error, self.missing = None, None
        self.synced.set()

    def _absent(self, why: str) -> None:
        """A kind this server does not serve (or not to ilucid): empty, and looked for
        again at the next resync; ``missing`` says why."""
        with self._lock:
            if self._objects:
                self._objects = {}
                self.generation += 1
        self.error, self.missing = None, why
        self.resource_version = None
        self._listed_at = self.clock()
        self.synced.set()
        self._stop.wait(self.resync_s)

    def _follow(self) -> None:
        """One watch, from the version last seen, until the server ends it (its timeout,
        at most until the next resync) or it fails."""
        from kubernetes import watch

        left = self.resync_s - (self.clock() - self._listed_at)
        seconds = max(1, int(min(self.watch_s * random.uniform(1.0, 1.25), left)))
        self._watch = stream = watch.Watch(return_type=object)  # type: ignore[no-untyped-call]
        for event in stream.stream(  # type: ignore[no-untyped-call]
            self._call,
            **self._selector,
            resource_version=self.resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=seconds,
            _request_timeout=(10, seconds + 30),
        ):
            self._apply(str(event["type"]), event["raw_object"])
            if self._stop.is_set():
                stream.stop()  # type: ignore[no-untyped-call]
        self.error = None

    def _apply(self, kind: str, obj: Obj) -> None:
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if kind == "BOOKMARK":
            self.bookmarks += 1
        elif kind == "DELETED":
            with self._lock:
                if self._objects.pop(key_of(obj), None) is not None:
                    self.generation += 1
        else:  # ADDED, MODIFIED
            self._hold(key_of(obj), obj)
        self.events += 1
        self.error = None
        if version:
            self.resource_version = str(version)

    def _hold(self, key: str, obj: Obj) -> None:
        with self._lock:
            held = self._objects.get(key)
            if held is None or not _older(obj, held):
                self._objects[key] = obj
                self.generation += 1
