"""The web dashboard, in a real headless Chromium against a real ``ilucid serve``.

The server runs 4 virtual GPUs: a quick job has finished, two 2-GPU training
jobs hold all four GPUs, and a third waits with a reason. Its owner's name and
one job's command carry HTML that would run script if the page ever parsed
them as markup. Chromium comes from Debian's ``chromium`` package (installed
here when missing and we are root), driven by Playwright without its own
browser download. The API additions behind the page (``/queue`` fields,
``/nodes`` GPU holders, ``/timeline``) are tested without a browser too, so
they are covered where Chromium cannot be had.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from ilucid.service import history
from ilucid.service.auth import create_token
from ilucid.service.db import DecisionRow, JobRow, TransitionRow, make_engine, migrate
from ilucid.service.history import gpu_holders, timeline

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_helpers import free_port, serve_command

CHROMIUM = Path("/usr/bin/chromium")
XSS = "<img src=x onerror=window.__xss=1>"
EVIL_USER = "<img src=x onerror=window.__xss=2>"
EVIL_TENANT = "lab<script>window.__xss=3</script>"


# -- the server -----------------------------------------------------------------------
@dataclass
class Served:
    url: str
    data: Path
    token: str
    quick: str = ""
    first: str = ""  # training, 2 GPUs, running
    second: str = ""  # training, 2 GPUs, running; its command carries XSS
    waiting: str = ""  # 2 GPUs, pending, submitted by EVIL_USER
    db_url: str = ""
    evil_token: str = ""

    def get(self, path: str, token: str | None = None) -> Any:
        auth = {"Authorization": f"Bearer {token or self.token}"}
        response = httpx.get(self.url + path, headers=auth, timeout=10)
        response.raise_for_status()
        if response.headers["content-type"].startswith("application/json"):
            return response.json()
        return response.text

    def submit(self, command: list[str], gpus: int, token: str | None = None) -> str:
        response = httpx.post(
            self.url + "/jobs",
            json={"command": command, "gpus": gpus, "estimate_s": 600},
            headers={"Authorization": f"Bearer {token or self.token}"},
            timeout=10,
        )
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    def wait(self, what: str, predicate: Callable[[], bool], timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.1)

    def job(self, job_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self.get(f"/jobs/{job_id}")
        return result


def _kill_leftover_jobs(data: Path) -> None:
    """Jobs outlive a stopped service by design (a restart re-adopts them): end ours."""
    for pid_file in (data / "jobs").glob("*/pid"):
        fields = pid_file.read_text(encoding="utf-8").split()
        if not fields or not fields[0].isdigit():
            continue
        pid = int(fields[0])
        try:  # only the job's own runner (its command line names the job's folder)
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if str(pid_file.parent).encode() in cmdline:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("dashboard")
    data, port, log = root / "data", free_port(), root / "serve.log"
    with log.open("w") as output:  # a file, not a pipe nobody drains while tests run
        process = subprocess.Popen(
            serve_command(data, port, 4, 0.2, "--grace", "2"),
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    served = Served(f"http://127.0.0.1:{port}", data, "")
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                process.wait()
                raise AssertionError(f"serve did not start: {log.read_text()}")
            token_file = data / "admin.token"
            try:
                if token_file.exists() and httpx.get(served.url + "/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        served.token = token_file.read_text(encoding="utf-8").strip()
        served.db_url = f"sqlite:///{data.resolve() / 'ilucid.db'}"
        engine = make_engine(served.db_url)
        served.evil_token = create_token(engine, EVIL_USER, EVIL_TENANT)
        engine.dispose()
        served.quick = served.submit(["sh", "-c", "echo hello-from-quick; echo done"], 1)
        served.wait("the quick job", lambda: served.job(served.quick)["state"] == "succeeded")
        served.first = served.submit(["sleep", "60"], 2)
        served.second = served.submit(["sh", "-c", 'echo "$0"; sleep 60', XSS], 2)

        def launched() -> bool:
            jobs = [served.job(served.first), served.job(served.second)]
            return all(j["state"] == "running" and j["gpu_indices"] for j in jobs)

        served.wait("both training jobs to run", launched)
        served.waiting = served.submit(["true"], 2, token=served.evil_token)
        served.wait(
            "the third job to wait",
            lambda: any(q["id"] == served.waiting and q["reason"] for q in served.get("/queue")),
        )
        yield served
    finally:
        for job_id in (served.waiting, served.first, served.second):
            if job_id and process.poll() is None:
                with contextlib.suppress(httpx.HTTPError):
                    httpx.delete(
                        f"{served.url}/jobs/{job_id}",
                        headers={"Authorization": f"Bearer {served.token}"},
                        timeout=10,
                    )
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        _kill_leftover_jobs(data)


# -- API additions, no browser ------------------------------------------------------------
def test_queue_and_nodes_fields_on_a_live_server(served: Served) -> None:
    queue = served.get("/queue")
    [waiting] = [q for q in queue if q["id"] == served.waiting]
    assert waiting["position"] == 1 and waiting["expected_start"] is not None
    assert (waiting["user"], waiting["tenant"]) == (EVIL_USER, EVIL_TENANT)
    assert (waiting["class"], waiting["gpus"]) == ("training", 2)
    assert waiting["reason"] == served.get(f"/jobs/{served.waiting}/explain")["why"]
    assert waiting["reason"].startswith("pending (position 1")
    assert all("command" not in q for q in queue)
    # every token sees the whole queue (positions), the owner's job with its reason
    mine = served.get("/queue", token=served.evil_token)
    assert [(q["id"], q["reason"]) for q in mine] == [(q["id"], q["reason"]) for q in queue]

    [node] = served.get("/nodes")
    assert node["gpus"] == 4 and node["free_gpus"] == 0 and len(node["gpu_jobs"]) == 4
    for job_id in (served.first, served.second):
        indices = [int(g) for g in served.job(job_id)["gpu_indices"].split(",")]
        assert [i for i, j in enumerate(node["gpu_jobs"]) if j == job_id] == sorted(indices)


def test_timeline_on_a_live_server(served: Served) -> None:
    hour = served.get("/timeline")  # 60 minutes by default
    assert set(hour) >= {"times", "busy_gpus", "pending", "running", "start", "now", "total_gpus"}
    assert hour["total_gpus"] == 4 and hour["now"] - hour["start"] == pytest.approx(3600)
    # a short window has fine slices: each change of the last seconds is a point of its own
    line = served.get("/timeline?minutes=2")
    lengths = {len(line[k]) for k in ("times", "busy_gpus", "pending", "running")}
    assert len(lengths) == 1 and lengths.pop() >= 5
    assert line["times"] == sorted(line["times"]) and line["times"][0] == round(line["start"], 3)
    # now: two 2-GPU jobs run and one waits; earlier, the quick job ran alone
    for series in (hour, line):
        assert (series["busy_gpus"][-1], series["running"][-1], series["pending"][-1]) == (4, 2, 1)
        assert series["busy_gpus"][0] == series["pending"][0] == 0  # the server is younger
    assert 1 in line["busy_gpus"] and max(line["busy_gpus"]) == 4
    bad = httpx.get(
        served.url + "/timeline?minutes=0", headers={"Authorization": f"Bearer {served.token}"}
    )
    assert bad.status_code == 422
    assert httpx.get(served.url + "/timeline").status_code == 401


def test_dashboard_page_is_self_contained_and_locked_down(served: Served) -> None:
    response = httpx.get(served.url + "/")
    assert response.status_code == 200
    csp = response.headers["content-security-policy"]
    assert "script-src 'sha256-" in csp and "connect-src 'self'" in csp
    assert "http://" not in response.text.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in response.text


def _add_job(session: Session, job_id: str, gpus: int, end: float | None = None) -> None:
    session.add(
        JobRow(
            id=job_id,
            user="u",
            tenant="t",
            job_class="training",
            gpus=gpus,
            command="[]",
            state="x",
            submit_time=0.0,
            end_time=end,
        )
    )


def test_timeline_replays_transitions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'timeline.db'}"
    migrate(url)
    engine = make_engine(url)
    moves = [  # job, gpus, time, from, to
        ("old", 3, 5.0, "", "pending"),
        ("old", 3, 8.0, "pending", "cancelled"),  # ended before the window: ignored
        ("e", 1, 1.0, "", "pending"),
        ("e", 1, 2.0, "pending", "running"),  # running when the window opens
        ("a", 2, 10.0, "", "pending"),
        ("d", 4, 12.0, "", "pending"),
        ("b", 1, 15.0, "", "pending"),
        ("a", 2, 20.0, "pending", "running"),
        ("a", 2, 20.5, "running", "running"),  # a launch note
        ("b", 1, 30.0, "pending", "running"),
        ("b", 1, 40.0, "running", "pending"),  # preempted
        ("b", 1, 45.0, "pending", "running"),
        ("a", 2, 50.0, "running", "succeeded"),
    ]
    with Session(engine) as session:
        for job_id, gpus, end in (("old", 3, 8.0), ("e", 1, None), ("a", 2, 50.0)):
            _add_job(session, job_id, gpus, end)
        for job_id, gpus in (("d", 4), ("b", 1)):
            _add_job(session, job_id, gpus)
        session.flush()
        for job_id, _, when, before, after in moves:
            session.add(TransitionRow(job_id=job_id, time=when, from_state=before, to_state=after))
        session.commit()

    line = timeline(engine, 9.0, 100.0)
    assert line["times"] == [9.0, 10.0, 12.0, 15.0, 20.0, 30.0, 40.0, 45.0, 50.0, 100.0]
    assert line["busy_gpus"] == [1, 1, 1, 1, 3, 4, 3, 4, 2, 2]
    assert line["running"] == [1, 1, 1, 1, 2, 3, 2, 3, 2, 2]
    assert line["pending"] == [0, 1, 2, 3, 2, 1, 2, 1, 1, 1]
    # a window that ends earlier sees only what happened until then
    assert timeline(engine, 9.0, 25.0)["busy_gpus"] == [1, 1, 1, 1, 3, 3]
    # too many changes for the point budget: each slice keeps its last value
    monkeypatch.setattr(history, "TIMELINE_POINTS", 2)  # slices [9, 54.5) and [54.5, 100]
    merged = timeline(engine, 9.0, 100.0)
    assert merged["times"] == [9.0, 10.0, 100.0]
    assert merged["busy_gpus"] == [1, 2, 2] and merged["pending"] == [0, 1, 1]


def test_gpu_holders_map_backend_indices_to_nodes() -> None:
    # one node: the backend's indices are the node's
    assert gpu_holders([4], [("j1", "2,3"), ("j2", "-"), ("j3", "")]) == [[None, None, "j1", "j1"]]
    # several nodes: host-wide indices in node order (node 0 holds 0-2, node 1 holds 3)
    assert gpu_holders([3, 1], [("j1", "0,1"), ("j2", "3"), ("j9", "7")]) == [
        ["j1", "j1", None],
        ["j2"],
    ]


# -- in the browser -----------------------------------------------------------------------
def _ensure_chromium() -> str | None:
    """None when Debian's Chromium is there (installed now if need be), else why not."""
    if CHROMIUM.exists():
        return None
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return f"{CHROMIUM} is missing and cannot be installed here (needs root and apt-get)"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [
        "apt-get",
        "install",
        "-y",
        "-q",
        "--no-install-recommends",
        "-o",
        "DPkg::Lock::Timeout=600",
        "chromium",
    ]

    def run(command: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=1800, check=False
        )

    result = run(install)
    if result.returncode != 0:  # stale package lists: refresh them once
        run(["apt-get", "update", "-q"])
        result = run(install)
    if CHROMIUM.exists():
        return None
    if result.returncode == 0:
        return f"apt-get installed chromium, but {CHROMIUM} is not there"
    return f"apt-get install chromium failed: {(result.stderr or result.stdout)[-400:]}"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')"
    )
    why_not = _ensure_chromium()
    if why_not is not None:
        pytest.skip(why_not)
    playwright = sync_api.sync_playwright().start()
    try:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield chromium
        finally:
            chromium.close()
    finally:
        playwright.stop()


