// The cluster page (#/): summary, queue, running jobs, the GPU map, tenants and
// quotas, and the charts over the chosen time range.
'use strict';
const RANGE_KEY = 'ilucid.range';

function rangeMinutes() {
  const chosen = Number($('range').value);
  return Number.isFinite(chosen) && chosen > 0 ? chosen : 60;
}

async function loadOverview(hash) {
  const minutes = rangeMinutes();
  const [queue, running, nodes, timeline, policy, quotas] = await Promise.all([
    api('/queue'), api('/jobs?state=running'), api('/nodes'),
    api('/timeline?minutes=' + minutes), api('/policy'), api('/views/quotas')]);
  if (location.hash !== hash || rangeMinutes() !== minutes) return false;
  state.skew = timeline.now - Date.now() / 1000;
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
    timeCell('started', j.first_start, true), progressCell(j.progress))), 'running-empty');
  drawNodes(nodes);
  drawQuotas(quotas);
  drawTimeline(timeline, total, minutes);
  return true;
}

function drawNodes(nodes) {
  $('node-map').replaceChildren(...nodes.map(n => {
    const cells = (n.gpu_jobs || []).map((job, i) => {
      const attrs = {class: 'gpu ' + (job ? 'held' : 'free'), 'data-gpu': i,
        'data-job': job || '', title: 'GPU ' + i + (job ? ': ' + job : ': free')};
      const first = job ? job.split(' + ')[0] : '';  // a shared GPU names each of its jobs
      const box = job ? el('a', {...attrs, href: '#/job/' + encodeURIComponent(first)},
        el('span', {class: 'gpu-index'}, 'GPU ' + i), el('span', {class: 'gpu-job'}, job))
        : el('div', attrs, el('span', {class: 'gpu-index'}, 'GPU ' + i),
          el('span', {class: 'gpu-job'}, 'free'));
      if (job) box.style.background = colour(first);
      return box;
    });
    return el('div', {class: 'node', 'data-node': n.name, 'data-testid': 'node'},
      el('div', {class: 'node-head'}, n.name + ' \u00b7 ' + n.gpu_type + ' \u00b7 '
        + (n.excluded ? 'out of service: ' + n.excluded
          : n.free_gpus + ' of ' + n.gpus + ' free')),
      el('div', {class: 'gpus'}, ...cells));
  }));
}

function drawQuotas(quotas) {
  const note = $('quota-note');
  note.hidden = !quotas.note;
  note.textContent = quotas.note;
  const unknown = v => v === null || v === undefined ? '-' : v;
  fill('quota-table', quotas.tenants.map(t => el('tr', {'data-tenant': t.tenant},
    cell('tenant', t.tenant),
    numCell('guaranteed', t.configured ? t.guaranteed : '-'),
    numCell('used', unknown(t.used)),
    numCell('borrowed', unknown(t.borrowed)),
    numCell('borrow_limit', !t.configured ? '-' : t.borrow_limit === null ? 'any idle'
      : t.borrow_limit),
    numCell('weight', t.configured ? t.weight : '-'),
    numCell('holding', t.holding))), 'quota-empty');
}

function setUpRange(onChange) {
  let kept = null;
  try { kept = localStorage.getItem(RANGE_KEY); } catch (e) { /* storage disabled */ }
  if (kept && [...$('range').options].some(o => o.value === kept)) $('range').value = kept;
  else $('range').value = '60';
  $('range').addEventListener('change', () => {
    try { localStorage.setItem(RANGE_KEY, $('range').value); } catch (e) { /* disabled */ }
    onChange();
  });
}
