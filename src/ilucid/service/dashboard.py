"""The web dashboard the service serves at ``/``: one self-contained page.

HTML, CSS and JavaScript are inline and charts are drawn as SVG by the page's
own script: the service must work on machines without internet access, so no
CDN and no JavaScript library. The page is a small single-page app with two
hash routes, ``#/`` (the cluster: summary, queue with the reason each job
waits, running jobs, a node/GPU map, busy-GPU and queue-length charts) and
``#/job/<id>`` (a job with its transitions, decisions, current explanation, estimate,
profile and the end of its output). It polls the REST API every few seconds.

The API token comes from the URL fragment (``/#token=...``; a fragment never
reaches a server or a proxy log), is kept in ``localStorage`` and stripped from
the address bar, or is typed into the token box.

Everything a user wrote (commands, user names, log lines) reaches the page as
DOM text nodes, never as markup. The Content-Security-Policy sent with the
page allows only this page's own script and style (by hash), so even a missed
escape could not run injected code or restyle the page.
"""

from __future__ import annotations

import base64
import hashlib

__all__ = ["CONTENT_SECURITY_POLICY", "DASHBOARD_HTML", "REFRESH_SECONDS"]

#: How often the page polls the API.
REFRESH_SECONDS = 3

_STYLE = """
:root{--line:#d8dce3;--muted:#667085;--free:#d9dde3;--bg:#f6f7f9}
*{box-sizing:border-box}
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2433;
background:var(--bg)}
header{display:flex;gap:16px;align-items:center;flex-wrap:wrap;padding:10px 20px;
background:#1d2433;color:#fff}
header h1{font-size:18px;margin:0}
header a{color:#fff;text-decoration:none}
header form{display:flex;gap:6px;align-items:center;margin-left:auto}
#status{font-size:12px;color:#c9d1e0}
#status.error{color:#ffb4a8;font-weight:600}
main{padding:12px 20px 40px;max-width:1400px}
section{background:#fff;border:1px solid var(--line);border-radius:6px;padding:10px 14px;
margin:12px 0;overflow-x:auto}
h2{font-size:16px;margin:0 0 8px}
h3{font-size:14px;margin:0 0 6px}
table{border-collapse:collapse;width:100%}
th,td{border-bottom:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
th{font-weight:600;color:var(--muted);font-size:12px}
td.num{text-align:right;font-variant-numeric:tabular-nums}
td{overflow-wrap:anywhere}
td[data-col=id],td[data-col=class],td[data-col=time],td[data-col=started]{white-space:nowrap}
td[data-col=reason],td[data-col=message]{white-space:pre-wrap;min-width:16em;
overflow-wrap:break-word}
.empty{color:var(--muted);font-style:italic}
.stats{display:flex;gap:28px;flex-wrap:wrap}
.stat b{font-size:22px}
.nodes{display:flex;gap:12px;flex-wrap:wrap}
.node{border:1px solid var(--line);border-radius:6px;padding:6px;max-width:100%}
.node-head{font-size:12px;color:var(--muted);margin-bottom:4px}
.gpus{display:grid;grid-template-columns:repeat(auto-fill,84px);gap:4px;max-width:700px}
.gpu{display:flex;flex-direction:column;height:46px;border-radius:4px;padding:3px 5px;
font-size:11px;color:#111;text-decoration:none;overflow:hidden}
.gpu.free{background:var(--free);color:var(--muted)}
.gpu-job{font-weight:600;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:12px}
.charts figure{margin:0}
.charts figcaption{font-weight:600;margin-bottom:4px}
svg.chart{width:100%;height:auto;background:#fff}
svg.chart .grid{stroke:#eceef2}
svg.chart .axis{fill:var(--muted);font-size:10px}
svg.chart .series{fill:none;stroke:#2f6fde;stroke-width:2}
svg.chart .area{fill:#2f6fde22;stroke:none}
pre{background:#0f1522;color:#e6e9ef;padding:8px;border-radius:4px;overflow:auto;
max-height:360px;white-space:pre-wrap}
.state{font-weight:600}
.error{color:#b42318}
.back{margin:4px 0}
"""

