// Routing (#/, #/history, #/job/<id>), the API token and the refresh loop. Loaded last.
'use strict';
let inflight = false;

// a token in the fragment (#token=..., #/job/j1&token=...) is kept and leaves the URL
function tokenFromHash() {
  const match = location.hash.match(/(^#|[&?])token=([^&]*)/);
  if (!match) return false;
  state.token = decodeURIComponent(match[2]);
  try { localStorage.setItem(KEY, state.token); } catch (e) { /* storage disabled */ }
  let rest = location.hash.replace(match[0], match[1] === '#' ? '#' : '');
  if (rest === '#' || rest === '') rest = '#/';
  history.replaceState(null, '', location.pathname + location.search + rest);
  $('token-input').value = state.token;
  return true;
}
function takeToken() {
  if (tokenFromHash()) return;
  try { state.token = localStorage.getItem(KEY) || ''; } catch (e) { state.token = ''; }
  $('token-input').value = state.token;
}

function route(hash) {
  const job = hash.match(JOB_ROUTE);
  if (job) return {view: 'job-view', id: decodeURIComponent(job[1])};
  if (HISTORY_ROUTE.test(hash)) return {view: 'history-view'};
  return {view: 'overview'};
}

async function refresh(force) {
  if (inflight && !force) return;
  const hash = location.hash;
  const where = route(hash);
  for (const view of ['overview', 'history-view', 'job-view']) $(view).hidden = view !== where.view;
  $('nav-cluster').classList.toggle('current', where.view === 'overview');
  $('nav-history').classList.toggle('current', where.view === 'history-view');
  if (where.view !== 'job-view') document.title = 'ilucid';
  if (!state.token) {
    setStatus('Give an API token (ilucid token create, or data-dir/admin.token).', true);
    return;
  }
  inflight = true;
  try {
    const shown = where.view === 'job-view' ? await loadJob(where.id, hash)
      : where.view === 'history-view' ? await loadHistory(hash) : await loadOverview(hash);
    if (shown) {
      document.body.dataset.ready = where.view === 'job-view' ? 'job:' + where.id
        : where.view === 'history-view' ? 'history' : 'overview';
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
  state.token = $('token-input').value.trim();
  try { localStorage.setItem(KEY, state.token); } catch (e) { /* storage disabled */ }
  refresh(true);
});
window.addEventListener('hashchange', () => {
  tokenFromHash();
  delete document.body.dataset.ready;
  refresh(true);
});
setUpRange(() => { delete document.body.dataset.ready; refresh(true); });
setUpHistory();
setInterval(() => { if (!document.hidden) refresh(false); },
  Number(document.body.dataset.refreshMs) || 3000);
takeToken();
refresh(true);
