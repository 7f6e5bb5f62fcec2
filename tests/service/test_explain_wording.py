"""What ``explain`` says, read as a new user reads it (issue 34, first day point 8).

A real service (LocalBackend, 2 virtual GPUs) runs a job without GPUs and a job
with a stated estimate before any model exists. Every sentence its explain answer
holds is free of nested parentheses (``(the model's: no estimate: no finished job
yet (too little history ...))`` read as a puzzle), and the job without GPUs says it
is CPU-only rather than ``x 1 GPU(s)`` and ``Why these GPUs (): ... (spans 0 nodes ())``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from ilucid.backends.local import LocalBackend
from ilucid.backends.local_host import GpuInventory
from ilucid.service.api import build_app
from ilucid.service.auth import create_token
from ilucid.service.db import make_engine, migrate
from ilucid.service.scheduler_service import SchedulerService

#: an opening parenthesis inside another, not yet closed ("GPU(s)" is a plural, not one)
NESTED = re.compile(r"\([^)]*\(")


def nested(text: str) -> bool:
    return NESTED.search(text.replace("(s)", "")) is not None


def texts(value: Any) -> Iterator[str]:
    """Every string in a JSON answer."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from texts(item)


def _wait(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_explanations_have_no_nested_parentheses_and_a_cpu_only_job_says_so(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'ilucid.db'}"
    migrate(url)
    engine = make_engine(url)
    alice = {"Authorization": f"Bearer {create_token(engine, 'alice', 'lab')}"}
    backend = LocalBackend(tmp_path, GpuInventory(2, "virtual", 0, "virtual"))
    service = SchedulerService(engine, backend)
    client = TestClient(build_app(service))
    submit = {"command": ["sleep", "60"]}
    cpu_only = client.post("/jobs", json={**submit, "gpus": 0, "cpus": 1}, headers=alice)
    stated = client.post("/jobs", json={**submit, "gpus": 1, "estimate_s": 600}, headers=alice)
    jobs = [cpu_only.json()["id"], stated.json()["id"]]

    def launched() -> bool:
        service.reconcile()
        shown = [client.get(f"/jobs/{job}", headers=alice).json() for job in jobs]
        return all(s["state"] == "running" and s["gpu_indices"] for s in shown)

    try:
        _wait(launched, "both jobs to launch")
        answers = {job: client.get(f"/jobs/{job}/explain", headers=alice).json() for job in jobs}
        puzzles = [t for a in answers.values() for t in texts(a) if nested(t)]
        assert not puzzles, puzzles
        # the stated estimate is shown beside the model's fallback note, both readable
        estimate = answers[jobs[1]]["estimate"]["text"]
        assert "; the model's: no estimate: no finished job yet; too little history" in estimate
        # the job without GPUs: CPU-only, no GPU count, no empty GPU choice
        said = " ".join(texts(answers[jobs[0]]))
        start = answers[jobs[0]]["decisions"][0]["message"]
        assert "CPU-only" in start, start
        for wrong in ("GPU(s)", "Why these GPUs", "spans 0 nodes", "()"):
            assert wrong not in said, (wrong, said)
        story = [line["reason"] for line in answers[jobs[0]]["story"]]
        assert "launched without GPUs (CPU-only)" in story, story
    finally:
        for job in jobs:
            service.cancel(job)
        _wait(
            lambda: (
                service.reconcile() is not None
                and all(
                    client.get(f"/jobs/{job}", headers=alice).json()["state"] == "cancelled"
                    for job in jobs
                )
            ),
            "both jobs to stop",
            timeout=60.0,  # a stop is observed passes later under CI's load (20 s ran out)
        )
