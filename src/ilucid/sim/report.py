"""A self-contained HTML report: the summary table, CDFs and cluster series.

The charts are drawn by uPlot (MIT, vendored in ``ilucid/vendor/uplot``; Grafana's
time-series panel is built on it), inlined into the page with its stylesheet and
the chart data, so the report is still one file that opens offline and can be
attached to an issue. uPlot gives what hand-drawn SVG lacked: an HTML legend that
wraps instead of clipping (every policy name stays readable), the values under
the cursor, and charts that fit a narrow window. Without JavaScript the table
still reads; a note says the charts need it.

Chart data are computed here, not in the page: each CDF is evaluated on one
log-spaced grid of times shared by all policies (so the cursor reads every
policy's fraction at the same time), and each cluster series is averaged into
at most :data:`TIME_POINTS` buckets of a shared time axis.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from ilucid.core.policies import DEFAULT_PROFILE
from ilucid.sim.metrics import NORM_FLOOR_S
from ilucid.sim.replay_types import ClusterSeries, JobRecord, SimResult

__all__ = ["COLORS", "DEFAULT_COLOR", "render_report", "report_data"]

#: One colour per policy, in the order the policies were given: the Okabe-Ito palette
#: (distinct to readers with every common colour-vision deficiency), less its black,
#: which the default profile keeps; its yellow is left out (too pale on white). Past
#: seven policies the colours come round again, dashed.
COLORS = (
    "#e69f00",  # orange
    "#56b4e9",  # sky blue
    "#009e73",  # bluish green
    "#0072b2",  # blue
    "#d55e00",  # vermillion
    "#cc79a7",  # reddish purple
    "#999999",  # grey
)
#: The default profile's line: black and thicker, so the policy a user would run stands out.
DEFAULT_COLOR = "#000000"
LINE_WIDTH, DEFAULT_LINE_WIDTH = 1.6, 2.8
#: The dash of a colour's second and later rounds (``[]``: solid).
DASHES: tuple[list[int], ...] = ([], [6, 3], [2, 3])
#: Points of each CDF (log-spaced times) and most buckets of each cluster series.
CDF_POINTS = 240
TIME_POINTS = 600

#: Cluster series shown over time: title, ClusterSeries field, y-axis label.
TIME_SERIES: tuple[tuple[str, Callable[[ClusterSeries], Sequence[int]], str], ...] = (
    ("Busy GPUs over time", lambda series: series.busy_gpus, "busy GPUs"),
    ("Pending jobs over time", lambda series: series.pending_jobs, "pending jobs"),
    (
        "Fragmented free GPUs (free GPUs on partly busy nodes)",
        lambda series: series.fragmented_gpus,
        "GPUs",
    ),
)


def _fmt_seconds(value: float) -> str:
    if value != value:  # NaN
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if value >= size:
            amount = value / size
            return f"{amount:.0f} {unit}" if amount == round(amount) else f"{amount:.1f} {unit}"
    return f"{value:.0f} s"


def _cdf_chart(
    title: str,
    x_label: str,
    named: Sequence[tuple[str, Sequence[float]]],
    floor: float = 1.0,
    x_unit: str = "s",
) -> dict[str, Any]:
    """Each policy's fraction of jobs done within ``x``, on one log-spaced grid of ``x``
    (values below ``floor`` count as ``floor``)."""
    arrays = []
    for _, values in named:
        given = np.asarray(values, dtype=float)
        arrays.append(np.sort(np.maximum(given[np.isfinite(given)], floor)))
    filled = [a for a in arrays if len(a)]
    low = min((float(a[0]) for a in filled), default=floor)
    high = max((float(a[-1]) for a in filled), default=floor * 10)
    if high <= low:
        high = low * 10
    grid = np.geomspace(low, high, CDF_POINTS)
    ys: list[list[float | None]] = []
    for known in arrays:
        if not len(known):
            ys.append([None] * len(grid))
            continue
        done = np.searchsorted(known, grid, side="right") / len(known)
        ys.append([round(float(v), 5) for v in done])
    return {
        "kind": "cdf",
        "title": title,
        "x_label": x_label,
        "x_unit": x_unit,
        "y_label": "fraction of jobs",
        "x": [round(float(x), 5) for x in grid],
        "ys": ys,
    }


def _start_misses(records: Sequence[JobRecord]) -> list[float]:
    """Actual wait against the predicted median, each padded by 10 minutes (the scale
    of the predictions' error measure), for the jobs given an expected start."""
    return [
        (r.first_start - r.submit + NORM_FLOOR_S) / (r.predicted_start - r.submit + NORM_FLOOR_S)
        for r in records
        if r.predicted_start >= 0 and r.first_start >= 0
    ]


def _bucketed(
    values: np.ndarray[Any, Any], step: float, width: float, buckets: int
) -> list[float | None]:
    """Mean of the samples in each bucket of ``width`` seconds; a bucket without a
    sample keeps the value before it (a sample holds until the next) until the
    series ends, and is None after."""
    if not len(values):
        return [None] * buckets
    index = np.minimum((np.arange(len(values)) * step / width).astype(int), buckets - 1)
    counts = np.bincount(index, minlength=buckets)
    sums = np.bincount(index, weights=values.astype(float), minlength=buckets)
    out: list[float | None] = []
    last: float | None = None
    end = int(index[-1])
    for bucket in range(buckets):
        if counts[bucket]:
            last = round(float(sums[bucket] / counts[bucket]), 3)
        out.append(last if bucket <= end else None)
    return out


def _time_chart(
    title: str,
    y_label: str,
    results: Sequence[SimResult],
    series_of: Callable[[ClusterSeries], Sequence[int]],
) -> dict[str, Any]:
    """One cluster series of every policy on a shared axis of time since the first
    submission, averaged into at most :data:`TIME_POINTS` buckets."""
    samples = [np.asarray(series_of(r.series)) for r in results]
    span = max((len(s) * r.series.step for s, r in zip(samples, results, strict=True)), default=0)
    buckets = max(1, min(TIME_POINTS, max((len(s) for s in samples), default=1)))
    width = max(span, 1.0) / buckets
    return {
        "kind": "time",
        "title": title,
        "x_label": "time since first submission",
        "y_label": y_label,
        "x": [round(i * width, 3) for i in range(buckets)],
        "ys": [
            _bucketed(s, r.series.step, width, buckets)
            for s, r in zip(samples, results, strict=True)
        ],
    }


def report_data(results: Sequence[SimResult]) -> dict[str, Any]:
    """What the report's script draws: the policies, their colours and five charts."""
    charts = [
        _cdf_chart(
            "JCT distribution (CDF)",
            "job completion time (log scale)",
            [(r.policy, [x.jct for x in r.records]) for r in results],
        ),
        _cdf_chart(
            "Queueing delay distribution (CDF)",
            "queueing delay (log scale; < 1 s shown at 1 s)",
            [(r.policy, [x.queueing_delay for x in r.records]) for r in results],
        ),
        *(_time_chart(title, unit, results, series_of) for title, series_of, unit in TIME_SERIES),
    ]
    if any(r.predicted_start >= 0 for result in results for r in result.records):
        charts.append(
            _cdf_chart(
                "Expected start against actual start (CDF): a calibrated median crosses 50%"
                " at x1, its 80% interval holds the middle 80%",
                "actual wait / predicted wait, each + 10 min (log scale)",
                [(r.policy, _start_misses(r.records)) for r in results],
                floor=0.01,
                x_unit="ratio",
            )
        )
    policies = [r.policy for r in results]
    return {"policies": policies, **_styles(policies), "charts": charts}


def _styles(policies: Sequence[str]) -> dict[str, Any]:
    """Each policy's colour, line width and dash; the default profile (``ilucid``) is
    black and thicker, the others take :data:`COLORS` in turn."""
    colors: list[str] = []
    widths: list[float] = []
    dashes: list[list[int]] = []
    others = 0
    for policy in policies:
        if policy == DEFAULT_PROFILE:
            colors.append(DEFAULT_COLOR)
            widths.append(DEFAULT_LINE_WIDTH)
            dashes.append([])
            continue
        colors.append(COLORS[others % len(COLORS)])
        widths.append(LINE_WIDTH)
        dashes.append(DASHES[(others // len(COLORS)) % len(DASHES)])
        others += 1
    return {
        "colors": colors,
        "widths": widths,
        "dashes": dashes,
        "default": DEFAULT_PROFILE if DEFAULT_PROFILE in policies else None,
    }


def _columns(summaries: Sequence[dict[str, Any]]) -> list[tuple[str, str, Callable[[Any], str]]]:
    columns: list[tuple[str, str, Callable[[Any], str]]] = [
        ("jobs", "jobs", lambda v: f"{v:,}"),
        ("avg_jct", "mean JCT", _fmt_seconds),
        ("p50_jct", "median JCT", _fmt_seconds),
        ("p99_jct", "p99 JCT", _fmt_seconds),
        ("avg_queue", "mean queueing", _fmt_seconds),
        ("p99_queue", "p99 queueing", _fmt_seconds),
        ("makespan", "makespan", _fmt_seconds),
        ("gpu_util", "GPU util", lambda v: f"{v:.1%}"),
        ("preemptions", "preemptions", lambda v: f"{v:,}"),
        ("wall_s", "wall", lambda v: f"{v:.2f} s"),
    ]
    if any(s.get("start_predictions") for s in summaries):
        columns += [
            (
                "start_error_median_s",
                "expected-start error (median)",
                lambda v: "-" if v is None else _fmt_seconds(v),
            ),
            (
                "start_interval_coverage",
                "starts in the 80% range",
                lambda v: "-" if v is None or v != v else f"{v:.0%}",
            ),
        ]
    return columns


def _table(summaries: Sequence[dict[str, Any]]) -> str:
    columns = _columns(summaries)
    head = "".join(f"<th>{html.escape(label)}</th>" for _, label, _ in columns)
    rows = []
    for summary in summaries:
        cells = "".join(
            f'<td data-col="{key}">{html.escape(fmt(summary.get(key)))}</td>'
            for key, _, fmt in columns
        )
        rows.append(f"<tr><th>{html.escape(summary['policy'])}</th>{cells}</tr>")
    return (
        '<div class="table-wrap"><table id="summary"><thead><tr><th>policy</th>'
        f"{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


@cache
def _asset(*parts: str) -> str:
    """A file shipped with the package (the vendored uPlot, the report's script)."""
    return resources.files("ilucid").joinpath(*parts).read_text(encoding="utf-8")


def _script_json(data: object) -> str:
    """JSON that cannot end its ``<script>`` element early (``</`` and ``<!--`` escaped)."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


_STYLE = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222}
.table-wrap{max-width:100%;overflow-x:auto;margin:12px 0}
table{border-collapse:collapse}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:right;white-space:nowrap}
thead th{background:#f0f0f0;white-space:normal;vertical-align:bottom}
.charts{display:flex;flex-wrap:wrap;gap:16px 24px}
figure{margin:0;flex:0 1 640px;min-width:0;max-width:100%}
figcaption{font-weight:600;margin-bottom:4px}
.uplot .u-legend{font-size:12px;text-align:left;max-width:100%}
.uplot .u-legend .u-series>*{padding:2px 4px}
figure[data-view=multiples]{flex-basis:100%}
.view-switch{display:flex;flex-wrap:wrap;gap:4px;margin:0 0 6px}
.view-switch button{font:inherit;font-size:12px;padding:2px 8px;border:1px solid #bbb;
background:#fff;border-radius:4px;cursor:pointer}
.view-switch button[aria-pressed=true]{background:#222;color:#fff;border-color:#222}
.multiples{display:grid;gap:8px 16px;
grid-template-columns:repeat(auto-fill,minmax(min(300px,100%),1fr))}
.multiple{min-width:0}
.multiple-title{font-size:13px;font-weight:600;border-left:4px solid;padding-left:6px}
@media (max-width:600px){body{margin:12px}}
"""


def render_report(
    title: str,
    results: Sequence[SimResult],
    summaries: Sequence[dict[str, Any]],
    notes: Sequence[str] = (),
) -> str:
    """The whole report as one HTML document (no request leaves it)."""
    note_html = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    uplot_css = _asset("vendor", "uplot", "uPlot.min.css")
    uplot_js = _asset("vendor", "uplot", "uPlot.iife.min.js")
    script = _asset("sim", "report.js")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>{uplot_css}{_STYLE}</style></head><body>
<h1>{html.escape(title)}</h1>
<ul>{note_html}</ul>
{_table(summaries)}
<noscript><p>The charts are drawn by JavaScript (uPlot, inside this file).</p></noscript>
<div class="charts" id="charts"></div>
<script type="application/json" id="report-data">{_script_json(report_data(results))}</script>
<script>{uplot_js}</script>
<script>{script}</script>
</body></html>
"""
