// Step charts of the /timeline series, drawn by uPlot (/static/uplot/): a legend
// that wraps, the values under the cursor, drag to zoom, and the periods the
// service was down drawn as gaps rather than as the last value held flat.
'use strict';
const charts = {};  // holder id -> {plot, key, full: [min, max]}
const stepped = () => uPlot.paths.stepped({align: 1});

// the series with nulls where the service was down: the value before a stop reaches
// it, nothing is drawn until the restart, then the value known at the restart. Before
// ``firstUp`` (the service's first start, null: before the window) there is nothing
// to show: those times are null too, not zero
function withGaps(times, lists, down, firstUp) {
  const xs = [];
  const ys = lists.map(() => []);
  const push = (t, i) => {
    xs.push(t);
    lists.forEach((list, k) => ys[k].push(i < 0 ? null : list[i]));
  };
  let i = 0;
  if (firstUp !== null && firstUp !== undefined && times.length && firstUp > times[0]) {
    push(times[0], -1);
    while (i < times.length && times[i] <= firstUp) i++;
    push(firstUp, i - 1);
  }
  for (const [a, b] of down) {
    for (; i < times.length && times[i] < a; i++) push(times[i], i);
    if (i > 0) push(a, i - 1);
    push(a + 0.001, -1);
    while (i < times.length && times[i] <= b) i++;
    if (i > 0) push(b, i - 1);
  }
  for (; i < times.length; i++) push(times[i], i);
  return [xs, ...ys];
}

function count(v) {
  if (v === null || v === undefined) return '-';
  return Number.isInteger(v) ? String(v) : v.toFixed(1);
}

function chartOptions(width, series, top) {
  return {
    width: width, height: 200,
    series: [{label: 'time', value: (u, v) => v === null || v === undefined ? '-' : stamp(v)},
      ...series.map(s => ({label: s.label, stroke: s.colour, width: 2, fill: s.fill,
        dash: s.dash, paths: stepped(), points: {show: false}, spanGaps: false, value: (u, v) => count(v)}))],
    legend: {live: true},
    cursor: {drag: {x: true, y: false}},
    scales: {x: {time: true}, y: {range: (u, min, max) => [0, Math.max(top, max, 1) * 1.1]}},
    axes: [{space: 70},
      {size: 40, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000],
        values: (u, vals) => vals.map(count)}],
  };
}

// draws or updates one chart; a chart the user zoomed into keeps its zoom
function drawChart(id, series, data, top) {
  const holder = $(id);
  const key = series.map(s => s.label).join('|');
  let entry = charts[id];
  if (!entry || entry.key !== key) {
    if (entry) entry.plot.destroy();
    const width = Math.max(200, Math.floor(holder.getBoundingClientRect().width));
    entry = charts[id] = {key: key, full: null,
      plot: new uPlot(chartOptions(width, series, top), data, holder)};
    new ResizeObserver(() => {
      const w = Math.max(200, Math.floor(holder.getBoundingClientRect().width));
      if (Math.abs(w - entry.plot.width) > 1) entry.plot.setSize({width: w, height: 200});
    }).observe(holder);
  } else {
    const x = entry.plot.scales.x;
    const zoomed = entry.full !== null && x.min !== null
      && (x.min > entry.full[0] + 0.5 || x.max < entry.full[1] - 0.5);
    entry.plot.setData(data, !zoomed);
  }
  const xs = data[0];
  entry.full = xs.length ? [xs[0], xs[xs.length - 1]] : null;
  const first = data[1].filter(v => v !== null);
  holder.dataset.points = String(xs.length);
  holder.dataset.gaps = String(data[1].filter(v => v === null).length);
  holder.dataset.last = first.length ? String(first[first.length - 1]) : '';
}

function rangeText(minutes) {
  return minutes < 60 ? 'last ' + minutes + ' min' : minutes === 60 ? 'last hour'
    : minutes < 1440 ? 'last ' + minutes / 60 + ' h' : 'last ' + minutes / 1440 + ' days';
}

function drawTimeline(timeline, total, minutes) {
  const down = timeline.down || [];
  const data = withGaps(timeline.times, [timeline.busy_gpus, timeline.times.map(() => total),
    timeline.pending, timeline.running], down, timeline.first_up);
  drawChart('chart-busy', [
    {label: 'busy GPUs', colour: '#2f6fde', fill: '#2f6fde22'},
    {label: 'GPUs in the cluster', colour: '#98a2b3', dash: [4, 4]}],
  [data[0], data[1], data[2]], total);
  drawChart('chart-jobs', [
    {label: 'pending jobs', colour: '#d97706'}, {label: 'running jobs', colour: '#059669'}],
  [data[0], data[3], data[4]], 1);
  $('caption-busy').textContent = 'Busy GPUs, ' + rangeText(minutes);
  $('caption-jobs').textContent = 'Pending and running jobs, ' + rangeText(minutes);
  const note = $('down-note');
  note.hidden = down.length === 0;
  note.textContent = down.length === 0 ? '' : 'The service was down ' + down.map(
    ([a, b]) => 'from ' + stamp(a) + ' to ' + stamp(b) + ' (' + span(b - a) + ')').join(', ')
    + ': the charts leave ' + (down.length === 1 ? 'that period' : 'those periods') + ' blank.';
}
