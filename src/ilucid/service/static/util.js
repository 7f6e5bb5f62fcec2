// The dashboard's shared helpers: DOM building (text nodes only), the API call,
// time formatting. Loaded first; the other scripts use these globals.
'use strict';
const KEY = 'ilucid.token';
const state = {token: '', skew: 0};  // skew: server clock minus this browser's, s

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
function jobLink(id) {
  return el('a', {href: '#/job/' + encodeURIComponent(id), class: 'job-link', 'data-job-id': id},
    id);
}
// the job cell: its id (a link to its page) and, under it, the name its user gave it
function jobCell(id, name) {
  return el('td', {'data-col': 'id'}, jobLink(id),
    ...(name ? [el('span', {class: 'job-name', 'data-testid': 'job-name'}, name)] : []));
}
function cell(col, ...kids) { return el('td', {'data-col': col}, ...kids); }
function numCell(col, value) { return el('td', {'data-col': col, class: 'num'}, value); }

// rows into a table's body; each cell is labelled with its column's heading, which the
// narrow layout shows in front of the value (a card per row)
function fill(tableId, rows, emptyId) {
  const table = $(tableId);
  table.classList.add('cards');
  const heads = table.tHead ? [...table.tHead.rows[0].cells].map(c => c.textContent) : [];
  for (const row of rows) {
    [...row.cells].forEach((c, i) => {
      if (c.tagName === 'TD' && heads[i]) c.dataset.label = heads[i];
    });
  }
  table.tBodies[0].replaceChildren(...rows);
  if (emptyId) $(emptyId).hidden = rows.length > 0;
}

function serverNow() { return Date.now() / 1000 + state.skew; }
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
// "in 9 min (likely 4-25 min)": the median, then the 80% interval the service
// calibrated on its own past predictions (core/start_range.py words it the same way)
function expectedRange(t, low, high) {
  const when = expected(t);
  if (t === null || t === undefined || low === null || low === undefined
      || high === null || high === undefined) return when;
  const now = serverNow();
  const early = Math.max(0, low - now), late = Math.max(0, high - now);
  if (late < 1) return when;
  if (early < 1) return when + ' (likely within ' + span(late) + ')';
  const first = span(early), last = span(late);
  const [number, unit] = first.split(' ');
  return last.endsWith(' ' + unit) ? when + ' (likely ' + number + '-' + last + ')'
    : when + ' (likely ' + first + ' to ' + last + ')';
}
function stamp(t) {
  return t === null || t === undefined ? '-' : new Date(t * 1000).toLocaleString();
}
function clock(t) {
  return t === null || t === undefined ? '-' : new Date(t * 1000).toLocaleTimeString();
}
function timeCell(col, t, rel) {
  return el('td', {'data-col': col, title: stamp(t)}, rel ? relative(t) : stamp(t));
}
function duration(start, end) {
  return start === null || start === undefined || end === null || end === undefined ? '-'
    : span(Math.max(0, end - start));
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

// the versioned REST API (the dashboard's own views stay at /views/)
const API = '/api/v1';

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}
async function api(path, asText) {
  const response = await fetch(path, {
    headers: {Authorization: 'Bearer ' + state.token}, cache: 'no-store'});
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
