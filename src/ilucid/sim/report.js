// The simulator report's charts: uPlot (inlined above this script) draws the data
// that ilucid/sim/report.py computed and put in <script id="report-data">.
'use strict';
(function () {
  const data = JSON.parse(document.getElementById('report-data').textContent);
  // log-scale ticks people read at a glance: 1 s, 10 s, 1 min, 10 min, 1 h, 1 d, 10 d...
  const LOG_TICKS = [1, 10, 60, 600, 3600, 86400, 864000, 8640000, 86400000];
  // linear time-axis steps, from a minute to a year
  const TIME_STEPS = [60, 600, 3600, 6 * 3600, 86400, 7 * 86400, 30 * 86400, 90 * 86400,
    365 * 86400];
  const HEIGHT = 280;

  function duration(value) {
    if (value === null || value === undefined || Number.isNaN(value)) return '-';
    for (const [unit, size] of [['d', 86400], ['h', 3600], ['min', 60]]) {
      if (value >= size) {
        const amount = value / size;
        return (Number.isInteger(amount) ? amount : amount.toFixed(1)) + ' ' + unit;
      }
    }
    return Math.round(value) + ' s';
  }
  function percent(value) {
    return value === null || value === undefined ? '-' : (value * 100).toFixed(1) + '%';
  }
  function count(value) {
    if (value === null || value === undefined) return '-';
    return Number.isInteger(value) ? String(value) : value.toFixed(1);
  }

  function logSplits(u, axis, min, max) {
    const ticks = LOG_TICKS.filter(t => t >= min * 0.999 && t <= max * 1.001);
    return ticks.length >= 2 ? ticks : [min, max];
  }

  function options(chart, width) {
    const cdf = chart.kind === 'cdf';
    const show = cdf ? percent : count;
    const series = [{label: cdf ? 'time' : 'since start', value: (u, v) => duration(v)}];
    data.policies.forEach((name, i) => series.push({
      label: name, stroke: data.colors[i], width: 1.6, spanGaps: false,
      value: (u, v) => show(v)}));
    return {
      width: width, height: HEIGHT, series: series,
      legend: {live: true},
      cursor: {drag: {x: true, y: false}},
      scales: {
        x: cdf ? {time: false, distr: 3, log: 10} : {time: false},
        y: cdf ? {range: [0, 1]} : {range: (u, min, max) => [0, Math.max(1, max) * 1.05]},
      },
      axes: [
        {label: chart.x_label, space: 56, values: (u, vals) => vals.map(duration),
          splits: cdf ? logSplits : undefined, incrs: cdf ? undefined : TIME_STEPS,
          // every chosen log tick gets its label (uPlot's default keeps only 1, 10, 100...)
          filter: cdf ? (u, splits) => splits : undefined},
        {label: chart.y_label, size: 56,
          values: (u, vals) => vals.map(cdf ? v => Math.round(v * 100) + '%' : count)},
      ],
    };
  }

  function widthOf(figure) {
    return Math.max(200, Math.floor(figure.getBoundingClientRect().width));
  }

  const holder = document.getElementById('charts');
  const plots = [];
  data.charts.forEach((chart, index) => {
    const figure = document.createElement('figure');
    figure.dataset.chart = String(index);
    const caption = document.createElement('figcaption');
    caption.textContent = chart.title;
    const box = document.createElement('div');
    figure.append(caption, box);
    holder.append(figure);
    const plot = new uPlot(options(chart, widthOf(figure)), [chart.x, ...chart.ys], box);
    plots.push([plot, figure]);
  });
  let pending = 0;
  window.addEventListener('resize', () => {
    cancelAnimationFrame(pending);
    pending = requestAnimationFrame(() => {
      for (const [plot, figure] of plots) plot.setSize({width: widthOf(figure), height: HEIGHT});
    });
  });
  document.body.dataset.ready = 'charts';
})();
