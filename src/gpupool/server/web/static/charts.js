/* Small SVG charts drawn in the page (no chart library): lines over time and bars. */
'use strict';

const Charts = (() => {
  const NS = 'http://www.w3.org/2000/svg';
  function s(tag, attrs, ...children) {
    const node = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) node.setAttribute(k, v);
    for (const c of children) if (c) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return node;
  }

  function legend(series) {
    return GP.el('div', { class: 'legend' }, series.map((x, i) =>
      GP.el('span', {}, GP.el('i', { class: 's' + (x.cls ?? i), 'aria-hidden': 'true' }), x.label)));
  }

  /* series: [{label, points: [{x: epoch, y: number|null}]}]; y from 0 to yMax. */
  function line(series, { yMax = 100, ySuffix = '%', title = '' } = {}) {
    const W = 640, H = 220, L = 44, R = 10, T = 10, B = 26;
    const xs = series.flatMap((x) => x.points.map((p) => p.x));
    const x0 = Math.min(...xs), x1 = Math.max(...xs);
    const top = Math.max(yMax, ...series.flatMap((x) => x.points.map((p) => p.y || 0)));
    const X = (x) => L + ((x - x0) / Math.max(1, x1 - x0)) * (W - L - R);
    const Y = (y) => T + (1 - y / top) * (H - T - B);
    const svg = s('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': title });
    for (let i = 0; i <= 4; i++) {
      const v = (top * i) / 4;
      svg.append(s('line', { class: 'grid', x1: L, x2: W - R, y1: Y(v), y2: Y(v) }));
      svg.append(s('text', { x: L - 6, y: Y(v) + 4, 'text-anchor': 'end' }, GP.fmt.num(v) + ySuffix));
    }
    for (let i = 0; i <= 4; i++) {
      const v = x0 + ((x1 - x0) * i) / 4;
      svg.append(s('text', { x: X(v), y: H - 8, 'text-anchor': i === 0 ? 'start' : i === 4 ? 'end' : 'middle' }, GP.fmt.hour(v)));
    }
    svg.append(s('line', { class: 'axis', x1: L, x2: W - R, y1: Y(0), y2: Y(0) }));
    series.forEach((x, i) => {
      let d = '', pen = false;
      for (const p of x.points) {
        if (p.y === null || p.y === undefined) { pen = false; continue; }
        d += (pen ? 'L' : 'M') + X(p.x).toFixed(1) + ' ' + Y(p.y).toFixed(1);
        pen = true;
      }
      if (d) svg.append(s('path', { class: 'line s' + (x.cls ?? i), d }));
      for (const p of x.points) {  // dots: a lone sample still shows
        if (p.y !== null && p.y !== undefined) svg.append(s('circle', { class: 's' + (x.cls ?? i), cx: X(p.x).toFixed(1), cy: Y(p.y).toFixed(1), r: 2.5 }));
      }
    });
    return GP.el('figure', { class: 'chart' }, svg, legend(series));
  }

  /* rows: [{label, values: [number, ...]}] stacked horizontally; series: labels of values. */
  function bars(rows, series, { format = GP.fmt.num, title = '' } = {}) {
    const W = 640, rowH = 24, L = 130, R = 90;
    const H = rows.length * rowH + 8;
    const most = Math.max(1, ...rows.map((r) => r.values.reduce((a, b) => a + b, 0)));
    const svg = s('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': title });
    rows.forEach((r, i) => {
      const y = 4 + i * rowH;
      svg.append(s('text', { x: L - 6, y: y + 15, 'text-anchor': 'end' }, r.label));
      let x = L;
      r.values.forEach((v, j) => {
        const w = (v / most) * (W - L - R);
        if (w > 0) svg.append(s('rect', { class: 's' + j, x, y: y + 3, width: w.toFixed(1), height: rowH - 8 }));
        x += w;
      });
      svg.append(s('text', { x: x + 6, y: y + 15 }, format(r.values.reduce((a, b) => a + b, 0))));
    });
    return GP.el('figure', { class: 'chart' }, svg, series.length > 1 ? legend(series.map((label) => ({ label }))) : null);
  }

  return { line, bars };
})();
