// A job's page (#/job/<id>): why it is where it is, its expected start, its
// estimate with the model's terms, its own progress, its fields, transitions, decisions,
// profile, output.
'use strict';
const LOG_LINES = 40;
const JOB_ROUTE = /^#[/]job[/]([^/?&#]+)/;

function expectedText(outlook, job) {
  if (outlook.state === 'pending' && job.retry_at !== null) {
    return 'not before ' + stamp(job.retry_at) + ': held back for its retry';
  }
  if (outlook.state === 'pending') {
    const where = outlook.position === null ? '' : ' (position ' + outlook.position + ')';
    if (outlook.expected_start === null) return 'unknown' + where
      + ': no estimate of when the jobs ahead of it end';
    return expectedRange(outlook.expected_start, outlook.expected_start_p10,
      outlook.expected_start_p90) + ', at ' + stamp(outlook.expected_start) + where;
  }
  if (job.first_start !== null) return 'started ' + stamp(job.first_start);
  return 'never started';
}

function drawEstimate(estimate) {
  $('job-estimate').textContent = estimate.text;
  const model = estimate.model;
  const table = $('job-terms');
  table.hidden = !model;
  if (!model) return;
  const factor = v => '\u00d7' + Math.exp(v).toFixed(2);
  const rows = [el('tr', {'data-term': 'intercept'},
    cell('term', 'baseline of model ' + model.version + ' (intercept)'),
    numCell('value', model.intercept.toFixed(2)),
    numCell('factor', Math.round(Math.expm1(model.intercept)).toLocaleString() + ' s'))];
  for (const t of model.terms) {
    rows.push(el('tr', {'data-term': t.term}, cell('term', t.term),
      numCell('value', (t.value >= 0 ? '+' : '') + t.value.toFixed(2)),
      numCell('factor', factor(t.value))));
  }
  fill('job-terms', rows);
}

// failed launches and vanishes: retries used of those allowed, the next one, each cause
function retriesText(retries) {
  const next = retries.retry_at === null ? '' : '; next retry at ' + stamp(retries.retry_at);
  return retries.attempts + ' of ' + retries.max_retries + next;
}

function failedAttempts(retries) {
  if (!retries.failed.length) return 'none';
  return el('ol', {}, ...retries.failed.map(a => el('li', {}, clock(a.time) + ' ' + a.cause)));
}

function drawJobTables(job, explain) {
  const fields = [
    ['name', job.name || '-'], ['state', job.state], ['user', job.user], ['tenant', job.tenant], ['class', job['class']],
    ['gpus', job.gpus], ['gpu_indices', job.gpu_indices || '-'],
    ['command', job.command.map(shellWord).join(' ')],
    ['submitted', stamp(job.submit_time)], ['first start', stamp(job.first_start)],
    ['ended', stamp(job.end_time)],
    ['exit code', job.exit_code === null ? '-' : job.exit_code],
    ['preemptions', job.preemptions], ['retries', retriesText(explain.retries)],
    ['failed attempts', failedAttempts(explain.retries)]];
  fill('job-fields', fields.map(([k, v]) => el('tr', {'data-field': k},
    el('th', {}, k), cell('value', v))));
  // the story as a user reads it: "pending -> starting", then "started" on its GPUs
  // (not the lifecycle's internal "decided -> running")
  fill('job-transitions', explain.story.map(t => el('tr', {},
    timeCell('time', t.time, false), cell('what', t.move),
    cell('cause', t.stimulus || '-'), cell('reason', t.detail))));
  fill('job-decisions', explain.decisions.map(d => el('tr', {},
    timeCell('time', d.time, false), cell('action', d.action), cell('code', d.code),
    cell('message', d.message))), 'job-decisions-empty');
}

function drawProfile(profile) {
  const p = $('job-profile');
  if (!profile.samples) {
    p.replaceChildren(el('span', {class: 'empty'}, 'No profiler samples for this job.'));
    return;
  }
  const rows = Object.entries(profile).map(([k, v]) => el('tr', {'data-field': k},
    el('th', {}, k.split('_').join(' ')), numCell('value', Number.isInteger(v) ? v : v.toFixed(1))));
  p.replaceChildren(el('table', {class: 'cards'}, el('tbody', {}, ...rows)));
}

async function loadJob(id, hash) {
  const base = API + '/jobs/' + encodeURIComponent(id);
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
  const [explain, outlook, profile, log, progress] = await Promise.all([
    api(base + '/explain'), api('/views/jobs/' + encodeURIComponent(id)), api(base + '/profile'),
    api(base + '/logs?stream=stdout', true), api(base + '/progress')]);
  if (location.hash !== hash) return false;
  state.skew = outlook.now - Date.now() / 1000;
  $('job-error').hidden = true;
  $('job-body').hidden = false;
  $('job-title').replaceChildren('Job ' + job.id + ' ',
    ...(job.name ? [el('span', {class: 'title-name', 'data-testid': 'job-name'}, job.name),
      ' '] : []),
    el('span', {class: 'state', 'data-testid': 'job-state'}, job.state));
  document.title = 'ilucid: ' + job.id + (job.name ? ' ' + job.name : '');
  $('job-why').textContent = explain.why;
  $('job-expected').textContent = expectedText(outlook, job);
  const assumes = outlook.state === 'pending' ? outlook.assumes : null;
  $('job-assumes').hidden = !assumes;
  $('job-assumes').textContent = assumes ? 'This assumes: ' + assumes : '';
  drawEstimate(outlook.estimate);
  drawJobTables(job, explain);
  drawProfile(profile);
  drawProgress(progress);
  const lines = log.split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  $('job-log').textContent = lines.length ? lines.slice(-LOG_LINES).join('\n') : '(no output)';
  return true;
}