_BODY = """
<header>
<h1><a href="#/">ilucid</a></h1>
<span id="status" data-testid="status"></span>
<form id="token-form" data-testid="token-form">
<label for="token-input">API token</label>
<input id="token-input" type="password" autocomplete="off" size="36" spellcheck="false">
<button id="token-save" type="submit">use</button>
</form>
</header>
<main id="overview" data-testid="overview" hidden>
<section id="summary" data-testid="summary" class="stats">
<div class="stat"><b id="sum-busy">-</b> / <span id="sum-total">-</span> GPUs busy</div>
<div class="stat"><b id="sum-running">-</b> running</div>
<div class="stat"><b id="sum-pending">-</b> pending</div>
<div class="stat">policy <b id="sum-policy">-</b></div>
</section>
<section>
<h2>Queue</h2>
<table id="queue-table" data-testid="queue-table"><thead><tr>
<th>pos</th><th>job</th><th>user</th><th>tenant</th><th>class</th><th>GPUs</th>
<th>expected start</th><th>why it waits</th></tr></thead><tbody></tbody></table>
<p id="queue-empty" class="empty" hidden>No job is waiting.</p>
</section>
<section>
<h2>Running</h2>
<table id="running-table" data-testid="running-table"><thead><tr>
<th>job</th><th>user</th><th>class</th><th>GPUs</th><th>on GPUs</th><th>started</th>
</tr></thead><tbody></tbody></table>
<p id="running-empty" class="empty" hidden>Nothing is running that you may see.</p>
</section>
<section>
<h2>Nodes and GPUs</h2>
<div id="node-map" data-testid="node-map" class="nodes"></div>
</section>
<section class="charts">
<figure><figcaption>Busy GPUs, last hour</figcaption>
<div id="chart-busy" data-testid="chart-busy"></div></figure>
<figure><figcaption>Pending jobs, last hour</figcaption>
<div id="chart-pending" data-testid="chart-pending"></div></figure>
</section>
</main>
<main id="job-view" data-testid="job-view" hidden>
<p class="back"><a href="#/" id="job-back">&larr; cluster</a></p>
<h2 id="job-title"></h2>
<p id="job-error" class="error" hidden></p>
<div id="job-body">
<section><h3>Why</h3><p id="job-why" data-testid="job-why"></p></section>
<section><h3>Estimate</h3><p id="job-estimate" data-testid="job-estimate"></p></section>
<section><h3>Job</h3>
<table id="job-fields" data-testid="job-fields"><tbody></tbody></table></section>
<section><h3>State transitions</h3>
<table id="job-transitions" data-testid="job-transitions"><thead><tr>
<th>time</th><th>from</th><th>to</th><th>reason</th></tr></thead><tbody></tbody></table></section>
<section><h3>Scheduling decisions</h3>
<table id="job-decisions" data-testid="job-decisions"><thead><tr>
<th>time</th><th>action</th><th>code</th><th>message</th></tr></thead><tbody></tbody></table>
<p id="job-decisions-empty" class="empty" hidden>No decision yet.</p></section>
<section><h3>Profile</h3><div id="job-profile" data-testid="job-profile"></div></section>
<section><h3>Output (last lines of stdout)</h3>
<pre id="job-log" data-testid="job-log"></pre></section>
</div>
</main>
"""

