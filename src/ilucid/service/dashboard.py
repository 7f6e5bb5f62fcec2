"""The web dashboard the service serves at ``/``: one page, its scripts and stylesheet
served by the service itself from ``/static/`` (``ilucid/service/static``).

The service must work on machines without internet access, so nothing comes from a
CDN: the charts are uPlot (MIT, vendored in ``ilucid/vendor/uplot``, see its
README), served at ``/static/uplot/``. The page is a small single-page app with
three hash routes: ``#/`` (the cluster: summary, queue with the reason each job
waits, running jobs with their own progress as a bar, a node/GPU map with its
legend, the tenants' quotas and cloud bill, and busy-GPU and job-count charts over a chosen time
range, with the periods the service was down as gaps), ``#/history`` (ended jobs,
paged, filtered by state, user and tenant) and ``#/job/<id>`` (a job with its
expected start, its estimate and the estimate's terms, its own progress over time,
transitions, decisions, profile and the end of its output). It polls the REST API
every few seconds. Below 640 px wide every table turns into one card per row, so
nothing is wider than its panel.

The API token comes from the URL fragment (``/#token=...``; a fragment never
reaches a server or a proxy log), is kept in ``localStorage`` and stripped from
the address bar, or is typed into the token box.

Everything a user wrote (commands, user names, log lines) reaches the page as DOM
text nodes, never as markup. The Content-Security-Policy allows scripts and styles
only from this service's own files (``'self'``, no inline code at all), so even a
missed escape could not run injected code or restyle the page. No other response
of the service can pass for a script: every one carries ``nosniff`` and JSON or
plain-text types.
"""

from __future__ import annotations

import hashlib
import html
from pathlib import Path

from starlette.staticfiles import StaticFiles

__all__ = ["CONTENT_SECURITY_POLICY", "DASHBOARD_HTML", "REFRESH_SECONDS", "static_files"]

#: How often the page polls the API.
REFRESH_SECONDS = 3
#: The dashboard's own scripts and stylesheet.
STATIC = Path(__file__).with_name("static")
#: The vendored chart library (served under /static/uplot/).
UPLOT = Path(__file__).resolve().parent.parent / "vendor" / "uplot"
#: Scripts in the order they load (each uses what the ones before it define).
SCRIPTS = ("util.js", "charts.js", "progress.js", "overview.js", "history.js", "job.js", "app.js")


def static_files() -> StaticFiles:
    """``/static/``: the dashboard's files, then the vendored library's folder."""
    return StaticFiles(directory=STATIC, packages=[("ilucid", "vendor")])


def _url(folder: Path, name: str, prefix: str) -> str:
    """``/static/NAME?v=HASH``: a new version of a file is never taken from a cache."""
    digest = hashlib.sha256((folder / name).read_bytes()).hexdigest()[:16]
    return html.escape(f"/static/{prefix}{name}?v={digest}")


