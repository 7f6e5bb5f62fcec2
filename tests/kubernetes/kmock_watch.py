"""The emulated cluster the Kubernetes tests run against: ``kmock_ext``'s API server
semantics, plus what a watching scheduler meets on a real one.

* watch from a resourceVersion: objects changed after it are replayed as ADDED, then
  every change as it happens (the stream subscribes before it takes its snapshot, so
  no change falls between the two); labelSelector, fieldSelector, namespace and
  timeoutSeconds are honoured;
* bookmarks: with ``allowWatchBookmarks=true`` an idle stream gets a BOOKMARK with the
  current resourceVersion every ``bookmark_s`` seconds (a real server: about a minute);
* expiry: :meth:`ClusterEmulator.compact` forgets the history (as etcd compaction does)
  and ends every open watch; a watch asked from an older resourceVersion then gets
  the API server's ``ERROR`` event with a 410 Expired Status, and the client must list
  again;
* lost events: while ``muted`` no change reaches any watch (what a resync is for);
* an API server away: while ``failing`` holds an HTTP status, every API request gets
  it (and open watches end);
* the multi-node job kinds as their CRDs declare them: JobSet
  (``jobset.x-k8s.io/v1alpha2``) and Kubeflow's PyTorchJob (``kubeflow.org/v1``), each
  with a ``status`` subresource; and cluster-autoscaler's ProvisioningRequest
  (``autoscaling.x-k8s.io/v1``, ``status`` too), checked against its CRD's schema, as
  PodTemplates are against Kubernetes' (``kmock_schema``).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

import aiohttp.web
import attrs
from kmock._internal import k8s, references, rendering
from kmock_ext import StatefulKubernetesEmulator, match_fields, match_labels
from kmock_schema import VALIDATORS

#: (group, version, plural, kind) of the custom resources the emulator serves
CUSTOM_KINDS = (
    ("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet"),
    ("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob"),
    ("autoscaling.x-k8s.io", "v1", "provisioningrequests", "ProvisioningRequest"),
)


def _expired(since: str, oldest: int) -> dict[str, Any]:
    return {
        "type": "ERROR",
        "object": {
            "apiVersion": "v1",
            "kind": "Status",
            "metadata": {},
            "status": "Failure",
            "message": f"too old resource version: {since} ({oldest})",
            "reason": "Expired",
            "code": 410,
        },
    }


@attrs.define(kw_only=True)
class ClusterEmulator(StatefulKubernetesEmulator):
    #: seconds between bookmarks on an idle watch that asked for them (None: never)
    bookmark_s: float | None = 1.0
    #: the oldest resourceVersion a watch may start from (raised by :meth:`compact`)
    oldest_rv: int = 0
    #: while True, changes reach no watch (they are lost, as events can be)
    muted: bool = False
    #: while set, every API request is answered with this HTTP status
    failing: int | None = None
    _closing: asyncio.Event = attrs.field(factory=asyncio.Event, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        for group, version, plural, kind in CUSTOM_KINDS:
            self.resources[references.resource(group, version, plural)] = references.ResourceInfo(
                namespaced=True,
                kind=kind,
                singular=kind.lower(),
                verbs={"get", "list", "watch", "create", "update", "patch", "delete"},
                subresources={"status"},
            )
        self.validators.update(VALIDATORS)

    def compact(self) -> None:
        """Forget the history up to now and end every open watch (run it in the
        server's loop: ``server.call(handler.compact)``)."""
        self.oldest_rv = self._rv
        self._closing.set()
        self._closing = asyncio.Event()

    def fail(self, status: int | None) -> None:
        """Answer every API request with ``status`` (None: serve again); open watches
        end (run it in the server's loop)."""
        self.failing = status
        self._closing.set()
        self._closing = asyncio.Event()

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        if self.failing is not None and request.resource is not None:
            raise k8s.KubernetesError(
                status=self.failing, reason="ServiceUnavailable", message="emulated outage"
            )
        return await super()._handle(request)

    def _replay(self, request: rendering.Request, since: int | None) -> list[dict[str, Any]]:
        """Objects of the watched resource changed after ``since`` (all when None)."""
        found = []
        for (res, namespace, _), obj in self._objects.items():
            if res != request.resource or obj.deleted:
                continue
            if request.namespace is not None and namespace != request.namespace:
                continue
            version = int(obj.raw.get("metadata", {}).get("resourceVersion", "0") or 0)
            if since is None or version > since:
                found.append(copy.deepcopy(obj.raw))
        return found

    def _wanted(self, request: rendering.Request, obj: dict[str, Any]) -> bool:
        meta = obj.get("metadata", {})
        if request.namespace is not None and meta.get("namespace") != request.namespace:
            return False
        return match_labels(
            request.params.get("labelSelector"), meta.get("labels")
        ) and match_fields(request.params.get("fieldSelector"), obj)

    def _bookmark(self, request: rendering.Request) -> dict[str, Any]:
        info = self._info(request.resource)
        res = request.resource
        return {
            "type": "BOOKMARK",
            "object": {
                "apiVersion": res.version if not res.group else f"{res.group}/{res.version}",
                "kind": info.kind if info and info.kind else "",
                "metadata": {"resourceVersion": str(self._rv)},
            },
        }

    async def _serve_watch(self, request: rendering.Request) -> AsyncIterator[rendering.Payload]:
        yield b""  # the headers go out at once, even when nothing happens
        params = request.params
        since_text = params.get("resourceVersion") or ""
        since = int(since_text) if since_text.isdigit() and since_text != "0" else None
        if since is not None and since < self.oldest_rv:
            yield _expired(since_text, self.oldest_rv)
            return
        bookmarks = params.get("allowWatchBookmarks") == "true"
        loop = asyncio.get_running_loop()
        timeout = float(params.get("timeoutSeconds") or 0)
        deadline = loop.time() + timeout if timeout else None
        bus = self._buses[request.resource]
        async with self._lock:  # no change can fall between the snapshot and the mark
            replay = self._replay(request, since)
            marker = await bus.mark()
            closing = self._closing
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

        async def pump() -> None:
            async for event in bus.stream(since=marker):
                if not self.muted:
                    await queue.put(event)

        pumping = asyncio.create_task(pump())
        try:
            for obj in replay:
                if self._wanted(request, obj):
                    yield {"type": "ADDED", "object": obj}
            async for event in self._events(queue, closing, deadline, bookmarks):
                if event is None:
                    yield self._bookmark(request)
                elif self._wanted(request, event.get("object", {})):
                    yield event
        finally:
            pumping.cancel()
            await bus.unmark(marker)

    async def _events(
        self,
        queue: asyncio.Queue[dict[str, Any]],
        closing: asyncio.Event,
        deadline: float | None,
        bookmarks: bool,
    ) -> AsyncIterator[dict[str, Any] | None]:
        """Changes as they come, None when a bookmark is due; ends at the deadline or
        when the history is compacted."""
        loop = asyncio.get_running_loop()
        while not closing.is_set():
            waits = [] if deadline is None else [deadline - loop.time()]
            if bookmarks and self.bookmark_s:
                waits.append(self.bookmark_s)
            wait = min(waits) if waits else None
            if wait is not None and wait <= 0:
                return
            getting = asyncio.ensure_future(queue.get())
            closed = asyncio.ensure_future(closing.wait())
            await asyncio.wait({getting, closed}, timeout=wait, return_when="FIRST_COMPLETED")
            closed.cancel()
            if getting.done():  # also when it completed as the wait timed out
                yield getting.result()
                continue
            getting.cancel()
            if closing.is_set() or (deadline is not None and loop.time() >= deadline):
                return
            yield None  # idle for bookmark_s: a bookmark
