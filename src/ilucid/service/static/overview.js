// The cluster page (#/): summary, queue, running jobs, the GPU map, tenants with their
// quotas and cloud bill, paid pools, and the charts over the chosen time range.
'use strict';
const RANGE_KEY = 'ilucid.range';

function rangeMinutes() {
  const chosen = Number($('range').value);
  return Number.isFinite(chosen) && chosen > 0 ? chosen : 60;
}

async function loadOverview(hash) {
  const minutes = rangeMinutes();
  const [queue, runningPage, nodes, timeline, policy, quotas] = await Promise.all([
    api(API + '/queue'), api(API + '/jobs?state=running&limit=1000'), api(API + '/nodes'),
    api(API + '/timeline?minutes=' + minutes), api(API + '/policy'), api('/views/quotas')]);
  const running = runningPage.jobs;  // the first 1,000 running jobs
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
    jobCell(q.id, q.name), cell('user', q.user), cell('tenant', q.tenant),
    cell('class', q['class']), numCell('gpus', q.gpus),
    el('td', {'data-col': 'expected_start', title: stamp(q.expected_start)},
      expectedRange(q.expected_start, q.expected_start_p10, q.expected_start_p90)),
    cell('reason', q.reason === null ? '(not computed this far down the queue)' : q.reason))),
  'queue-empty');
  fill('running-table', running.map(j => el('tr', {'data-job-id': j.id},
    jobCell(j.id, j.name), cell('user', j.user), cell('class', j['class']),
    numCell('gpus', j.gpus),
    cell('gpu_indices', j.gpu_indices === '' ? 'launching' :
      (j.gpu_indices === '-' ? 'none' : j.gpu_indices)),
    timeCell('started', j.first_start, true), progressCell(j.progress))), 'running-empty');
  drawNodes(nodes);
  drawQuotas(quotas);
  drawTimeline(timeline, total, minutes);
  return true;
}

// a GPU of the map: free, held whole, or held in shares (gpu_milli): each share is a
// part of the GPU's width in its job's colour, with its fraction written ("0.5"), so
// half a GPU never looks like a whole one
function gpuCell(i, job, shares) {
  const title = 'GPU ' + i + (job ? ': ' + job : ': free');
  if (!job) {
    return el('div', {class: 'gpu free', 'data-gpu': i, 'data-job': '', title: title},
      el('span', {class: 'gpu-index'}, 'GPU ' + i), el('span', {class: 'gpu-job'}, 'free'));
  }
  const ids = job.split(' + ');  // a shared GPU names each of its jobs
  const milli = ids.map((id, k) => (shares && shares[k]) || 1000);
  const whole = ids.length === 1 && milli[0] >= 1000;
  const share = m => String(m / 1000);
  const label = whole ? job : ids.map((id, k) => id + ' ' + share(milli[k])).join(' + ');
  const box = el('a', {class: 'gpu held' + (whole ? '' : ' shared'), 'data-gpu': i,
    'data-job': job, 'data-milli': milli.join('+'), href: '#/job/' + encodeURIComponent(ids[0]),
    title: whole ? title : 'GPU ' + i + ': ' + label + ' of the GPU'},
  el('span', {class: 'gpu-index'}, 'GPU ' + i,
    ...(whole ? [] : [el('span', {class: 'gpu-share', 'data-testid': 'gpu-share'},
      milli.map(share).join(' + '))])),
  el('span', {class: 'gpu-job'}, whole ? job : ids.join(' + ')));
  // the held part of the GPU, left to right, each job's share in its colour
  let at = 0;
  const stops = [];
  ids.forEach((id, k) => {
    const to = Math.min(100, at + milli[k] / 10);
    stops.push(colour(id) + ' ' + at + '%', colour(id) + ' ' + to + '%');
    at = to;
  });
  if (at < 100) stops.push('var(--free) ' + at + '%', 'var(--free) 100%');
  box.style.background = 'linear-gradient(90deg,' + stops.join(',') + ')';
  return box;
}

function drawNodes(nodes) {
  $('node-map').replaceChildren(...nodes.map(n => {
    const cells = (n.gpu_jobs || []).map((job, i) => gpuCell(i, job, (n.gpu_milli || [])[i]));
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
  const paid = (quotas.pools || []).length > 0;  // a cloud column only with paid pools
  $('quota-cloud-head').hidden = !paid;
  fill('quota-table', quotas.tenants.map(t => el('tr', {'data-tenant': t.tenant},
    cell('tenant', t.tenant),
    numCell('guaranteed', t.configured ? t.guaranteed : '-'),
    numCell('used', unknown(t.used)),
    numCell('borrowed', unknown(t.borrowed)),
    numCell('borrow_limit', !t.configured ? '-' : t.borrow_limit === null ? 'any idle'
      : t.borrow_limit),
    numCell('weight', t.configured ? t.weight : '-'),
    numCell('holding', t.holding),
    ...(paid ? [cloudCell(t.cloud)] : []))), 'quota-empty');
  $('pool-lines').hidden = !paid;
  $('pool-lines').replaceChildren(...(quotas.pools || []).map(poolLine));
}

// the core's way with money: whole units from 100 on, cents on small sums
function money(amount) {
  const digits = Math.abs(amount) >= 100 ? 0 : 2;
  return amount.toLocaleString('en-US',
    {minimumFractionDigits: digits, maximumFractionDigits: digits});
}
function gpuHours(hours) {
  return hours.toLocaleString('en-US', {maximumFractionDigits: hours >= 100 ? 0 : 1});
}

// a tenant's cloud bill this month: "1,240 of 5,000, forecast 3,100" (the forecast is
// an estimate: spent plus its running cloud jobs' expected remaining cost)
function cloudCell(c) {
  if (!c) return cell('cloud', '-');
  if (!c.cloud && c.spent === 0) return cell('cloud', 'off: on-prem only');
  let text = money(c.spent) + (c.budget === null ? '' : ' of ' + money(c.budget));
  if (c.budget_gpu_hours !== null) {
    text += (c.budget === null ? ' (' : ', ') + gpuHours(c.spent_gpu_hours) + ' of '
      + gpuHours(c.budget_gpu_hours) + ' GPU-h' + (c.budget === null ? ')' : '');
  }
  if (c.budget === null && c.budget_gpu_hours === null) text += ' (no budget)';
  text += ', forecast ' + money(c.forecast);
  if (c.reaches_budget) text += ' (reaches the budget: its cloud jobs stop there)';
  const left = c.left === null ? '' : '; left ' + money(c.left);
  return el('td', {'data-col': 'cloud', title: 'month ' + c.month + ': '
    + gpuHours(c.spent_gpu_hours) + ' GPU-h spent' + left + '; cloud jobs running '
    + c.running_jobs + '; forecast: an estimate from the running jobs\' estimates'}, text);
}

function poolLine(p) {
  const nodes = p.on_demand ? p.nodes_up + ' of ' + p.nodes + ' nodes up'
    : p.nodes + ' nodes, always up';
  return el('li', {'data-pool': p.pool}, 'pool ' + p.pool + ' ('
    + money(p.price_per_gpu_hour) + '/GPU-h): ' + nodes + ', cloud jobs running '
    + p.running_jobs + '; node time so far ' + money(p.node_cost) + ' ('
    + gpuHours(p.node_gpu_hours) + ' GPU-h, idle nodes included)');
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