# raw strings: the script is sent exactly as written here (its hash pins it)
_SCRIPT = (
    r"""
'use strict';
const KEY = 'ilucid.token';
const REFRESH_MS = """
    + str(REFRESH_SECONDS * 1000)
    + r""";
const LOG_LINES = 40;
const JOB_ROUTE = /^#[/]job[/]([^/?&#]+)/;
const SVG = 'http://www.w3.org/2000/svg';
let token = '';
let skew = 0;  // server clock minus this browser's clock, s
let inflight = false;

function $(id) { return document.getElementById(id); }

// every value becomes a text node: user-written text is never parsed as markup
function el(tag, attrs, ...kids) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value !== null && value !== undefined) node.setAttribute(key, String(value));
  }
  for (const kid of kids) {
    node.append(kid instanceof Node ? kid : String(kid === null || kid === undefined ? '' : kid));
  }
  return node;
}
function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = String(text);
  return node;
}
function jobLink(id) {
  return el('a', {href: '#/job/' + encodeURIComponent(id), class: 'job-link', 'data-job-id': id},
    id);
}
function cell(col, ...kids) { return el('td', {'data-col': col}, ...kids); }
function numCell(col, value) { return el('td', {'data-col': col, class: 'num'}, value); }
function fill(tableId, rows, emptyId) {
  $(tableId).tBodies[0].replaceChildren(...rows);
  if (emptyId) $(emptyId).hidden = rows.length > 0;
}

function serverNow() { return Date.now() / 1000 + skew; }
function span(seconds) {
  const a = Math.abs(seconds);
  if (a < 90) return Math.round(a) + ' s';
  if (a < 5400) return Math.round(a / 60) + ' min';
  if (a < 172800) return (a / 3600).toFixed(1) + ' h';
  return (a / 86400).toFixed(1) + ' d';
}
function relative(t) {
  if (t === null || t === undefined) return '-';
  const delta = t - serverNow();
  if (Math.abs(delta) < 1) return 'now';
  return delta > 0 ? 'in ' + span(delta) : span(delta) + ' ago';
}
function expected(t) {
  if (t === null || t === undefined) return 'unknown';
  return t - serverNow() < 1 ? 'next pass' : relative(t);
}
function stamp(t) {
  return t === null || t === undefined ? '-' : new Date(t * 1000).toLocaleString();
}
function timeCell(col, t, rel) {
  return el('td', {'data-col': col, title: stamp(t)}, rel ? relative(t) : stamp(t));
}
// FNV-1a spread by the golden angle: neighbouring ids (j000002, j000003) differ clearly
function colour(id) {
  let h = 2166136261;
  for (const c of String(id)) h = Math.imul(h ^ c.charCodeAt(0), 16777619) >>> 0;
  return 'hsl(' + Math.round((h % 1000) * 137.508 % 360) + ',70%,78%)';
}
function shellWord(a) { return /^[A-Za-z0-9_@%+=:,.[/-]+$/.test(a) ? a : JSON.stringify(a); }

function setStatus(text, error) {
  const s = $('status');
  s.textContent = text;
  s.className = error ? 'error' : '';
}

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}
async function api(path, asText) {
  const response = await fetch(path, {
    headers: {Authorization: 'Bearer ' + token}, cache: 'no-store'});
  if (!response.ok) {
    let detail = response.statusText;
    try {
      const body = (await response.json()).detail;
      detail = typeof body === 'string' ? body : JSON.stringify(body);
    } catch (e) { /* not JSON */ }
    throw new ApiError(response.status, String(detail));
  }
  return asText ? response.text() : response.json();
}

// -- overview ---------------------------------------------------------------------
async function loadOverview(hash) {
  const [queue, running, nodes, timeline, policy] = await Promise.all([
    api('/queue'), api('/jobs?state=running'), api('/nodes'),
    api('/timeline?minutes=60'), api('/policy')]);
  if (location.hash !== hash) return false;
  skew = timeline.now - Date.now() / 1000;
  let total = 0, free = 0;
  for (const n of nodes) { total += n.gpus; free += n.free_gpus; }
  $('sum-busy').textContent = total - free;
  $('sum-total').textContent = total;
  const runningNow = timeline.running.length ? timeline.running[timeline.running.length - 1]
    : running.length;
  $('sum-running').textContent = runningNow;
  $('sum-pending').textContent = queue.length;
  $('sum-policy').textContent = policy.policy;
  fill('queue-table', queue.map(q => el('tr', {'data-job-id': q.id},
    numCell('position', q.position === null ? '-' : q.position),
    cell('id', jobLink(q.id)), cell('user', q.user), cell('tenant', q.tenant),
    cell('class', q['class']), numCell('gpus', q.gpus),
    el('td', {'data-col': 'expected_start', title: stamp(q.expected_start)},
      expected(q.expected_start)),
    cell('reason', q.reason === null ? '(not computed this far down the queue)' : q.reason))),
    'queue-empty');
  fill('running-table', running.map(j => el('tr', {'data-job-id': j.id},
    cell('id', jobLink(j.id)), cell('user', j.user), cell('class', j['class']),
    numCell('gpus', j.gpus),
    cell('gpu_indices', j.gpu_indices === '' ? 'launching' :
      (j.gpu_indices === '-' ? 'none' : j.gpu_indices)),
    timeCell('started', j.first_start, true))), 'running-empty');
  drawNodes(nodes);
  const t1 = timeline.now, t0 = timeline.start;
  drawChart('chart-busy', 'busy GPUs', timeline.times, timeline.busy_gpus, t0, t1, total);
  drawChart('chart-pending', 'pending jobs', timeline.times, timeline.pending, t0, t1, 0);
  return true;
}

function drawNodes(nodes) {
  $('node-map').replaceChildren(...nodes.map(n => {
    const cells = (n.gpu_jobs || []).map((job, i) => {
      const attrs = {class: 'gpu ' + (job ? 'held' : 'free'), 'data-gpu': i,
        'data-job': job || '', title: 'GPU ' + i + (job ? ': ' + job : ': free')};
      const box = job ? el('a', {...attrs, href: '#/job/' + encodeURIComponent(job)},
        el('span', {class: 'gpu-index'}, 'GPU ' + i), el('span', {class: 'gpu-job'}, job))
        : el('div', attrs, el('span', {class: 'gpu-index'}, 'GPU ' + i),
          el('span', {class: 'gpu-job'}, 'free'));
      if (job) box.style.background = colour(job);
      return box;
    });
    return el('div', {class: 'node', 'data-node': n.name, 'data-testid': 'node'},
      el('div', {class: 'node-head'}, n.name + ' \u00b7 ' + n.gpu_type + ' \u00b7 '
        + n.free_gpus + ' of ' + n.gpus + ' free'),
      el('div', {class: 'gpus'}, ...cells));
  }));
}

function niceTop(v) {
  if (v <= 4) return Math.max(1, Math.ceil(v));
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// a step chart: each value holds from its time until the next one
function drawChart(id, label, times, values, t0, t1, top) {
  const W = 600, H = 170, L = 40, R = 10, T = 10, B = 24;
  const yTop = niceTop(Math.max(top || 0, ...values, 1));
  const x = t => L + (W - L - R) * (Math.min(t1, Math.max(t0, t)) - t0) / Math.max(1e-9, t1 - t0);
  const y = v => T + (H - T - B) * (1 - v / yTop);
  const chart = svg('svg', {viewBox: '0 0 ' + W + ' ' + H, class: 'chart', role: 'img',
    'aria-label': label + ' over the last hour'});
  for (const v of [0, yTop / 2, yTop]) {
    chart.append(svg('line', {class: 'grid', x1: L, x2: W - R, y1: y(v), y2: y(v)}));
    chart.append(svg('text', {class: 'axis', x: L - 6, y: y(v) + 3, 'text-anchor': 'end'},
      Number.isInteger(v) ? v : v.toFixed(1)));
  }
  const minutes = Math.round((t1 - t0) / 60);
  for (const [frac, text] of [[0, '-' + minutes + ' min'], [0.5, '-' + minutes / 2 + ' min'],
    [1, 'now']]) {
    chart.append(svg('text', {class: 'axis', x: L + frac * (W - L - R), y: H - 6,
      'text-anchor': frac === 0 ? 'start' : (frac === 1 ? 'end' : 'middle')}, text));
  }
  const points = [];
  for (let i = 0; i < times.length; i++) {
    if (i > 0) points.push([x(times[i]), y(values[i - 1])]);
    points.push([x(times[i]), y(values[i])]);
  }
  if (times.length) points.push([x(t1), y(values[values.length - 1])]);
  const text = points.map(p => p[0].toFixed(1) + ',' + p[1].toFixed(1)).join(' ');
  if (points.length) {
    const base = y(0).toFixed(1);
    chart.append(svg('polygon', {class: 'area', points: points[0][0].toFixed(1) + ',' + base
      + ' ' + text + ' ' + points[points.length - 1][0].toFixed(1) + ',' + base}));
  }
  chart.append(svg('polyline', {class: 'series', points: text, 'data-points': points.length,
    'data-last': values.length ? values[values.length - 1] : ''}));
  $(id).replaceChildren(chart);
}

// -- job page ---------------------------------------------------------------------
async function loadJob(id, hash) {
  const base = '/jobs/' + encodeURIComponent(id);
  let job;
  try {
    job = await api(base);
  } catch (e) {
    if (location.hash !== hash) return false;
    if (e.status !== 404) throw e;
    $('job-title').textContent = 'Job ' + id;
    $('job-error').textContent = e.message;
    $('job-error').hidden = false;
    $('job-body').hidden = true;
    return true;
  }
  const [explain, profile, log] = await Promise.all([
    api(base + '/explain'), api(base + '/profile'), api(base + '/logs?stream=stdout', true)]);
  if (location.hash !== hash) return false;
  $('job-error').hidden = true;
  $('job-body').hidden = false;
  $('job-title').replaceChildren('Job ' + job.id + ' ',
    el('span', {class: 'state', 'data-testid': 'job-state'}, job.state));
  $('job-why').textContent = explain.why;
  $('job-estimate').textContent = explain.estimate.text;
  const fields = [
    ['state', job.state], ['user', job.user], ['tenant', job.tenant], ['class', job['class']],
    ['gpus', job.gpus], ['gpu_indices', job.gpu_indices || '-'],
    ['command', job.command.map(shellWord).join(' ')],
    ['submitted', stamp(job.submit_time)], ['first start', stamp(job.first_start)],
    ['ended', stamp(job.end_time)],
    ['exit code', job.exit_code === null ? '-' : job.exit_code],
    ['preemptions', job.preemptions]];
  fill('job-fields', fields.map(([k, v]) => el('tr', {'data-field': k},
    el('th', {}, k), cell('value', v))));
  fill('job-transitions', job.transitions.map(t => el('tr', {},
    timeCell('time', t.time, false), cell('from', t.from || '-'), cell('to', t.to),
    cell('reason', t.reason))));
  fill('job-decisions', explain.decisions.map(d => el('tr', {},
    timeCell('time', d.time, false), cell('action', d.action), cell('code', d.code),
    cell('message', d.message))), 'job-decisions-empty');
  const p = $('job-profile');
  if (!profile.samples) {
    p.replaceChildren(el('span', {class: 'empty'}, 'No profiler samples for this job.'));
  } else {
    p.replaceChildren(el('table', {}, el('tbody', {}, ...Object.entries(profile).map(
      ([k, v]) => el('tr', {'data-field': k}, el('th', {}, k.split('_').join(' ')),
        numCell('value', Number.isInteger(v) ? v : v.toFixed(1)))))));
  }
  const lines = log.split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  $('job-log').textContent = lines.length ? lines.slice(-LOG_LINES).join('\n') : '(no output)';
  return true;
}

// -- routing, token, refresh ------------------------------------------------------
// a token in the fragment (#token=..., #/job/j1&token=...) is kept and leaves the URL
function tokenFromHash() {
  const match = location.hash.match(/(^#|[&?])token=([^&]*)/);
  if (!match) return false;
  token = decodeURIComponent(match[2]);
  try { localStorage.setItem(KEY, token); } catch (e) { /* storage disabled */ }
  let rest = location.hash.replace(match[0], match[1] === '#' ? '#' : '');
  if (rest === '#' || rest === '') rest = '#/';
  history.replaceState(null, '', location.pathname + location.search + rest);
  $('token-input').value = token;
  return true;
}
function takeToken() {
  if (tokenFromHash()) return;
  try { token = localStorage.getItem(KEY) || ''; } catch (e) { token = ''; }
  $('token-input').value = token;
}

async function refresh(force) {
  if (inflight && !force) return;
  const hash = location.hash;
  const job = hash.match(JOB_ROUTE);
  $('overview').hidden = Boolean(job);
  $('job-view').hidden = !job;
  if (!token) {
    setStatus('Give an API token (ilucid token create, or data-dir/admin.token).', true);
    return;
  }
  inflight = true;
  try {
    const shown = job ? await loadJob(decodeURIComponent(job[1]), hash)
      : await loadOverview(hash);
    if (shown) {
      document.body.dataset.ready = job ? 'job:' + decodeURIComponent(job[1]) : 'overview';
      setStatus('updated ' + new Date().toLocaleTimeString());
    }
  } catch (e) {
    const why = e instanceof ApiError && e.status === 401 ? 'token refused: ' : 'error: ';
    setStatus(why + e.message, true);
  } finally {
    inflight = false;
  }
}

$('token-form').addEventListener('submit', event => {
  event.preventDefault();
  token = $('token-input').value.trim();
  try { localStorage.setItem(KEY, token); } catch (e) { /* storage disabled */ }
  refresh(true);
});
window.addEventListener('hashchange', () => {
  tokenFromHash();
  delete document.body.dataset.ready;
  refresh(true);
});
setInterval(() => { if (!document.hidden) refresh(false); }, REFRESH_MS);
takeToken();
refresh(true);
"""
)


def _source_hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


#: The page. Its script is pinned by hash in :data:`CONTENT_SECURITY_POLICY`.
DASHBOARD_HTML = (
    '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">\n'
    '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
    '<title>ilucid</title>\n<link rel="icon" href="data:,">\n'
    "<style>" + _STYLE + "</style>\n</head><body>" + _BODY + "<script>" + _SCRIPT + "</script>\n"
    "</body></html>\n"
)

#: Only the page's own script and style apply (both pinned by hash: no inline style
#: attribute, no injected <style>); it may talk only to this service, never be framed.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; "
    f"script-src {_source_hash(_SCRIPT)}; "
    f"style-src {_source_hash(_STYLE)}; "
    "img-src data:; "
    "connect-src 'self'; "
    "base-uri 'none'; "
    "form-action 'none'; "
    "frame-ancestors 'none'"
)
