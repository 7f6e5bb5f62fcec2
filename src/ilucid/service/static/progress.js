// A job's own progress (ILUCID_PROGRESS lines, ilucid.progress.report): a bar cell for
// the running table, and the job page's section: the sentence of how it counts in the
// estimate and its steps over time, drawn by uPlot like the cluster's charts.
'use strict';

function stepCount(v) {
  return Number.isInteger(v) ? v.toLocaleString() : v.toFixed(1);
}

function progressText(p) {
  const parts = [Math.round(p.fraction * 100) + '%',
    stepCount(p.step) + ' / ' + stepCount(p.total) + ' steps'];
  if (p.rate_per_s) parts.push(p.rate_per_s.toFixed(1) + ' steps/s');
  if (p.left_s !== null && p.left_s !== undefined) parts.push('~' + span(p.left_s) + ' left');
  return parts.join(' \u00b7 ');
}

// the running table's cell: a bar, then steps, rate and time left ("-": never reported)
function progressCell(p) {
  if (!p) return el('td', {'data-col': 'progress'}, '-');
  return el('td', {'data-col': 'progress', 'data-testid': 'progress-cell',
    'data-step': p.step, 'data-total': p.total},
  el('progress', {max: p.total, value: p.step, 'data-testid': 'progress-bar',
    'aria-label': Math.round(p.fraction * 100) + '% done'}),
  el('span', {class: 'progress-text'}, progressText(p)));
}

// the job page: GET /jobs/<id>/progress
function drawProgress(answer) {
  const shown = answer.progress ? progressText(answer.progress) : '';
  $('job-progress').textContent = answer.words ? shown + ': ' + answer.words : shown
    || 'No progress reported (a job prints ILUCID_PROGRESS step=N total=M, or calls'
    + ' ilucid.progress.report; see docs/progress.md).';
  const holder = $('job-progress-chart');
  const history = answer.history;
  holder.hidden = history.length < 2;
  if (history.length < 2) return;
  drawChart('job-progress-chart', [{label: 'step', colour: '#2f6fde', fill: '#2f6fde22'}],
    [history.map(p => p.at), history.map(p => p.step)], history[history.length - 1].total);
}
