// The history page (#/history?state=&user=&tenant=&after=): ended jobs, newest first,
// a page at a time, paged by the API's opaque cursor (after: the job the page follows).
// Users see their own jobs; admins everyone's.
'use strict';
const HISTORY_ROUTE = /^#[/]history(?:[?](.*))?$/;
const HISTORY_PAGE = 25;
// The cursors of the page shown: where next and previous go.
const historyCursors = {next: null, prev: null};

function historyQuery(hash) {
  const match = hash.match(HISTORY_ROUTE);
  const params = new URLSearchParams(match && match[1] ? match[1] : '');
  return {state: params.get('state') || '', user: params.get('user') || '',
    tenant: params.get('tenant') || '', after: params.get('after') || ''};
}

function historyHash(query) {
  const params = new URLSearchParams();
  for (const key of ['state', 'user', 'tenant', 'after']) if (query[key]) params.set(key, query[key]);
  const text = params.toString();
  return '#/history' + (text ? '?' + text : '');
}

async function loadHistory(hash) {
  const query = historyQuery(hash);
  const params = new URLSearchParams({limit: String(HISTORY_PAGE)});
  for (const key of ['state', 'user', 'tenant']) if (query[key]) params.set(key, query[key]);
  if (query.after) params.set('cursor', query.after);
  const answer = await api('/views/history?' + params.toString());
  if (location.hash !== hash) return false;
  // the form shows the filters in force (unless the user is typing in it)
  if (!$('history-form').contains(document.activeElement)) {
    $('history-state').value = query.state;
    $('history-user').value = query.user;
    $('history-tenant').value = query.tenant;
  }
  $('history-users').replaceChildren(...answer.users.map(u => el('option', {value: u})));
  $('history-tenants').replaceChildren(...answer.tenants.map(t => el('option', {value: t})));
  fill('history-table', answer.jobs.map(j => el('tr', {'data-job-id': j.id},
    jobCell(j.id, j.name), cell('user', j.user), cell('tenant', j.tenant),
    cell('class', j['class']), numCell('gpus', j.gpus),
    cell('state', el('span', {class: 'state'}, j.state)),
    numCell('exit_code', j.exit_code === null ? '-' : j.exit_code),
    cell('waited', duration(j.submit_time, j.first_start)),
    cell('ran', duration(j.first_start, j.end_time)),
    timeCell('ended', j.end_time, false))), 'history-empty');
  // pages are counted from the cursor's place: jobs that end meanwhile shift them
  const page = Math.ceil(answer.start / answer.limit) + 1;
  const left = Math.max(0, answer.total - answer.start - answer.jobs.length);
  $('history-page').textContent = 'page ' + page + ' of ' + (page + Math.ceil(left / answer.limit))
    + ' \u00b7 ' + answer.total + ' ended job' + (answer.total === 1 ? '' : 's');
  Object.assign(historyCursors, {next: answer.next_cursor, prev: answer.prev_cursor});
  $('history-prev').disabled = answer.start === 0;
  $('history-next').disabled = answer.next_cursor === null;
  return true;
}

// The page stops saying it is ready at once: the browser fires hashchange a task
// later, and until then the old table stood under the new hash marked ready.
function showHistory(query) {
  const hash = historyHash(query);
  if (hash === location.hash) { refresh(true); return; }
  delete document.body.dataset.ready;
  location.hash = hash;
}

function setUpHistory() {
  $('history-form').addEventListener('submit', event => {
    event.preventDefault();
    showHistory({state: $('history-state').value,
      user: $('history-user').value.trim(), tenant: $('history-tenant').value.trim(), after: ''});
  });
  $('history-prev').addEventListener('click', () => {
    showHistory({...historyQuery(location.hash), after: historyCursors.prev || ''});
  });
  $('history-next').addEventListener('click', () => {
    if (historyCursors.next) showHistory({...historyQuery(location.hash), after: historyCursors.next});
  });
}
