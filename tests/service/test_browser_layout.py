"""Layout in a real Chromium at 1400 and 420 px: the demo's report and the dashboard.

The report is what ``ilucid demo`` writes without traces: the demo's seven policies
on the synthetic trace, made here by ``ilucid simulate`` (the demo's replay, without
its live part). Every chart's legend must show every policy by its full name,
inside its chart and the viewport (the hand-drawn SVG legend cut "lucid" to "l"
and dropped "ilucid"); hovering a chart must show values; no table may overflow
its panel (the report's table may scroll inside its own frame; the dashboard's
tables must fit, as cards below 640 px). Screenshots of every page and width go
to the test's ``tmp_path``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dashboard_helpers import Served, chromium, legends, new_tab, overflows, serving

#: The policies ``ilucid demo`` compares (ilucid/cli/demo.py), in its order.
DEMO_POLICIES = ["fifo", "sjf", "tiresias", "srtf", "qssf", "lucid", "ilucid"]
WIDTHS = (1400, 420)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as running:
        yield running


@pytest.fixture(scope="module")
def demo_report(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's report on the synthetic trace, written by the CLI as a user runs it."""
    out = tmp_path_factory.mktemp("demo")
    env = {k: v for k, v in os.environ.items() if k != "ILUCID_TRACE_DIR"}
    command = [sys.executable, "-m", "ilucid.cli", "simulate", "--trace", "synthetic"]
    command += ["--policy", ",".join(DEMO_POLICIES), "--limit", "300", "--out", str(out)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return out / "report.html"


@pytest.mark.parametrize("width", WIDTHS)
def test_report_legends_show_every_policy_and_nothing_overflows(
    browser: Any, demo_report: Path, width: int, tmp_path: Path
) -> None:
    with new_tab(browser, width) as tab:
        page = tab.page
        page.goto(demo_report.as_uri())
        page.wait_for_selector("body[data-ready=charts]")
        charts = legends(page)
        assert len(charts) == 5
        for index, entries in enumerate(charts):
            names = [entry["text"] for entry in entries[1:]]  # the first is the x value
            assert names == DEMO_POLICIES, f"chart {index}: {names}"
            cut = [(entry["text"], entry["problems"]) for entry in entries if entry["problems"]]
            assert cut == [], f"chart {index} at {width} px: {cut}"
        assert overflows(page, allow_scroll=True) == []
        # the wall column reads on one line: "0.56 s", not "0.56 / s"
        for wall in page.locator("td[data-col=wall_s]").all():
            assert wall.evaluate("c => c.getClientRects().length") == 1
            box = wall.bounding_box()
            assert box is not None and box["height"] < 30
        # hovering the JCT CDF shows every policy's share of jobs at that time
        over = page.locator("figure[data-chart='0'] .u-over")
        over.hover(position={"x": 0.6 * over.bounding_box()["width"], "y": 40})
        values = page.locator("figure[data-chart='0'] .u-legend .u-value").all_text_contents()
        assert values[0] != "-" and all(v.endswith("%") for v in values[1:]), values
        page.screenshot(path=str(tmp_path / f"report-{width}.png"), full_page=True)
        assert tab.errors == []


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("layout")) as running:
        yield running


@pytest.mark.parametrize("width", WIDTHS)
def test_dashboard_pages_fit_and_their_legends_show(
    browser: Any, served: Served, width: int, tmp_path: Path
) -> None:
    pages = [
        ("overview", f"#/&token={served.token}", "overview"),
        ("history", "#/history", "history"),
        ("job", f"#/job/{served.waiting}", f"job:{served.waiting}"),
        ("running-job", f"#/job/{served.second}", f"job:{served.second}"),
        ("ended-job", f"#/job/{served.quick}", f"job:{served.quick}"),
    ]
    with new_tab(browser, width) as tab:
        page = tab.page
        for name, route, ready in pages:
            page.goto(f"{served.url}/{route}")
            page.wait_for_selector(f"body[data-ready='{ready}']")
            assert overflows(page, allow_scroll=False) == [], f"{name} at {width} px"
            page.screenshot(path=str(tmp_path / f"dashboard-{name}-{width}.png"), full_page=True)
            if name == "running-job":  # its progress, in words
                assert "30 / 120 steps" in (page.text_content("#job-progress") or "")
            if name != "overview":
                continue
            charts = legends(page)
            texts = [[entry["text"] for entry in entries] for entries in charts]
            assert texts == [
                ["time", "busy GPUs", "GPUs in the cluster"],
                ["time", "pending jobs", "running jobs"],
            ]
            cut = [e for entries in charts for e in entries if e["problems"]]
            assert cut == [], f"at {width} px: {cut}"
            # the running table: the second job's own progress, a bar with its steps
            shown = page.locator(
                f"#running-table tr[data-job-id={served.second}] td[data-col=progress]"
            )
            bar = shown.locator("progress")
            assert (bar.get_attribute("value"), bar.get_attribute("max")) == ("30", "120")
            assert shown.text_content().startswith("25% \u00b7 30 / 120 steps")
            assert bar.bounding_box()["width"] > 20  # drawn, not collapsed
            first = page.locator(
                f"#running-table tr[data-job-id={served.first}] td[data-col=progress]"
            )
            assert first.text_content() == "-"  # it never reported
            legend = page.locator("#gpu-legend li").all()
            assert len(legend) == 3
            for item in legend:
                box = item.bounding_box()
                assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width
        assert tab.errors == []
