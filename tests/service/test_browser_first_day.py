"""The dashboard as a new user met it on the first day (issue 34, points 5, 7 and 10),
in a real Chromium against a real ``ilucid serve``.

The cluster: 4 virtual GPUs, a run of the service that ended 10 minutes ago (started
20 minutes ago: before it there is nothing to chart), a named 1-GPU job, a job on
half a GPU (``gpu_milli`` 500), a 2-GPU job, and a named 2-GPU job waiting for them.
Screenshots go to ``ILUCID_SCREENSHOTS`` when set, else to the test's ``tmp_path``.
"""

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
from dashboard_helpers import EARLIER_RUN_S, Served, chromium, new_tab, serving
from serve_helpers import run_ilucid

NAMED, HALF, PAIR, WAITING = "named", "half", "pair", "waiting"
NAMES = {NAMED: "resnet-sweep-7", WAITING: "waits-for-two"}


def _submit(served: Served, gpus: int, **fields: Any) -> str:
    response = httpx.post(
        served.url + "/jobs",
        json={"command": ["sleep", "60"], "gpus": gpus, "estimate_s": 600, **fields},
        headers={"Authorization": f"Bearer {served.token}"},
        timeout=10,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _populate(served: Served) -> None:
    jobs = served.jobs
    jobs[NAMED] = _submit(served, 1, name=NAMES[NAMED])
    jobs[HALF] = _submit(served, 1, gpu_milli=500)
    jobs[PAIR] = _submit(served, 2)

    def launched() -> bool:
        return all(served.job(jobs[k])["gpu_indices"] for k in (NAMED, HALF, PAIR))

    served.wait("three jobs to launch", launched)
    jobs[WAITING] = _submit(served, 2, name=NAMES[WAITING])
    served.wait(
        "the named job to wait",
        lambda: any(q["id"] == jobs[WAITING] and q["reason"] for q in served.get("/queue")),
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("first-day"), _populate) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as running:
        yield running


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("ILUCID_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _open(page: Any, served: Served, route: str, ready: str) -> None:
    page.goto(f"{served.url}/{route}")
    page.wait_for_selector(f"body[data-ready='{ready}']")


#: In the page: every word of a visible table cell that the layout broke across lines
#: ("pendin" / "g"), as ``column: word``. A word is a run of characters between spaces
#: and hyphens (a wrap after a hyphen is a wrap at a word's joint, not inside a word).
_BROKEN_WORDS = """(selector) => {
  const broken = [];
  for (const td of document.querySelectorAll(selector)) {
    if (!td.getClientRects().length) continue;
    const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const match of node.data.matchAll(/[^\\s-]+/g)) {
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const lines = new Set([...range.getClientRects()].filter(r => r.width > 0)
          .map(r => Math.round(r.top)));
        if (lines.size > 1) broken.push((td.dataset.col || td.tagName) + ': ' + match[0]);
      }
    }
  }
  return broken;
}"""


def test_no_word_is_broken_in_a_table_cell_at_1400_px(
    browser: Any, served: Served, shots: Path
) -> None:
    jobs = served.jobs
    pages = [
        ("overview", f"#/&token={served.token}", "overview"),
        ("history", "#/history", "history"),
        *((f"job-{role}", f"#/job/{jobs[role]}", f"job:{jobs[role]}") for role in jobs),
    ]
    with new_tab(browser, 1400) as tab:
        page = tab.page
        for name, route, ready in pages:
            _open(page, served, route, ready)
            page.screenshot(path=str(shots / f"first-day-{name}-1400.png"), full_page=True)
            cells = page.locator("td").count()
            assert cells > 5, name
            assert page.evaluate(_BROKEN_WORDS, "table td") == [], name
        assert tab.errors == []


def test_the_story_says_started_not_the_internal_decided(
    browser: Any, served: Served, shots: Path
) -> None:
    job = served.jobs[NAMED]
    story = served.get(f"/jobs/{job}/explain")["story"]
    assert [line["move"] for line in story] == ["new -> pending", "pending -> starting", "started"]
    launch = served.job(job)["transitions"][2]["reason"]  # as stored: "launched on GPUs 0"
    assert story[2]["text"] == f"started [backend: launched]: {launch.removeprefix('launched ')}"
    assert not any("decided" in line["text"] for line in story)
    with new_tab(browser, 1400) as tab:
        page = tab.page
        _open(page, served, f"#/job/{job}&token={served.token}", f"job:{job}")
        shown = page.locator("#job-transitions td[data-col=what]").all_text_contents()
        assert shown == ["new -> pending", "pending -> starting", "started"]
        assert "decided" not in (page.text_content("#job-transitions") or "")
        page.locator("#job-transitions").screenshot(path=str(shots / "first-day-story.png"))
        assert tab.errors == []
    # the CLI tells the same story
    env = {**os.environ, "ILUCID_URL": served.url, "ILUCID_TOKEN": served.token}
    told = run_ilucid("explain", job, env=env)
    assert told.returncode == 0, told.stderr
    assert "started [backend: launched]: on GPUs" in told.stdout and "decided ->" not in told.stdout


def test_the_name_shows_in_the_tables_and_the_job_page(
    browser: Any, served: Served, shots: Path
) -> None:
    named, waiting = served.jobs[NAMED], served.jobs[WAITING]
    with new_tab(browser, 1400) as tab:
        page = tab.page
        _open(page, served, f"#/&token={served.token}", "overview")
        queued = page.locator(f"#queue-table tr[data-job-id={waiting}] td[data-col=id]")
        assert queued.locator(".job-name").text_content() == NAMES[WAITING]
        running = page.locator(f"#running-table tr[data-job-id={named}] td[data-col=id]")
        assert running.locator(".job-name").text_content() == NAMES[NAMED]
        # a job without a name shows its id alone
        unnamed = page.locator(f"#running-table tr[data-job-id={served.jobs[PAIR]}]")
        assert unnamed.locator(".job-name").count() == 0
        _open(page, served, f"#/job/{named}", f"job:{named}")
        assert page.text_content("#job-title [data-testid=job-name]") == NAMES[NAMED]
        assert page.text_content("#job-title") == f"Job {named} {NAMES[NAMED]} running"
        assert NAMES[NAMED] in page.title()
        assert page.text_content("#job-fields tr[data-field=name] td") == NAMES[NAMED]
        page.locator("#job-title").screenshot(path=str(shots / "first-day-title.png"))
        assert tab.errors == []


def test_a_half_gpu_job_fills_half_its_gpu_on_the_map(
    browser: Any, served: Served, shots: Path
) -> None:
    half, named = served.jobs[HALF], served.jobs[NAMED]
    (node,) = served.get("/nodes")
    assert sorted(node["gpu_milli"]) == [[500], [1000], [1000], [1000]], node
    with new_tab(browser, 1400) as tab:
        page = tab.page
        _open(page, served, f"#/&token={served.token}", "overview")
        shared = page.locator(f"#node-map .gpu[data-job={half}]")
        assert shared.count() == 1
        assert shared.get_attribute("data-milli") == "500"
        assert shared.locator(".gpu-share").text_content() == "0.5"
        fill = shared.evaluate("c => getComputedStyle(c).backgroundImage")
        assert "linear-gradient" in fill and "50%" in fill, fill
        whole = page.locator(f"#node-map .gpu[data-job={named}]")
        assert whole.locator(".gpu-share").count() == 0
        assert "50%" not in whole.evaluate("c => getComputedStyle(c).backgroundImage")
        page.locator("#node-map").screenshot(path=str(shots / "first-day-gpu-map.png"))
        assert tab.errors == []


def test_the_charts_are_blank_before_the_service_first_started(
    browser: Any, served: Served, shots: Path
) -> None:
    timeline = served.get("/timeline?minutes=60")
    first_up = timeline["first_up"]
    assert first_up == pytest.approx(time.time() - EARLIER_RUN_S[0], abs=120)
    with new_tab(browser, 1400) as tab:
        page = tab.page
        _open(page, served, f"#/&token={served.token}", "overview")
        for chart in ("chart-busy", "chart-jobs"):
            data = page.evaluate(f"() => charts['{chart}'].plot.data")
            xs, series = data[0], data[1:]
            before = [k for k, x in enumerate(xs) if x < first_up - 0.5]
            after = [k for k, x in enumerate(xs) if x >= first_up]
            assert before and after, (chart, xs, first_up)
            assert xs[0] == pytest.approx(timeline["start"], abs=1)  # the hour is still shown
            for values in series:
                assert [values[k] for k in before] == [None] * len(before), chart
                assert any(values[k] is not None for k in after), chart
        page.locator("#chart-panel").screenshot(path=str(shots / "first-day-charts.png"))
        assert tab.errors == []
