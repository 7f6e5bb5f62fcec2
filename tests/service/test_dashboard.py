"""The web dashboard, in a real headless Chromium against a real ``ilucid serve``.

The server runs 4 virtual GPUs: a quick job has finished and another failed, two
2-GPU training jobs hold all four GPUs, and a third waits with a reason. Its
owner's name and one job's command carry HTML that would run script if the page
ever parsed them as markup. An earlier run of the service ended 10 minutes
before this one started: the charts show that period as a gap. Chromium comes
from Debian's ``chromium`` package (``dashboard_helpers``). The API additions
behind the page (``/queue`` fields, ``/nodes`` GPU holders, ``/timeline``) are
tested without a browser too, so they are covered where Chromium cannot be had;
the page's layout at 1400 and 420 px is in ``test_browser_layout.py``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import httpx
import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session

import ilucid
from ilucid.estimators.duration import Contribution
from ilucid.estimators.live import DurationEstimate, format_estimate
from ilucid.service import history
from ilucid.service.db import DecisionRow, JobRow, TransitionRow, make_engine, migrate
from ilucid.service.history import gpu_holders, timeline

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dashboard_helpers import (
    EARLIER_RUN_S,
    EVIL_TENANT,
    EVIL_USER,
    XSS,
    Served,
    Tab,
    chromium,
    new_tab,
    serving,
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("dashboard")) as running:
        yield running


# -- API additions, no browser ------------------------------------------------------------
def test_queue_and_nodes_fields_on_a_live_server(served: Served) -> None:
    queue = served.get("/queue")
    [waiting] = [q for q in queue if q["id"] == served.waiting]
    assert waiting["position"] == 1 and waiting["expected_start"] is not None
    assert (waiting["user"], waiting["tenant"]) == (EVIL_USER, EVIL_TENANT)
    assert (waiting["class"], waiting["gpus"]) == ("training", 2)
    assert waiting["reason"] == served.get(f"/jobs/{served.waiting}/explain")["why"]
    assert waiting["reason"].startswith("pending (position 1")
    # a calibrated range around the median, and explain says what it assumes
    assert waiting["expected_start_p10"] <= waiting["expected_start"]
    assert waiting["expected_start"] <= waiting["expected_start_p90"]
    outlook = served.get(f"/jobs/{served.waiting}/explain")["expected_start"]
    assert outlook["expected_start"] == pytest.approx(waiting["expected_start"], abs=5)
    # the running jobs' estimates blend the 3,600 s stated with the live model's median of
    # the quick jobs, so both may be expected to end at the same moment
    awaited = re.search(
        r", if the (running job it waits for ends|2 running jobs it waits for end) when"
        r" estimated \((j\d+) in ",
        outlook["assumes"],
    )
    assert awaited and awaited[2] in (served.first, served.second), outlook["assumes"]
    assert outlook["assumes"].endswith(
        "; an inference burst or a job that outranks it arriving would delay it"
        " (range from no past predictions yet: a 3x margin either way)"
    )
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
    # the earlier run ended 10 minutes ago; this one started just before the quick job
    [(stopped, restarted)] = hour["down"]
    quick = served.job(served.quick)
    assert stopped == pytest.approx(hour["now"] - EARLIER_RUN_S[1], abs=120)
    assert stopped < restarted <= quick["submit_time"] and restarted > quick["submit_time"] - 60
    # a window that opens while the service was down sees the rest of that period
    assert line["down"] == [[round(line["start"], 3), restarted]]
    bad = httpx.get(
        served.url + "/timeline?minutes=0", headers={"Authorization": f"Bearer {served.token}"}
    )
    assert bad.status_code == 422
    assert httpx.get(served.url + "/timeline").status_code == 401


def test_dashboard_page_is_self_contained_and_locked_down(served: Served) -> None:
    response = httpx.get(served.url + "/")
    assert response.status_code == 200
    csp = response.headers["content-security-policy"]
    assert "script-src 'self';" in csp and "style-src 'self';" in csp
    assert "connect-src 'self'" in csp and "unsafe" not in csp
    page = response.text
    assert "http://" not in page and "https://" not in page
    # no inline script or style: every script and stylesheet is one of the service's files
    assert "<script>" not in page and "<style" not in page and " style=" not in page
    sources = re.findall(r'<script defer src="([^"]+)"></script>', page)
    sheets = re.findall(r'<link rel="stylesheet" href="([^"]+)">', page)
    assert page.count("<script") == len(sources) == 8 and len(sheets) == 2
    vendored = Path(ilucid.__file__).parent / "vendor" / "uplot"
    for url in sources + sheets:
        assert url.startswith("/static/"), url
        served_file = httpx.get(served.url + url.replace("&amp;", "&"))
        assert served_file.status_code == 200, url
        kind = "javascript" if url.split("?")[0].endswith(".js") else "css"
        assert kind in served_file.headers["content-type"]
        assert served_file.headers["x-content-type-options"] == "nosniff"
        if "/uplot/" in url:  # the vendored library, byte for byte
            name = url.split("/")[-1].split("?")[0]
            assert served_file.content == (vendored / name).read_bytes()
    assert httpx.get(served.url + "/static/../db.py").status_code == 404


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
    # jobs sharing one GPU (gpu_milli) are each named on it
    assert gpu_holders([2], [("j1", "0"), ("j2", "0")]) == [["j1 + j2", None]]


# -- in the browser -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as running:
        yield running


@pytest.fixture
def tab(browser: Any) -> Iterator[Tab]:
    """A fresh browser context (its own localStorage) that records every page error."""
    with new_tab(browser) as opened:
        yield opened


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
    # its expected start as a median and an 80% interval
    assert re.fullmatch(
        r"in \d+ (s|min) \(likely (within )?[\d.]+[^)]*\)",
        row.locator("td[data-col=expected_start]").text_content() or "",
    )

    for job_id in (served.first, served.second):
        shown = page.locator(f"#running-table tr[data-job-id={job_id}] td[data-col=gpu_indices]")
        assert shown.text_content() == served.job(job_id)["gpu_indices"]

    cells = page.locator("#node-map .gpu")
    assert cells.count() == 4
    held = [cells.nth(i).get_attribute("data-job") for i in range(4)]
    assert sorted(held) == sorted([served.first] * 2 + [served.second] * 2)
    assert sorted(_texts(page, "#node-map .gpu .gpu-job")) == sorted(held)

    legend = _texts(page, "#gpu-legend li")
    assert len(legend) == 3 and legend[0] == "free GPU" and "held by a running job" in legend[1]
    assert "a share of a GPU" in legend[2]

    for chart in ("#chart-busy", "#chart-jobs"):
        assert page.locator(f"{chart} .uplot canvas").count() == 1
        assert int(page.get_attribute(chart, "data-points") or 0) >= 4
    assert page.get_attribute("#chart-busy", "data-last") == "4"
    assert _texts(page, "#chart-busy .u-legend .u-series .u-label") == [
        "time",
        "busy GPUs",
        "GPUs in the cluster",
    ]
    # the earlier run's end until this one's start is a gap, and said in words
    assert int(page.get_attribute("#chart-busy", "data-gaps") or 0) >= 1
    assert "The service was down" in (page.text_content("#down-note") or "")
    # hovering shows the values under the cursor
    over = page.locator("#chart-busy .u-over")
    over.scroll_into_view_if_needed()
    box = over.bounding_box()
    over.hover(position={"x": box["width"] - 3, "y": box["height"] / 2})
    page.wait_for_function(
        "() => document.querySelectorAll('#chart-busy .u-legend .u-value')[1].textContent !== '-'"
    )
    values = _texts(page, "#chart-busy .u-legend .u-series .u-value")
    at = page.evaluate(
        "(() => { const u = charts['chart-busy'].plot;"
        " return [u.data[1][u.cursor.idx], u.data[2][u.cursor.idx]]; })()"
    )
    assert values[1:] == [str(v) for v in at] and at[1] == 4 and 0 <= at[0] <= 4

    # the time range: 15 minutes, kept for the next visit
    assert page.text_content("#caption-busy") == "Busy GPUs, last hour"
    page.select_option("#range", "15")
    page.wait_for_function(
        "() => document.body.dataset.ready === 'overview'"
        " && document.getElementById('caption-busy').textContent.endsWith('15 min')"
    )
    assert page.text_content("#caption-busy") == "Busy GPUs, last 15 min"
    assert page.evaluate("localStorage.getItem('ilucid.range')") == "15"

    # no quota configured: the panel says so, and shows what each tenant holds
    assert "No tenant quota is configured" in (page.text_content("#quota-note") or "")
    admin = page.locator("#quota-table tr[data-tenant=admin]")
    assert admin.locator("td[data-col=holding]").text_content() == "4"
    assert admin.locator("td[data-col=borrowed]").text_content() == "-"

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
    # the story as a user reads it: the launch is "started" "on GPUs ..." (its stored
    # reason is "launched on GPUs ..."), never the lifecycle's "decided -> running"
    assert _texts(page, "#job-transitions td[data-col=reason]") == [
        *moves[:2],
        moves[2].removeprefix("launched "),
    ]
    assert moves[2].startswith("launched on GPUs ")
    assert _texts(page, "#job-transitions td[data-col=what]") == [
        "new -> pending",
        "pending -> starting",
        "started",
    ]
    assert "decided" not in (page.text_content("#job-transitions") or "")

    # the sentence says for how long it has run ("(8 s)"): read twice, a second apart
    def ageless(text: str | None) -> str:
        return re.sub(r" \(\d+ [a-z]+( \d+ [a-z]+)?\)", "", text or "")

    shown, served_why = page.text_content("#job-why"), served.get(f"/jobs/{served.first}/explain")
    assert ageless(shown) == ageless(served_why["why"]) and shown
    assert page.text_content("#job-fields tr[data-field=command] td") == "sleep 3600"
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


def test_history_pages_and_filters_ended_jobs(served: Served, tab: Tab) -> None:
    page = tab.page
    page.goto(f"{served.url}/#/history&token={served.token}")
    page.wait_for_selector("body[data-ready=history]")
    assert page.url.endswith("#/history")
    # newest end first: the failing job ended after the quick one
    assert _texts(page, "#history-table td[data-col=id]") == served.ended[::-1]
    assert page.text_content("#history-page") == "page 1 of 1 \u00b7 2 ended jobs"
    assert page.is_disabled("#history-prev") and page.is_disabled("#history-next")
    # pages follow the API's cursor: the page after the newest job holds the other one
    after = f"#/history?after={served.ended[1]}"
    page.evaluate("h => { delete document.body.dataset.ready; location.hash = h; }", after)
    page.wait_for_selector("body[data-ready=history]")
    assert _texts(page, "#history-table td[data-col=id]") == [served.ended[0]]
    assert page.text_content("#history-page") == "page 2 of 2 \u00b7 2 ended jobs"
    page.click("#history-prev")
    page.wait_for_function(
        "() => document.body.dataset.ready === 'history' && location.hash === '#/history'"
    )
    assert _texts(page, "#history-table td[data-col=id]") == served.ended[::-1]
    quick = page.locator(f"#history-table tr[data-job-id={served.quick}]")
    assert quick.locator("td[data-col=state]").text_content() == "succeeded"
    assert quick.locator("td[data-col=exit_code]").text_content() == "0"

    def filtered(state: str, user: str, expect: str) -> list[str]:
        page.select_option("#history-state", state)
        page.fill("#history-user", user)
        page.click("#history-form button[type=submit]")
        page.wait_for_function(
            "want => document.body.dataset.ready === 'history' && location.hash === want",
            arg=expect,
        )
        return _texts(page, "#history-table td[data-col=id]")

    failing = served.ended[1]
    assert filtered("failed", "", "#/history?state=failed") == [failing]
    assert page.text_content(
        f"#history-table tr[data-job-id={failing}] td[data-col=exit_code]"
    ) == ("3")
    by_user = filtered("", EVIL_USER, "#/history?user=" + quote_plus(EVIL_USER))
    assert by_user == [failing]
    assert filtered("cancelled", "", "#/history?state=cancelled") == []
    assert page.is_visible("#history-empty")
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert tab.errors == []


def test_a_history_filter_is_not_ready_until_its_own_table_is_shown(
    served: Served, tab: Tab
) -> None:
    # the browser fires hashchange a task after the hash is set: until then the old
    # table stood under the new hash, still marked ready (a test read it so in CI)
    page = tab.page
    page.goto(f"{served.url}/#/history&token={served.token}")
    page.wait_for_selector("body[data-ready=history]")
    page.select_option("#history-state", "failed")
    at_submit = page.evaluate(
        """() => {
          document.querySelector('#history-form button[type=submit]').click();
          return [location.hash, document.body.dataset.ready || null];
        }"""
    )
    assert at_submit == ["#/history?state=failed", None]
    page.wait_for_function("() => document.body.dataset.ready === 'history'")
    assert _texts(page, "#history-table td[data-col=id]") == [served.ended[1]]
    # the same filters again: no hashchange comes, so the page reloads the table itself
    page.click("#history-form button[type=submit]")
    page.wait_for_selector("body[data-ready=history]")
    assert _texts(page, "#history-table td[data-col=id]") == [served.ended[1]]
    assert tab.errors == []


def test_job_page_shows_expected_start_and_the_estimate_terms(served: Served, tab: Tab) -> None:
    # the quick job's estimate as the live duration model explains one (two terms)
    terms = (Contribution("num_gpus", 0.4, "num_gpus=1"), Contribution("user", -0.2, "user=admin"))
    note = format_estimate(DurationEstimate(1234.0, "v2", 6.9, terms, ""))
    engine = make_engine(served.db_url)
    with Session(engine) as session:
        session.execute(update(JobRow).where(JobRow.id == served.quick).values(estimate_note=note))
        session.commit()
    engine.dispose()
    page = tab.page
    page.goto(f"{served.url}/#/job/{served.quick}&token={served.token}")
    page.wait_for_selector(f"body[data-ready='job:{served.quick}']")
    assert note in (page.text_content("#job-estimate") or "")
    assert _texts(page, "#job-terms td[data-col=term]") == [
        "baseline of model v2 (intercept)",
        "num_gpus=1",
        "user=admin",
    ]
    assert _texts(page, "#job-terms td[data-col=value]") == ["6.90", "+0.40", "-0.20"]
    assert page.text_content("#job-expected") == "started " + page.evaluate(
        "t => stamp(t)", served.job(served.quick)["first_start"]
    )

    page.goto(f"{served.url}/#/job/{served.waiting}")
    page.wait_for_selector(f"body[data-ready='job:{served.waiting}']")
    outlook = served.get(f"/views/jobs/{served.waiting}")
    [queued] = [q for q in served.get("/queue") if q["id"] == served.waiting]
    assert outlook["position"] == 1 and outlook["expected_start"] is not None
    assert outlook["expected_start"] == pytest.approx(queued["expected_start"], abs=5)
    expected = page.text_content("#job-expected") or ""
    assert expected.endswith("(position 1)") and page.is_hidden("#job-terms")
    assert "(likely " in expected
    assumes = page.text_content("#job-assumes") or ""
    assert assumes.startswith("This assumes: in ") and "it waits for end" in assumes
    assert tab.errors == []
