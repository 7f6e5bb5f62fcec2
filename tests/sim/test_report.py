"""The simulator's HTML report: its chart data, one offline file, the vendored uPlot.

The replays are real (four fast policies on a small trace, in this process); the
chart data are checked against the replays' own records and series. How the page
renders in a browser is in ``tests/service/test_browser_layout.py``.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import re
from pathlib import Path

import pytest

import ilucid
from ilucid.core import Cluster, JobSpec
from ilucid.sim.metrics import summarize
from ilucid.sim.replay_types import SimResult
from ilucid.sim.report import render_report, report_data
from ilucid.sim.runner import run_policies

PACKAGE = Path(ilucid.__file__).parent
POLICIES = ["fifo", "sjf", "srtf", "tiresias"]


@pytest.fixture(scope="module")
def results() -> list[SimResult]:
    jobs = [JobSpec(f"j{i}", i * 97.0, 1 + i % 4, 60.0 + (i * 379) % 5000) for i in range(60)]
    runs = run_policies(jobs, Cluster.homogeneous(1, 8), POLICIES, processes=1)
    found = [run.result for run in runs if run.result is not None]
    assert len(found) == len(POLICIES)
    return found


def test_cdfs_are_the_fraction_of_jobs_done_within_each_time(results: list[SimResult]) -> None:
    data = report_data(results)
    assert data["policies"] == POLICIES and len(set(data["colors"])) == len(POLICIES)
    jct, queueing = data["charts"][:2]
    for chart, read in ((jct, lambda r: r.jct), (queueing, lambda r: max(1.0, r.queueing_delay))):
        assert chart["kind"] == "cdf" and chart["x"] == sorted(chart["x"])
        for result, ys in zip(results, chart["ys"], strict=True):
            values = [read(r) for r in result.records]
            for x, y in zip(chart["x"], ys, strict=True):
                within = sum(v <= x * (1 + 1e-6) for v in values) / len(values)
                assert y == pytest.approx(within, abs=1 / len(values) + 1e-4)
            assert ys[-1] == 1.0 and ys == sorted(ys)


def test_cluster_series_share_one_time_axis(results: list[SimResult]) -> None:
    charts = report_data(results)["charts"][2:5]
    assert [c["title"] for c in charts] == [
        "Busy GPUs over time",
        "Pending jobs over time",
        "Fragmented free GPUs (free GPUs on partly busy nodes)",
    ]
    busy = charts[0]
    span = max(len(r.series.busy_gpus) * r.series.step for r in results)
    width = busy["x"][1] - busy["x"][0]
    assert len(busy["x"]) <= 600 and width * len(busy["x"]) == pytest.approx(span, rel=1e-3)
    for result, ys in zip(results, busy["ys"], strict=True):
        samples = list(result.series.busy_gpus)
        buckets: dict[int, list[int]] = {}
        for i, value in enumerate(samples):
            buckets.setdefault(int(i * result.series.step / width + 1e-9), []).append(value)
        last_bucket = max(buckets)
        held = None
        for k, shown in enumerate(ys):
            if k in buckets:
                held = sum(buckets[k]) / len(buckets[k])
            assert shown == (None if k > last_bucket else pytest.approx(held, abs=1e-3)), k
        assert max(v for v in ys if v is not None) <= result.cluster_gpus


def test_expected_starts_are_plotted_against_actual_ones(results: list[SimResult]) -> None:
    """The last chart: each policy's CDF of (actual wait + 10 min) / (predicted + 10 min)
    over the jobs given an expected start, on a ratio axis."""
    chart = report_data(results)["charts"][-1]
    assert chart["kind"] == "cdf" and chart["x_unit"] == "ratio"
    for result, ys in zip(results, chart["ys"], strict=True):
        sampled = [r for r in result.records if r.predicted_start >= 0]
        assert sampled, result.policy
        ratios = [
            max(0.01, (r.first_start - r.submit + 600) / (r.predicted_start - r.submit + 600))
            for r in sampled
        ]
        for x, y in zip(chart["x"], ys, strict=True):
            within = sum(v <= x * (1 + 1e-6) for v in ratios) / len(ratios)
            assert y == pytest.approx(within, abs=1 / len(ratios) + 1e-4)


def test_the_report_is_one_file_that_loads_nothing(results: list[SimResult]) -> None:
    summaries = [summarize(r) for r in results]
    page = render_report("a </script> title", results, summaries, ["a note & more"])
    assert not re.search(r"""<(script|link|img|iframe)[^>]*\s(src|href)=""", page)
    uplot = (PACKAGE / "vendor" / "uplot" / "uPlot.iife.min.js").read_text(encoding="utf-8")
    assert uplot in page and (PACKAGE / "sim" / "report.js").read_text() in page
    blob = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page)
    assert blob is not None and json.loads(blob.group(1)) == json.loads(
        json.dumps(report_data(results))
    )
    assert "a &lt;/script&gt; title" in page and "a note &amp; more" in page
    # the wall column never wraps ("0.56 / s"): its cells do not break
    assert "white-space:nowrap" in page
    walls = re.findall(r'<td data-col="wall_s">([^<]*)</td>', page)
    assert walls == [f"{s['wall_s']:.2f} s" for s in summaries]


def test_chart_data_cannot_end_their_script_element(results: list[SimResult]) -> None:
    renamed = [SimResult(**{**_fields(results[0]), "policy": "x</script><script>alert(1)"})]
    page = render_report("t", renamed, [{**summarize(results[0]), "policy": "p"}])
    blob = page.split('id="report-data">', 1)[1].split("</script>", 1)[0]
    assert json.loads(blob)["policies"] == ["x</script><script>alert(1)"]


def _fields(result: SimResult) -> dict[str, object]:
    return {f.name: getattr(result, f.name) for f in dataclasses.fields(SimResult)}


def test_vendored_uplot_matches_its_readme() -> None:
    folder = PACKAGE / "vendor" / "uplot"
    readme = (folder / "README.md").read_text(encoding="utf-8")
    for name in ("uPlot.iife.min.js", "uPlot.min.css"):
        digest = hashlib.sha256((folder / name).read_bytes()).hexdigest()
        assert f"`{name}`\n    (sha256 `{digest}`)" in readme, name
    version = re.search(r"^# uPlot (\S+)", readme)
    assert version is not None
    assert f"(v{version.group(1)})" in (folder / "uPlot.iife.min.js").read_text()[:200]
    assert "MIT License" in (folder / "LICENSE").read_text()


@pytest.mark.parametrize(
    "module",
    [
        "sim/report.py",
        "service/dashboard.py",
        "service/routes_views.py",
        "service/uptime.py",
        "service/history.py",
    ],
)
def test_modules_and_functions_stay_short(module: str) -> None:
    source = (PACKAGE / module).read_text(encoding="utf-8")
    assert source.count("\n") <= 500
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            length = node.end_lineno - node.lineno + 1
            assert length <= 80, f"{module}: {node.name} is {length} lines"
