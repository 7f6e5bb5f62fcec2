"""A self-contained HTML report: CDFs, cluster series and the summary table.

Charts are inline SVG drawn here, so the report opens anywhere without
JavaScript or network access and can be attached to an issue as one file.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from typing import Any

from ilucid.sim.engine import SimResult

__all__ = ["render_report"]

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
WIDTH, HEIGHT = 640, 320
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 40, 44
#: Log-scale ticks people read at a glance: 1 s, 10 s, 1 min, 10 min, 1 h, ...
TIME_TICKS = (1, 10, 60, 600, 3600, 86400, 864000, 8640000, 86400000)
#: Linear time-axis steps, from an hour to a month.
TIME_STEPS = (3600, 6 * 3600, 86400, 7 * 86400, 30 * 86400, 90 * 86400)


def _fmt_seconds(value: float) -> str:
    if value != value:  # NaN
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if value >= size:
            amount = value / size
            return f"{amount:.0f} {unit}" if amount == round(amount) else f"{amount:.1f} {unit}"
    return f"{value:.0f} s"


def _downsample(points: list[tuple[float, float]], limit: int = 400) -> list[tuple[float, float]]:
    """Average consecutive points into at most ``limit`` so lines stay readable."""
    if len(points) <= limit:
        return points
    size = len(points) / limit
    out = []
    for i in range(limit):
        chunk = points[int(i * size) : max(int((i + 1) * size), int(i * size) + 1)]
        out.append((chunk[0][0], sum(y for _, y in chunk) / len(chunk)))
    return out


def _nice_ceiling(value: float) -> float:
    """Round an axis maximum up to 1, 2, 4 or 5 times a power of ten (divides into 4 ticks)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for factor in (1, 2, 4, 5, 8, 10):
        if value <= factor * power:
            return float(factor * power)
    return float(10 * power)


