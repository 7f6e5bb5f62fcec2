"""Each reconcile pass says where its time went (observe, decide, apply, commit), in the
service's debug log and on the reconciler: what bench/service_scale.py reads, and what
an operator reads when a pass is slow (issue 32)."""

from __future__ import annotations

import logging
import re
import sys
import time
from pathlib import Path

import pytest

from ilucid.core import Cluster, Node
from ilucid.service.db import make_engine, migrate
from ilucid.service.job_store import JobRequest
from ilucid.service.latency import PASS_PARTS
from ilucid.service.scheduler_service import SchedulerService

sys.path.insert(0, str(Path(__file__).resolve().parent))
from memory_backend import MemoryBackend

LINE = re.compile(
    r"reconcile pass: "
    + ", ".join(rf"{part} (?P<{part}>[\d.]+) ms" for part in PASS_PARTS)
    + r" \((?P<decisions>\d+) decisions\)"
)


def test_the_pass_is_split_into_its_parts_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path / 'ilucid.db'}"
    migrate(url)
    service = SchedulerService(make_engine(url), MemoryBackend(Cluster((Node("a", 4),))))
    for _ in range(3):
        service.submit(JobRequest(["train"], gpus=1))
    with caplog.at_level(logging.DEBUG, logger="ilucid.service.reconciler"):
        began = time.perf_counter()
        decisions = service.reconcile()
        wall = time.perf_counter() - began
    split = service.reconciler.last_split
    assert set(split.seconds) == set(PASS_PARTS)
    assert all(seconds >= 0 for seconds in split.seconds.values())
    assert split.seconds["decide"] > 0 and split.seconds["commit"] > 0
    assert split.total_s <= wall
    lines = [LINE.search(record.getMessage()) for record in caplog.records]
    found = [line for line in lines if line is not None]
    assert len(found) == 1
    assert int(found[0]["decisions"]) == len(decisions) == 3