@dataclass
class Tab:
    page: Any
    errors: list[str]


@pytest.fixture
def tab(browser: Any) -> Iterator[Tab]:
    """A fresh browser context (its own localStorage) that records every page error."""
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(10_000)
    errors: list[str] = []
    page.on(
        "console",
        lambda message: (
            errors.append(f"console: {message.text}") if message.type == "error" else None
        ),
    )
    page.on("pageerror", lambda error: errors.append(f"pageerror: {error}"))
    yield Tab(page, errors)
    context.close()


def _texts(page: Any, selector: str) -> list[str]:
    return [text.strip() for text in page.locator(selector).all_text_contents()]


def test_overview_shows_queue_running_jobs_node_map_and_charts(served: Served, tab: Tab) -> None:
    page = tab.page
    page.goto(f"{served.url}/#token={served.token}")
    page.wait_for_selector("body[data-ready=overview]")
    # the token left the address bar for localStorage
    assert "token" not in page.url and page.url.endswith("#/")
    assert page.evaluate("localStorage.getItem('ilucid.token')") == served.token

    assert page.text_content("#sum-busy") == "4" and page.text_content("#sum-total") == "4"
    assert page.text_content("#sum-running") == "2" and page.text_content("#sum-pending") == "1"

    row = page.locator(f"#queue-table tr[data-job-id={served.waiting}]")
    reason = row.locator("td[data-col=reason]").text_content()
    assert reason and reason == served.get(f"/jobs/{served.waiting}/explain")["why"]
    assert row.locator("td[data-col=user]").text_content() == EVIL_USER  # shown, not run
    assert row.locator("td[data-col=tenant]").text_content() == EVIL_TENANT
    assert row.locator("td[data-col=position]").text_content() == "1"
    assert row.locator("td[data-col=gpus]").text_content() == "2"

    for job_id in (served.first, served.second):
        shown = page.locator(f"#running-table tr[data-job-id={job_id}] td[data-col=gpu_indices]")
        assert shown.text_content() == served.job(job_id)["gpu_indices"]

    cells = page.locator("#node-map .gpu")
    assert cells.count() == 4
    held = [cells.nth(i).get_attribute("data-job") for i in range(4)]
    assert sorted(held) == sorted([served.first] * 2 + [served.second] * 2)
    assert sorted(_texts(page, "#node-map .gpu .gpu-job")) == sorted(held)

    for chart in ("#chart-busy", "#chart-pending"):
        line = page.locator(f"{chart} svg polyline.series")
        assert line.count() == 1
        points = (line.get_attribute("points") or "").split()
        assert len(points) >= 4 and all("," in p for p in points)
    assert page.get_attribute("#chart-busy polyline.series", "data-last") == "4"

    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.locator("img").count() == 0
    assert tab.errors == []