def _chart(
    title: str,
    series: Sequence[tuple[str, list[tuple[float, float]]]],
    x_label: str,
    y_label: str,
    log_x: bool = False,
    x_is_time: bool = False,
    y_percent: bool = False,
    smooth: bool = False,
) -> str:
    """A line chart with axes, ticks and a legend."""
    xs = [x for _, pts in series for x, _ in pts]
    ys = [y for _, pts in series for _, y in pts]
    if not xs:
        return f"<p>{html.escape(title)}: no data</p>"

    def tx(x: float) -> float:
        return math.log10(max(x, 1.0)) if log_x else x

    x0, x1 = min(tx(x) for x in xs), max(tx(x) for x in xs)
    y0, y1 = 0.0, (1.0 if y_percent else _nice_ceiling(max(ys)))
    if x1 == x0:
        x1 = x0 + 1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (tx(x) - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        return TOP + plot_h - (y - y0) / (y1 - y0) * plot_h

    out = [
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img"'
        f' aria-label="{html.escape(title)}">',
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#fafafa"'
        ' stroke="#ccc"/>',
    ]
    for i in range(5):
        value = y0 + (y1 - y0) * i / 4
        y = py(value)
        label = f"{value:.0%}" if y_percent else f"{value:,.0f}"
        out.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e5e5"/>'
        )
        out.append(
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{label}</text>'
        )
    if log_x:
        ticks = [float(t) for t in TIME_TICKS]
    elif x_is_time:
        step = next((s for s in TIME_STEPS if (x1 - x0) / s <= 8), TIME_STEPS[-1])
        ticks = [x0 + step * i for i in range(int((x1 - x0) // step) + 1)]
    else:
        ticks = [x0 + (x1 - x0) * i / 4 for i in range(5)]
    for value in ticks:
        if not (x0 - 1e-9 <= tx(value) <= x1 + 1e-9):
            continue
        x = px(value)
        label = _fmt_seconds(value) if (log_x or x_is_time) else f"{value:,.0f}"
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{TOP + plot_h}" stroke="#eee"/>'
        )
        out.append(
            f'<text x="{x:.1f}" y="{TOP + plot_h + 16}" text-anchor="middle" font-size="11">'
            f"{html.escape(label)}</text>"
        )
    for index, (name, points) in enumerate(series):
        color = COLORS[index % len(COLORS)]
        shown = _downsample(points) if smooth else points[:: max(1, len(points) // 2000)]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in shown)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.6" points="{path}"/>')
        x = LEFT + 10 + 110 * index
        out.append(
            f'<rect x="{x}" y="8" width="10" height="10" fill="{color}"/>'
            f'<text x="{x + 14}" y="17" font-size="11">{html.escape(name)}</text>'
        )
    out.append(
        f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 6}" text-anchor="middle" font-size="12">'
        f"{html.escape(x_label)}</text>"
        f'<text x="14" y="{TOP + plot_h / 2}" text-anchor="middle" font-size="12"'
        f' transform="rotate(-90 14 {TOP + plot_h / 2})">{html.escape(y_label)}</text></svg>'
    )
    return f"<figure><figcaption>{html.escape(title)}</figcaption>{''.join(out)}</figure>"


#: Cluster series shown over time: title, ClusterSeries field, y-axis label.
TIME_SERIES = (
    ("Busy GPUs over time", "busy_gpus", "busy GPUs"),
    ("Pending jobs over time", "pending_jobs", "pending jobs"),
    ("Fragmented free GPUs (free GPUs on partly busy nodes)", "fragmented_gpus", "GPUs"),
)


def _cdf(values: list[float]) -> list[tuple[float, float]]:
    values = sorted(values)
    n = len(values)
    return [(v, (i + 1) / n) for i, v in enumerate(values)] if n else []


def _series(result: SimResult, which: str) -> list[tuple[float, float]]:
    data = getattr(result.series, which)
    step = result.series.step
    return [((i * step), float(v)) for i, v in enumerate(data)] if len(data) else []


def render_report(
    title: str,
    results: Sequence[SimResult],
    summaries: Sequence[dict[str, Any]],
    notes: Sequence[str] = (),
) -> str:
    """The whole report as one HTML document."""
    rows = []
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
        columns.append(
            (
                "start_error_median_s",
                "expected-start error (median)",
                lambda v: "-" if v is None else _fmt_seconds(v),
            )
        )
    head = "".join(f"<th>{html.escape(label)}</th>" for _, label, _ in columns)
    for summary in summaries:
        cells = "".join(f"<td>{fmt(summary.get(key))}</td>" for key, _, fmt in columns)
        rows.append(f"<tr><th>{html.escape(summary['policy'])}</th>{cells}</tr>")
    charts = [
        _chart(
            "JCT distribution (CDF)",
            [(r.policy, _cdf([x.jct for x in r.records])) for r in results],
            "job completion time (log scale)",
            "fraction of jobs",
            log_x=True,
            y_percent=True,
        ),
        _chart(
            "Queueing delay distribution (CDF)",
            [(r.policy, _cdf([max(1.0, x.queueing_delay) for x in r.records])) for r in results],
            "queueing delay (log scale; < 1 s shown at 1 s)",
            "fraction of jobs",
            log_x=True,
            y_percent=True,
        ),
        *(
            _chart(
                title,
                [(r.policy, _series(r, field_name)) for r in results],
                "time since first submission",
                unit,
                x_is_time=True,
                smooth=True,
            )
            for title, field_name, unit in TIME_SERIES
        ),
    ]
    note_html = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 24px; color: #222; }}
table {{ border-collapse: collapse; margin: 12px 0; }}
th, td {{ border: 1px solid #ddd; padding: 4px 8px; text-align: right; }}
thead th {{ background: #f0f0f0; }}
figure {{ display: inline-block; margin: 8px 16px 16px 0; }}
figcaption {{ font-weight: 600; margin-bottom: 4px; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<ul>{note_html}</ul>
<table><thead><tr><th>policy</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>
{"".join(charts)}
</body></html>
"""
