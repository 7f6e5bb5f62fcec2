"""What the dashboard and layout tests share: a real ``ilucid serve`` with a few jobs,
Debian's Chromium driven by Playwright, and the in-page layout checks.

Chromium comes from Debian's ``chromium`` package (installed here when missing and
we are root), driven by Playwright without its own browser download.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_helpers import free_port, serve_command
from sqlalchemy.orm import Session

from ilucid.service.auth import create_token
from ilucid.service.db import make_engine, migrate
from ilucid.service.uptime import UptimeRow

CHROMIUM = Path("/usr/bin/chromium")
XSS = "<img src=x onerror=window.__xss=1>"
EVIL_USER = "<img src=x onerror=window.__xss=2>"
EVIL_TENANT = "lab<script>window.__xss=3</script>"
#: The default profile with one level, so the waiting job never overtakes the running
#: ones however long a module runs. The default demotes a job once it has run 1,800
#: GPU-seconds: under CI's load the two 2-GPU jobs passed 15 minutes before the module's
#: last test, the waiting job (none run) outranked them, preempted one and started.
STEADY = """
[profile]
name = "dashboard-steady"
base = "ilucid"
summary = "the default profile, one level (the dashboard tests' queue stays as built)"

[settings]
levels = [1e15]
"""
#: A run of the service before this one, ended 20 to 10 minutes ago: a down period since.
EARLIER_RUN_S = (1200.0, 600.0)


@dataclass
class Served:
    url: str
    data: Path
    token: str
    quick: str = ""  # ended: succeeded
    first: str = ""  # training, 2 GPUs, running
    second: str = ""  # training, 2 GPUs, running; its command carries XSS
    waiting: str = ""  # 2 GPUs, pending, submitted by EVIL_USER
    db_url: str = ""
    evil_token: str = ""
    ended: list[str] = field(default_factory=list)  # every ended job, oldest first
    jobs: dict[str, str] = field(default_factory=dict)  # other fixtures' jobs, by role

    def get(self, path: str, token: str | None = None) -> Any:
        auth = {"Authorization": f"Bearer {token or self.token}"}
        response = httpx.get(self.url + path, headers=auth, timeout=10)
        response.raise_for_status()
        if response.headers["content-type"].startswith("application/json"):
            return response.json()
        return response.text

    def submit(
        self, command: list[str], gpus: int, token: str | None = None, estimate_s: float = 600
    ) -> str:
        response = httpx.post(
            self.url + "/jobs",
            json={"command": command, "gpus": gpus, "estimate_s": estimate_s},
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


def earlier_run(data: Path) -> str:
    """The database, with a run of the service that ended 10 minutes ago."""
    data.mkdir(parents=True)
    url = f"sqlite:///{data.resolve() / 'ilucid.db'}"
    migrate(url)
    engine = make_engine(url)
    with Session(engine) as session:
        now = time.time()
        session.add(UptimeRow(started=now - EARLIER_RUN_S[0], last_seen=now - EARLIER_RUN_S[1]))
        session.commit()
    engine.dispose()
    return url


def _populate(served: Served) -> None:
    """A quick job and a failing one end, two 2-GPU jobs fill the 4 GPUs, a third waits.

    The two run for an hour (the fixture kills them at its end): with a minute, then
    with 15, they ended under CI's load before the module's last page, and the third
    started."""
    engine = make_engine(served.db_url)
    served.evil_token = create_token(engine, EVIL_USER, EVIL_TENANT)
    engine.dispose()
    served.quick = served.submit(["sh", "-c", "echo hello-from-quick; echo done"], 1)
    served.wait("the quick job", lambda: served.job(served.quick)["state"] == "succeeded")
    failing = served.submit(["sh", "-c", "exit 3"], 1, token=served.evil_token)
    served.wait("the failing job", lambda: served.job(failing)["state"] == "failed")
    served.ended = [served.quick, failing]
    # both running jobs ask for the hour they run: with the default 600 s, a module that
    # outlasted 10 minutes under CI's load projected the waiting job "at the next pass"
    served.first = served.submit(["sleep", "3600"], 2, estimate_s=3600)
    # the second reports its progress through its file (its output stays the XSS alone)
    reports = 'echo "$0"; printf \'{"step": 30, "total": 120}\' > "$ILUCID_PROGRESS_FILE"; '
    reports += "sleep 3600"
    served.second = served.submit(["sh", "-c", reports, XSS], 2, estimate_s=3600)

    def launched() -> bool:
        jobs = [served.job(served.first), served.job(served.second)]
        return all(j["state"] == "running" and j["gpu_indices"] for j in jobs)

    served.wait("both training jobs to run", launched)
    # read at most every 10 s a job: the first read may come before the job wrote it
    served.wait("the second job's progress", lambda: bool(served.job(served.second)["progress"]))
    # a week asked: it ranks behind the running jobs however far they overrun (STEADY)
    served.waiting = served.submit(["true"], 2, token=served.evil_token, estimate_s=7 * 86400)
    served.wait(
        "the third job to wait",
        lambda: any(q["id"] == served.waiting and q["reason"] for q in served.get("/queue")),
    )


@contextlib.contextmanager
def serving(root: Path, populate: Callable[[Served], None] | None = None) -> Iterator[Served]:
    """``ilucid serve`` on 4 virtual GPUs, after an earlier run that ended 10 minutes ago,
    with the jobs ``populate`` submits (by default :func:`_populate`'s)."""
    data, port, log = root / "data", free_port(), root / "serve.log"
    db_url = earlier_run(data)
    profile = root / "dashboard-steady.toml"
    profile.write_text(STEADY, encoding="utf-8")
    with log.open("w") as output:  # a file, not a pipe nobody drains while tests run
        process = subprocess.Popen(
            serve_command(data, port, 4, 0.2, "--grace", "2", "--policy", str(profile)),
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    served = Served(f"http://127.0.0.1:{port}", data, "", db_url=db_url)
    try:
        deadline = time.monotonic() + 30
        token_file = data / "admin.token"
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                process.wait()
                raise AssertionError(f"serve did not start: {log.read_text()}")
            try:
                if token_file.exists() and httpx.get(served.url + "/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        served.token = token_file.read_text(encoding="utf-8").strip()
        (populate or _populate)(served)
        yield served
    finally:
        for job_id in (served.waiting, served.first, served.second, *served.jobs.values()):
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


def ensure_chromium() -> str | None:
    """None when Debian's Chromium is there (installed now if need be), else why not."""
    if CHROMIUM.exists():
        return None
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return f"{CHROMIUM} is missing and cannot be installed here (needs root and apt-get)"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends"]
    install += ["-o", "DPkg::Lock::Timeout=600", "chromium"]

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


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """Headless Chromium, or the test skips (no Playwright, no Chromium and not root)."""
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')"
    )
    why_not = ensure_chromium()
    if why_not is not None:
        pytest.skip(why_not)
    playwright = sync_api.sync_playwright().start()
    try:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield browser
        finally:
            browser.close()
    finally:
        playwright.stop()


@dataclass
class Tab:
    page: Any
    errors: list[str]


@contextlib.contextmanager
def new_tab(browser: Any, width: int = 1280, height: int = 900) -> Iterator[Tab]:
    """A fresh context (its own localStorage) of ``width`` px that records page errors."""
    context = browser.new_context(viewport={"width": width, "height": height})
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
    try:
        yield Tab(page, errors)
    finally:
        context.close()


#: In the page: what overflows. Every visible table must fit inside its panel (the
#: nearest section, figure or .table-wrap); with ``scroll`` allowed, a table wider
#: than its panel passes when the panel scrolls it and itself fits the viewport.
#: Every chart's canvas must fit its panel, and the page must not be wider than the
#: viewport.
_OVERFLOWS = """(allowScroll) => {
  const problems = [];
  const view = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth > view + 1) {
    problems.push('the page is ' + document.documentElement.scrollWidth + ' px wide in a '
      + view + ' px viewport');
  }
  const visible = node => node.getClientRects().length > 0
    && getComputedStyle(node).visibility !== 'hidden';
  const name = node => node.id || node.className || node.tagName;
  for (const node of document.querySelectorAll('table:not(.u-legend), canvas')) {
    if (!visible(node)) continue;
    const panel = node.closest('.table-wrap, figure, section') || document.body;
    const box = node.getBoundingClientRect(), outer = panel.getBoundingClientRect();
    if (box.left >= outer.left - 1 && box.right <= outer.right + 1) continue;
    const scrolls = ['auto', 'scroll'].includes(getComputedStyle(panel).overflowX);
    if (allowScroll && node.tagName === 'TABLE' && scrolls && outer.right <= view + 1) continue;
    problems.push(node.tagName.toLowerCase() + ' ' + name(node) + ' spans ' + box.left + '-'
      + box.right + ' px, its panel ' + name(panel) + ' ' + outer.left + '-' + outer.right);
  }
  return problems;
}"""

#: In the page: each uPlot chart's legend entries, with why an entry is not fully
#: visible (outside its figure or the viewport, cut by an ancestor, text cut short).
_LEGENDS = """() => {
  const view = document.documentElement.clientWidth;
  return [...document.querySelectorAll('.uplot')].map(chart => {
    const figure = chart.closest('figure') || chart;
    const outer = figure.getBoundingClientRect();
    return [...chart.querySelectorAll('.u-legend .u-series')].map(row => {
      const label = row.querySelector('.u-label');
      const box = label.getBoundingClientRect();
      const why = [];
      if (box.width < 1 || box.height < 1) why.push('not drawn');
      if (box.left < outer.left - 1 || box.right > outer.right + 1) why.push('outside its chart');
      if (box.left < -1 || box.right > view + 1) why.push('outside the viewport');
      if (label.scrollWidth > label.clientWidth + 1) why.push('text cut short');
      for (let up = label.parentElement; up && up !== figure; up = up.parentElement) {
        if (getComputedStyle(up).overflow === 'visible') continue;
        const clip = up.getBoundingClientRect();
        if (box.left < clip.left - 1 || box.right > clip.right + 1) why.push('clipped');
      }
      return {text: label.textContent, problems: why};
    });
  });
}"""


def overflows(page: Any, allow_scroll: bool) -> list[str]:
    """What overflows its panel or the viewport in ``page`` (empty: nothing)."""
    problems: list[str] = page.evaluate(_OVERFLOWS, allow_scroll)
    return problems


def legends(page: Any) -> list[list[dict[str, Any]]]:
    """Per chart, its legend entries' text and why each is not fully visible."""
    entries: list[list[dict[str, Any]]] = page.evaluate(_LEGENDS)
    return entries
