"""Issue 33: a job's own progress, live. A real ``ilucid serve`` on the local backend runs
a job that prints ``ILUCID_PROGRESS`` lines and one that calls ``ilucid.progress.report``;
``ilucid jobs``, the API and ``ilucid explain`` show how far each is, and once two
reports are in, the rate, the time left and the core's progress-based estimate."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_helpers import Server, free_port, run_ilucid, serve_command, serving

SRC = str(Path(__file__).resolve().parents[2] / "src")
PRINTS = (
    "import time\n"
    "for i in range(1, 241):\n"
    "    print(f'2024-01-01 INFO train: ILUCID_PROGRESS step={i} total=240', flush=True)\n"
    "    time.sleep(0.25)\n"
)
REPORTS = (
    "import sys, time\n"
    f"sys.path.insert(0, {SRC!r})\n"
    "from ilucid.progress import report\n"
    "for i in range(1, 241):\n"
    "    assert report(i * 10, 2400)\n"
    "    time.sleep(0.25)\n"
)


@pytest.fixture
def served(tmp_path: Path, job_scratch: Path) -> Iterator[dict[str, str]]:
    with serving(tmp_path / "data", free_port(), 2, dict(os.environ)) as env:
        yield env


def _api(env: dict[str, str]) -> httpx.Client:
    headers = {"Authorization": f"Bearer {env['ILUCID_TOKEN']}"}
    return httpx.Client(base_url=env["ILUCID_URL"], headers=headers, timeout=10)


def _until(client: httpx.Client, job: str, done: Any, what: str, within_s: float = 45) -> Any:
    deadline = time.monotonic() + within_s
    while True:
        shown = client.get(f"/jobs/{job}").raise_for_status().json()
        if done(shown):
            return shown
        if time.monotonic() > deadline:
            err = client.get(f"/jobs/{job}/logs", params={"stream": "stderr"}).text
            raise AssertionError(f"{job}: no {what} within {within_s} s: {shown}; {err[-500:]}")
        time.sleep(0.3)


def test_progress_shows_in_jobs_the_api_and_explain(served: dict[str, str]) -> None:
    env = served
    printed = run_ilucid("submit", "--gpus", "1", "--", "python3", "-c", PRINTS, env=env)
    reported = run_ilucid("submit", "--gpus", "1", "--", "python3", "-c", REPORTS, env=env)
    assert printed.returncode == 0 and reported.returncode == 0, printed.stderr + reported.stderr
    lines, file = printed.stdout.strip(), reported.stdout.strip()
    with _api(env) as client:
        # two reports of one run, ten seconds apart (the backend reads every 10 s): a rate
        shown = _until(
            client, lines, lambda j: (j["progress"] or {}).get("rate_per_s"), "progress rate"
        )
        progress = shown["progress"]
        assert 0 < progress["step"] <= progress["total"] == 240
        assert progress["fraction"] == pytest.approx(progress["step"] / 240)
        assert 1.0 < progress["rate_per_s"] < 8.0  # 4 steps a second, read 10 s apart
        assert progress["left_s"] is not None and progress["left_s"] > 0
        # the file way: ilucid.progress.report, as the job's own user
        other = _until(client, file, lambda j: j["progress"], "progress from its file")
        assert other["progress"]["total"] == 2400 and other["progress"]["step"] % 10 == 0
        history = client.get(f"/jobs/{lines}/progress").raise_for_status().json()
        steps = [point["step"] for point in history["history"]]
        assert len(steps) >= 2 and steps == sorted(steps)
        assert history["progress"]["total"] == 240 and history["words"]
        assert client.get("/jobs/j999999/progress").status_code == 404

    table = run_ilucid("jobs", env=env).stdout
    row = next(line for line in table.splitlines() if line.startswith(lines))
    assert "/240" in row and "%" in row and "/s" in row and "left" in row, table

    why = run_ilucid("explain", lines, env=env).stdout
    said = next((line for line in why.splitlines() if "progress:" in line), "")
    assert "of 240 steps to go at" in said and "from the job's own progress" in said, why
    assert " steps/s on " in said, why  # the core's words: the rate per GPU type
    for job in (lines, file):
        run_ilucid("cancel", job, env=env)


def test_a_kill_9_does_not_make_up_a_rate(tmp_path: Path, job_scratch: Path) -> None:
    """The service is killed while a job reports 4 steps a second and comes back 8 s
    later: the job ran on meanwhile, and its rate after the restart is still about 4 (a
    restart once told the rebuilt core the last report stored before the kill, and the
    next one measured the steps made while the service was down over a second or so)."""
    data, port = tmp_path / "data", free_port()
    url = f"http://127.0.0.1:{port}"
    server = Server(serve_command(data, port, 1, 0.2), dict(os.environ), url)
    server.start()
    env = {**os.environ, "ILUCID_URL": url}
    env["ILUCID_TOKEN"] = (data / "admin.token").read_text().strip()
    try:
        job = run_ilucid("submit", "--gpus", "1", "--", "python3", "-c", PRINTS, env=env)
        job_id = job.stdout.strip()
        with _api(env) as client:
            _until(client, job_id, lambda j: (j["progress"] or {}).get("rate_per_s"), "a rate")
        server.kill()
        time.sleep(8)
        server.start()
        with _api(env) as client:
            before = client.get(f"/jobs/{job_id}").raise_for_status().json()["progress"]
            after = _until(
                client,
                job_id,
                lambda j: (
                    j["progress"]["step"] > before["step"] + 8 and j["progress"]["rate_per_s"]
                ),
                "a report after the restart",
            )
        first = before["rate_per_s"]  # of the first report the restarted service read
        assert first is None or 1.0 < first < 8.0, before
        assert 1.0 < after["progress"]["rate_per_s"] < 8.0, after["progress"]
        run_ilucid("cancel", job_id, env=env)
    finally:
        server.kill()
