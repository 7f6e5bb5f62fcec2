"""Run a kmock handler (e.g. kmock.KubernetesEmulator) as a real HTTP server
on 127.0.0.1:<free port> inside a background thread with its own asyncio loop,
so that synchronous clients (the official `kubernetes` client, urllib3, curl)
can talk to it from the main thread or other threads.

    with KMockThread(kmock.KubernetesEmulator()) as srv:
        cfg = kubernetes.client.Configuration(host=srv.url)
        ...
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any

import kmock


class KMockThread:
    def __init__(
        self,
        handler: kmock.RawHandler | None = None,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
    ) -> None:
        self.handler = handler if handler is not None else kmock.KubernetesEmulator()
        self._host, self._port = host, port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self.url: str = ""

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        try:
            # Entering the handler is REQUIRED: it starts kmock's stream feeder task and
            # makes errors render as K8s `Status` JSON instead of bubbling into aiohttp.
            async with (
                self.handler,
                kmock.Server(self.handler, host=self._host, port=self._port) as srv,
            ):
                self.url = f"http://{srv.host}:{srv.port}"
                self._started.set()
                await self._stop.wait()
        except BaseException as e:  # surface startup errors to the caller
            self._error = e
            self._started.set()
            raise

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._main())
        except BaseException:
            pass
        finally:
            # Cancel leftovers (e.g. open watch streams) before closing the loop.
            pending = asyncio.all_tasks(self._loop)
            for t in pending:
                t.cancel()
            if pending:
                self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.close()

    def start(self) -> KMockThread:
        self._thread = threading.Thread(target=self._run, name="kmock", daemon=True)
        self._thread.start()
        if not self._started.wait(timeout=10):
            raise RuntimeError("kmock server did not start in 10s")
        if self._error is not None:
            raise RuntimeError("kmock server failed to start") from self._error
        return self

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run a (sync or async) callable inside the server loop, e.g. to seed
        kmock.objects or add reactions thread-safely; returns its result."""

        async def _wrapper() -> Any:
            r = fn()
            return await r if asyncio.iscoroutine(r) else r

        assert self._loop is not None
        fut: concurrent.futures.Future = asyncio.run_coroutine_threadsafe(_wrapper(), self._loop)
        return fut.result(timeout=10)

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> KMockThread:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