def test_job_page_shows_transitions_decisions_why_and_output(served: Served, tab: Tab) -> None:
    page = tab.page
    page.goto(f"{served.url}/#token={served.token}")
    page.wait_for_selector("body[data-ready=overview]")
    page.click(f"#running-table a.job-link[data-job-id={served.first}]")
    page.wait_for_selector(f"body[data-ready='job:{served.first}']")
    assert page.url.endswith(f"#/job/{served.first}")

    engine = make_engine(served.db_url)
    with Session(engine) as session:
        stored = session.scalars(
            select(DecisionRow.message)
            .where(DecisionRow.job_id == served.first)
            .order_by(DecisionRow.id)
        ).all()
        moves = session.scalars(
            select(TransitionRow.reason)
            .where(TransitionRow.job_id == served.first)
            .order_by(TransitionRow.id)
        ).all()
    engine.dispose()
    assert stored and _texts(page, "#job-decisions td[data-col=message]") == list(stored)
    assert _texts(page, "#job-transitions td[data-col=reason]") == list(moves)
    assert _texts(page, "#job-transitions td[data-col=to]") == ["pending", "running", "running"]
    assert page.text_content("#job-why") == served.get(f"/jobs/{served.first}/explain")["why"]
    assert page.text_content("#job-fields tr[data-field=command] td") == "sleep 60"
    assert page.text_content("[data-testid=job-state]") == "running"

    # a finished job: its output; the XSS job: its command and output shown as text
    page.goto(f"{served.url}/#/job/{served.quick}")
    page.wait_for_selector(f"body[data-ready='job:{served.quick}']")
    assert page.text_content("#job-log") == "hello-from-quick\ndone"
    assert page.text_content("[data-testid=job-state]") == "succeeded"
    page.goto(f"{served.url}/#/job/{served.second}")
    page.wait_for_selector(f"body[data-ready='job:{served.second}']")
    command = page.text_content("#job-fields tr[data-field=command] td") or ""
    assert XSS in command and page.text_content("#job-log") == XSS
    page.click("#job-back")
    page.wait_for_selector("body[data-ready=overview]")

    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.locator("img").count() == 0
    assert tab.errors == []


def test_token_from_the_input_box(served: Served, tab: Tab) -> None:
    page = tab.page
    page.goto(served.url + "/")
    page.wait_for_selector("#status.error")
    assert "token" in (page.text_content("#status") or "")
    page.fill("#token-input", served.token)
    page.click("#token-save")
    page.wait_for_selector("body[data-ready=overview]")
    assert page.locator(f"#queue-table tr[data-job-id={served.waiting}]").count() == 1
    assert tab.errors == []