_HEAD = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>ilucid</title><link rel="icon" href="data:,">
<link rel="stylesheet" href="{_url(UPLOT, "uPlot.min.css", "uplot/")}">
<link rel="stylesheet" href="{_url(STATIC, "dashboard.css", "")}">
<script defer src="{_url(UPLOT, "uPlot.iife.min.js", "uplot/")}"></script>
{"".join(f'<script defer src="{_url(STATIC, name, "")}"></script>' for name in SCRIPTS)}
</head><body data-refresh-ms="{REFRESH_SECONDS * 1000}">
<header>
<h1><a href="#/">ilucid</a></h1>
<nav><a href="#/" id="nav-cluster">cluster</a>
<a href="#/history" id="nav-history">history</a></nav>
<span id="status" data-testid="status"></span>
<form id="token-form" data-testid="token-form">
<label for="token-input">API token</label>
<input id="token-input" type="password" autocomplete="off" size="24" spellcheck="false">
<button id="token-save" type="submit">use</button>
</form>
</header>
"""

_OVERVIEW = """
<main id="overview" data-testid="overview" hidden>
<section id="summary" data-testid="summary" class="stats">
<div class="stat"><b id="sum-busy">-</b> / <span id="sum-total">-</span> GPUs busy</div>
<div class="stat"><b id="sum-running">-</b> running</div>
<div class="stat"><b id="sum-pending">-</b> pending</div>
<div class="stat">policy <b id="sum-policy">-</b></div>
</section>
<section class="panel"><h2>Queue</h2>
<table id="queue-table" data-testid="queue-table"><thead><tr>
<th>pos</th><th>job</th><th>user</th><th>tenant</th><th>class</th><th>GPUs</th>
<th>expected start</th><th>why it waits</th></tr></thead><tbody></tbody></table>
<p id="queue-empty" class="empty" hidden>No job is waiting.</p>
</section>
<section class="panel"><h2>Running</h2>
<table id="running-table" data-testid="running-table"><thead><tr>
<th>job</th><th>user</th><th>class</th><th>GPUs</th><th>on GPUs</th><th>started</th>
<th>progress</th></tr></thead><tbody></tbody></table>
<p id="running-empty" class="empty" hidden>Nothing is running that you may see.</p>
</section>
<section class="panel"><h2>Nodes and GPUs</h2>
<ul id="gpu-legend" class="legend" data-testid="gpu-legend">
<li><span class="swatch free"></span>free GPU</li>
<li><span class="swatch held"></span>held by a running job: one colour per job, its id
written on the GPU (select it to open the job)</li>
<li><span class="swatch share"></span>a share of a GPU (--gpu-milli): the part it holds is
filled, its fraction written (0.5: half the GPU)</li>
</ul>
<div id="node-map" data-testid="node-map" class="nodes"></div>
</section>
<section class="panel" id="quota-panel"><h2>Tenants and quotas</h2>
<p id="quota-note" class="note" data-testid="quota-note" hidden></p>
<table id="quota-table" data-testid="quota-table"><thead><tr>
<th>tenant</th><th>guaranteed GPUs</th><th>used</th><th>borrowed</th><th>may borrow</th>
<th>weight</th><th>GPUs held (all classes)</th>
<th id="quota-cloud-head" hidden>cloud this month</th></tr></thead><tbody></tbody></table>
<p id="quota-empty" class="empty" hidden>No tenant holds or is promised GPUs.</p>
<ul id="pool-lines" class="pools" data-testid="pool-lines" hidden></ul>
</section>
<section class="panel" id="chart-panel">
<div class="chart-head"><h2>Over time</h2>
<label for="range">range</label>
<select id="range" data-testid="range">
<option value="15">last 15 min</option><option value="60">last hour</option>
<option value="360">last 6 h</option><option value="1440">last 24 h</option>
<option value="10080">last 7 days</option></select>
<span class="hint">drag across a chart to zoom, double-click to zoom out</span></div>
<p id="down-note" class="note" data-testid="down-note" hidden></p>
<div class="charts">
<figure><figcaption id="caption-busy">Busy GPUs</figcaption>
<div id="chart-busy" data-testid="chart-busy" class="chart"></div></figure>
<figure><figcaption id="caption-jobs">Pending and running jobs</figcaption>
<div id="chart-jobs" data-testid="chart-jobs" class="chart"></div></figure>
</div>
</section>
</main>
"""

_HISTORY = """
<main id="history-view" data-testid="history-view" hidden>
<section class="panel"><h2>Ended jobs</h2>
<form id="history-form" class="filters" data-testid="history-form">
<label>state <select id="history-state">
<option value="">any end</option><option>succeeded</option><option>failed</option>
<option>cancelled</option></select></label>
<label>user <input id="history-user" list="history-users" size="12" autocomplete="off"></label>
<datalist id="history-users"></datalist>
<label>tenant <input id="history-tenant" list="history-tenants" size="12"
autocomplete="off"></label>
<datalist id="history-tenants"></datalist>
<button type="submit">filter</button>
</form>
<table id="history-table" data-testid="history-table"><thead><tr>
<th>job</th><th>user</th><th>tenant</th><th>class</th><th>GPUs</th><th>state</th>
<th>exit</th><th>waited</th><th>ran</th><th>ended</th></tr></thead><tbody></tbody></table>
<p id="history-empty" class="empty" hidden>No ended job matches.</p>
<p class="pager"><button id="history-prev" type="button">&larr; newer</button>
<span id="history-page" data-testid="history-page"></span>
<button id="history-next" type="button">older &rarr;</button></p>
</section>
</main>
"""

_JOB = """
<main id="job-view" data-testid="job-view" hidden>
<p class="back"><a href="#/" id="job-back">&larr; cluster</a></p>
<h2 id="job-title"></h2>
<p id="job-error" class="error" hidden></p>
<div id="job-body">
<section class="panel"><h3>Why</h3><p id="job-why" data-testid="job-why"></p></section>
<section class="panel"><h3>Expected start</h3>
<p id="job-expected" data-testid="job-expected"></p>
<p id="job-assumes" class="note" data-testid="job-assumes" hidden></p></section>
<section class="panel"><h3>Estimate</h3><p id="job-estimate" data-testid="job-estimate"></p>
<table id="job-terms" data-testid="job-terms" hidden><thead><tr>
<th>term</th><th>contribution (log s)</th><th>factor</th></tr></thead><tbody></tbody></table>
</section>
<section class="panel"><h3>Progress</h3><p id="job-progress" data-testid="job-progress"></p>
<div id="job-progress-chart" data-testid="job-progress-chart" class="chart" hidden></div>
</section>
<section class="panel"><h3>Job</h3>
<table id="job-fields" data-testid="job-fields"><tbody></tbody></table></section>
<section class="panel"><h3>Story</h3>
<table id="job-transitions" data-testid="job-transitions"><thead><tr>
<th>time</th><th>what happened</th><th>cause</th><th>details</th></tr></thead><tbody></tbody>
</table>
</section>
<section class="panel"><h3>Scheduling decisions</h3>
<table id="job-decisions" data-testid="job-decisions"><thead><tr>
<th>time</th><th>action</th><th>code</th><th>message</th></tr></thead><tbody></tbody></table>
<p id="job-decisions-empty" class="empty" hidden>No decision yet.</p></section>
<section class="panel"><h3>Profile</h3><div id="job-profile" data-testid="job-profile"></div>
</section>
<section class="panel"><h3>Output (last lines of stdout)</h3>
<pre id="job-log" data-testid="job-log"></pre></section>
</div>
</main>
"""

#: The page: markup only (no inline script or style, which the policy would refuse).
DASHBOARD_HTML = _HEAD + _OVERVIEW + _HISTORY + _JOB + "</body></html>\n"

#: Scripts and styles only from this service's own files; the page may talk only to
#: this service and never be framed.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; "
    "script-src 'self'; "
    "style-src 'self'; "
    "img-src data:; "
    "connect-src 'self'; "
    "base-uri 'none'; "
    "form-action 'none'; "
    "frame-ancestors 'none'"
)
