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

import contextlib
import itertools
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from colour_difference import DEUTERANOPIA, PROTANOPIA, ciede2000, lab
from dashboard_helpers import Served, Tab, chromium, legends, new_tab, overflows, serving

#: The policies ``ilucid demo`` compares (ilucid/cli/demo.py), in its order.
DEMO_POLICIES = ["fifo", "sjf", "tiresias", "srtf", "qssf", "lucid", "ilucid"]
DEFAULT = "ilucid"  # the default profile
#: Least space between two axis labels: closer, "10 s" and "1 min" read as one label
#: ("10 s 1 min", the report at 420 px before this gap was kept)
LABEL_GAP_PX = 10
WIDTHS = (1400, 420)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as running:
        yield running


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where screenshots go: ``ILUCID_SCREENSHOTS`` when set, else the test's tmp_path."""
    folder = Path(os.environ.get("ILUCID_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


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
        # the two CDFs overlaid, then the three charts over time as small multiples: a
        # chart per policy, the default profile (ilucid) behind each other one; last,
        # expected starts against actual ones (a CDF of their ratio), overlaid
        multiples = [[f"{DEFAULT} (default)", p] if p != DEFAULT else [p] for p in DEMO_POLICIES]
        assert len(charts) == 3 + 3 * len(DEMO_POLICIES)
        for index, entries in enumerate(charts):
            names = [entry["text"] for entry in entries[1:]]  # the first is the x value
            overlaid = index < 2 or index == len(charts) - 1
            wanted = DEMO_POLICIES if overlaid else multiples[(index - 2) % len(DEMO_POLICIES)]
            assert names == wanted, f"chart {index}: {names}"
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


#: Before any page script: every uPlot the page makes is kept in ``window.__uplots``
#: (a Proxy around the constructor, so the report's own code is run unchanged).
_TRACK_UPLOTS = """(() => {
  const made = window.__uplots = [];
  let real;
  Object.defineProperty(window, 'uPlot', {configurable: true, get: () => real,
    set: value => { real = new Proxy(value, {construct(target, args) {
      const plot = Reflect.construct(target, args);
      made.push(plot);
      return plot;
    }}); }});
})()"""

#: In the page: each drawn chart's x-axis labels as boxes (CSS px along the axis),
#: measured in the axis's own font: ``{chart, policy, boxes: [{text, left, right}]}``.
_AXIS_LABELS = """() => window.__uplots.filter(u => u.root.isConnected).map(u => {
  const axis = u.axes[0];
  const ratio = window.devicePixelRatio || 1;
  const ctx = document.createElement('canvas').getContext('2d');
  ctx.font = axis.font[0];
  const boxes = [];
  (axis._splits || []).forEach((v, k) => {
    const text = axis._values[k];
    if (text === null || text === undefined || text === '') return;
    const half = ctx.measureText(String(text)).width / ratio / 2;
    const x = u.valToPos(v, 'x');
    boxes.push({text: String(text), left: x - half, right: x + half});
  });
  const multiple = u.root.closest('.multiple');
  return {chart: u.root.closest('figure').dataset.chart, boxes: boxes,
    policy: multiple ? multiple.dataset.policy : null};
})"""


@contextlib.contextmanager
def _report_tab(browser: Any, demo_report: Path, width: int) -> Iterator[Tab]:
    """The demo's report at ``width`` px, every uPlot it made in ``window.__uplots``."""
    with new_tab(browser, width) as tab:
        tab.page.add_init_script(_TRACK_UPLOTS)
        tab.page.goto(demo_report.as_uri())
        tab.page.wait_for_selector("body[data-ready=charts]")
        yield tab


def _rgb(css: str) -> tuple[int, int, int]:
    match = re.fullmatch(r"rgba?\((\d+), (\d+), (\d+)(, [\d.]+)?\)", css)
    assert match is not None, css
    return int(match[1]), int(match[2]), int(match[3])


def test_report_colours_stay_apart_for_every_reader_and_the_default_stands_out(
    browser: Any, demo_report: Path, shots: Path
) -> None:
    """CIEDE2000 between every two policies' lines: at least 20 (sjf's red and ilucid's
    pink were 15), and 10 as a deuteranope or a protanope sees them (0.7 before); the
    default profile's line is the thickest and at least 30 from every other."""
    with _report_tab(browser, demo_report, 1400) as opened:
        page = opened.page
        markers = page.locator("figure[data-chart='0'] .u-legend .u-series .u-marker").all()
        colours = [_rgb(m.evaluate("m => getComputedStyle(m).borderColor")) for m in markers[1:]]
        widths = page.evaluate(
            "() => window.__uplots[0].series.slice(1).map(s => [s.label, s.width])"
        )
        assert [name for name, _ in widths] == DEMO_POLICIES
        by_policy = dict(zip(DEMO_POLICIES, colours, strict=True))
        for seen_with, floor in ((None, 20.0), (DEUTERANOPIA, 10.0), (PROTANOPIA, 10.0)):
            for (a, one), (b, two) in itertools.combinations(by_policy.items(), 2):
                apart = ciede2000(lab(one, seen_with), lab(two, seen_with))
                assert apart >= floor, (a, b, one, two, round(apart, 1), seen_with)
        for name, colour in by_policy.items():
            if name != DEFAULT:
                assert ciede2000(lab(colour), lab(by_policy[DEFAULT])) >= 30, name
        default_width = dict(widths)[DEFAULT]
        assert all(w < default_width for name, w in widths if name != DEFAULT), widths
        page.locator("figure[data-chart='0']").screenshot(path=str(shots / "report-colours.png"))
        assert opened.errors == []


@pytest.mark.parametrize("width", WIDTHS)
def test_report_charts_over_time_are_small_multiples_with_a_switch(
    browser: Any, demo_report: Path, width: int, shots: Path
) -> None:
    with _report_tab(browser, demo_report, width) as opened:
        page = opened.page
        for index in (2, 3, 4):  # busy GPUs, pending jobs, fragmented GPUs
            figure = page.locator(f"figure[data-chart='{index}']")
            assert figure.get_attribute("data-view") == "multiples"
            panels = figure.locator(".multiple")
            assert [p.get_attribute("data-policy") for p in panels.all()] == DEMO_POLICIES
            # one y scale for all: the same top on every small chart
            tops = page.evaluate(
                f"""() => window.__uplots.filter(u => u.root.isConnected
                  && u.root.closest('figure').dataset.chart === '{index}')
                  .map(u => u.scales.y.max)"""
            )
            assert len(tops) == len(DEMO_POLICIES) and len(set(tops)) == 1, tops
        figure = page.locator("figure[data-chart='2']")
        figure.screenshot(path=str(shots / f"report-multiples-{width}.png"))
        figure.get_by_role("button", name="all in one chart").click()
        assert figure.get_attribute("data-view") == "overlaid"
        assert figure.locator(".multiple").count() == 0
        names = figure.locator(".u-legend .u-series .u-label").all_text_contents()
        assert names[1:] == DEMO_POLICIES
        assert (
            figure.get_by_role("button", name="all in one chart").get_attribute("aria-pressed")
            == "true"
        )
        figure.get_by_role("button", name="one chart per policy").click()
        assert figure.locator(".multiple").count() == len(DEMO_POLICIES)
        assert overflows(page, allow_scroll=True) == []
        assert opened.errors == []


@pytest.mark.parametrize("width", (*WIDTHS, 360))
def test_report_axis_labels_never_overlap(
    browser: Any, demo_report: Path, width: int, shots: Path
) -> None:
    """Every drawn chart's x labels (the log axes of the CDFs first) keep 10 px apart;
    a CDF still labels at least three times."""
    with _report_tab(browser, demo_report, width) as opened:
        page = opened.page
        axes = page.evaluate(_AXIS_LABELS)
        assert len([a for a in axes if a["chart"] in ("0", "1")]) == 2
        for axis in axes:
            boxes = sorted(axis["boxes"], key=lambda b: b["left"])
            if axis["chart"] in ("0", "1"):
                assert len(boxes) >= 3, axis
            for one, two in itertools.pairwise(boxes):
                assert two["left"] - one["right"] >= LABEL_GAP_PX, (width, axis["chart"], one, two)
        page.locator("figure[data-chart='1']").screenshot(
            path=str(shots / f"report-log-axis-{width}.png")
        )
        assert opened.errors == []


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
