// The simulator report's charts: uPlot (inlined above this script) draws the data
// that ilucid/sim/report.py computed and put in <script id="report-data">.
// Each policy keeps its colour (Okabe-Ito; the default profile black and thicker).
// A chart over time with many policies is shown as small multiples (one small chart
// per policy, one shared y scale, the default profile as a grey reference line); a
// switch above it overlays them all in one chart instead.
'use strict';
(function () {
  const data = JSON.parse(document.getElementById('report-data').textContent);
  // log-scale ticks people read at a glance: 1 s, 10 s, 1 min, 10 min, 1 h, 1 d, 10 d...
  const LOG_TICKS = [1, 10, 60, 600, 3600, 86400, 864000, 8640000, 86400000];
  // the ratio axis's ticks (actual against predicted): a tenth to ten times
  const RATIO_TICKS = [0.01, 0.1, 0.25, 0.5, 1, 2, 4, 10, 100];
  // linear time-axis steps, from a minute to a year
  const TIME_STEPS = [60, 600, 3600, 6 * 3600, 12 * 3600, 86400, 2 * 86400, 7 * 86400,
    30 * 86400, 90 * 86400, 365 * 86400];
  const HEIGHT = 280;
  const SMALL_HEIGHT = 150;
  const LABEL_GAP = 14;  // least px between two axis labels
  const REFERENCE = '#b0b0b0';  // the default profile's line behind each small chart
  // with more policies than this, a chart over time starts as small multiples
  const OVERLAID_MAX = 3;

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
  function ratio(value) {
    if (value === null || value === undefined || Number.isNaN(value)) return '-';
    return '\u00d7' + (value >= 10 ? Math.round(value) : +value.toPrecision(2));
  }
  // how a chart's x values read: a duration, or a ratio (x_unit "ratio")
  function xText(chart) {
    return chart.x_unit === 'ratio' ? ratio : duration;
  }
  function percent(value) {
    return value === null || value === undefined ? '-' : (value * 100).toFixed(1) + '%';
  }
  function count(value) {
    if (value === null || value === undefined) return '-';
    return Number.isInteger(value) ? String(value) : value.toFixed(1);
  }

  const measurer = document.createElement('canvas').getContext('2d');
  function textWidth(text, font) {
    measurer.font = font;
    return measurer.measureText(text).width;
  }

  // the log axis's ticks, as many as fit: from the left, a tick is kept only when its
  // label clears the last kept one's (a 420 px chart keeps 1 s, 1 min, 1 h, 1 d)
  function logSplits(u, axisIndex, min, max, chart) {
    const text = xText(chart);
    const ticks = (chart.x_unit === 'ratio' ? RATIO_TICKS : LOG_TICKS)
      .filter(t => t >= min * 0.999 && t <= max * 1.001);
    if (ticks.length < 2) return [min, max];
    const pixels = uPlot.pxRatio || 1;
    const axis = u.axes[axisIndex];
    const font = axis && axis.font ? axis.font[0] : '12px system-ui';
    const plotWidth = u.bbox && u.bbox.width > 0 ? u.bbox.width / pixels : u.width - 70;
    const span = Math.log(max) - Math.log(min);
    const at = t => (Math.log(t) - Math.log(min)) / span * plotWidth;
    const half = t => textWidth(text(t), font) / pixels / 2;
    const kept = [];
    for (const t of ticks) {
      const last = kept[kept.length - 1];
      if (last === undefined || at(t) - at(last) >= half(last) + half(t) + LABEL_GAP) kept.push(t);
    }
    return kept;
  }

  function seriesOf(chart, i, reference) {
    const show = chart.kind === 'cdf' ? percent : count;
    return {label: data.policies[i] + (reference ? ' (default)' : ''),
      stroke: reference ? REFERENCE : data.colors[i],
      width: reference ? 1.2 : data.widths[i], dash: reference ? [] : data.dashes[i],
      spanGaps: false, value: (u, v) => show(v)};
  }

  function options(chart, width, height, shown, sync) {
    const cdf = chart.kind === 'cdf';
    const text = xText(chart);
    const series = [{label: chart.x_unit === 'ratio' ? 'actual / predicted'
      : (cdf ? 'time' : 'since start'), value: (u, v) => text(v)}];
    for (const [i, reference] of shown) series.push(seriesOf(chart, i, reference));
    const top = Math.max(1, ...chart.ys.flat().filter(v => v !== null)) * 1.05;
    return {
      width: width, height: height, series: series,
      legend: {live: true},
      cursor: {drag: {x: true, y: false}, sync: sync ? {key: sync} : undefined},
      scales: {
        x: cdf ? {time: false, distr: 3, log: 10} : {time: false},
        y: cdf ? {range: [0, 1]} : {range: () => [0, top]},
      },
      axes: [
        {label: height === HEIGHT ? chart.x_label : undefined, space: 56,
          values: (u, vals) => vals.map(text),
          splits: cdf ? (u, i, min, max) => logSplits(u, i, min, max, chart) : undefined,
          incrs: cdf ? undefined : TIME_STEPS,
          // every chosen log tick gets its label (uPlot's default keeps only 1, 10, 100...)
          filter: cdf ? (u, splits) => splits : undefined},
        {label: height === HEIGHT ? chart.y_label : undefined, size: 56,
          values: (u, vals) => vals.map(cdf ? v => Math.round(v * 100) + '%' : count)},
      ],
    };
  }

  function widthOf(node) {
    return Math.max(200, Math.floor(node.getBoundingClientRect().width));
  }

  const holder = document.getElementById('charts');
  const plots = [];  // {plot, box, chart, policy}: every chart drawn now

  function draw(box, chart, index, shown, height, policy) {
    const sync = policy === null ? undefined : 'time-' + index;
    const plot = new uPlot(options(chart, widthOf(box), height, shown, sync),
      [chart.x, ...shown.map(([i]) => chart.ys[i])], box);
    plots.push({plot: plot, box: box, chart: index, policy: policy});
  }

  function overlaid(body, chart, index) {
    const box = document.createElement('div');
    body.append(box);
    draw(box, chart, index, data.policies.map((name, i) => [i, false]), HEIGHT, null);
  }

  // one small chart per policy, the default profile behind each other one in grey
  function multiples(body, chart, index) {
    const grid = document.createElement('div');
    grid.className = 'multiples';
    body.append(grid);
    const reference = data.policies.indexOf(data.default);
    data.policies.forEach((name, i) => {
      const panel = document.createElement('div');
      panel.className = 'multiple';
      panel.dataset.policy = name;
      const title = document.createElement('div');
      title.className = 'multiple-title';
      title.textContent = name;
      title.style.borderColor = data.colors[i];
      const box = document.createElement('div');
      panel.append(title, box);
      grid.append(panel);
      const shown = reference >= 0 && reference !== i ? [[reference, true], [i, false]]
        : [[i, false]];
      draw(box, chart, index, shown, SMALL_HEIGHT, name);
    });
  }

  function show(figure, chart, index, view) {
    for (let k = plots.length - 1; k >= 0; k--) {
      if (plots[k].chart === index) { plots[k].plot.destroy(); plots.splice(k, 1); }
    }
    figure.dataset.view = view;
    for (const button of figure.querySelectorAll('.view-switch button')) {
      button.setAttribute('aria-pressed', String(button.dataset.view === view));
    }
    const body = figure.querySelector('.chart-body');
    body.replaceChildren();
    (view === 'multiples' ? multiples : overlaid)(body, chart, index);
  }

  function viewSwitch(figure, chart, index) {
    const group = document.createElement('div');
    group.className = 'view-switch';
    group.setAttribute('role', 'group');
    group.setAttribute('aria-label', 'how to show the policies');
    for (const [view, words] of [['multiples', 'one chart per policy'],
      ['overlaid', 'all in one chart']]) {
      const button = document.createElement('button');
      button.type = 'button';
      button.dataset.view = view;
      button.textContent = words;
      button.addEventListener('click', () => show(figure, chart, index, view));
      group.append(button);
    }
    return group;
  }

  data.charts.forEach((chart, index) => {
    const figure = document.createElement('figure');
    figure.dataset.chart = String(index);
    const caption = document.createElement('figcaption');
    caption.textContent = chart.title;
    const body = document.createElement('div');
    body.className = 'chart-body';
    figure.append(caption);
    if (chart.kind === 'time' && data.policies.length > 1) {
      figure.append(viewSwitch(figure, chart, index));
    }
    figure.append(body);
    holder.append(figure);
    const many = chart.kind === 'time' && data.policies.length > OVERLAID_MAX;
    show(figure, chart, index, many ? 'multiples' : 'overlaid');
  });
  let pending = 0;
  window.addEventListener('resize', () => {
    cancelAnimationFrame(pending);
    pending = requestAnimationFrame(() => {
      for (const {plot, box} of plots) {
        plot.setSize({width: widthOf(box), height: plot.height});
      }
    });
  });
  document.body.dataset.ready = 'charts';
})();
