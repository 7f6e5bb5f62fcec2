"""A Kubernetes API emulator (kmock, extended in ``kmock_ext``) served over real HTTP, so
the official ``kubernetes`` client the backend uses talks to it exactly as to an API
server. Objects shaped like a real cluster's are in ``kube_fixtures``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kmock_thread import KMockThread
from kmock_watch import ClusterEmulator
from kube_fixtures import Emulator, close_backends


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    handler = ClusterEmulator()
    with KMockThread(handler) as server:
        yield Emulator(handler, server)
        close_backends()
