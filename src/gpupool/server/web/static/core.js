/* gpupool dashboard core: boot data, translation, formatting per locale, the API with the
   session cookie (+ CSRF header on changes), DOM helpers, tables and live refresh.
   Plain browser JavaScript, no build step, nothing loaded from elsewhere. */
'use strict';

const GP = (() => {
  const BOOT = JSON.parse(document.getElementById('gp-boot').textContent);
  const M = BOOT.messages || {};
  const LOCALE = BOOT.lang === 'zh' ? 'zh-CN' : 'en-US';

  function t(key, vars) {
    let s = Object.prototype.hasOwnProperty.call(M, key) ? M[key] : key;
    if (vars) for (const [k, v] of Object.entries(vars)) s = s.split('{' + k + '}').join(String(v));
    return s;
  }

  const numbers = {};
  function num(n, digits = 0) {
    if (n === null || n === undefined || Number.isNaN(n)) return '–';
    const key = String(digits);
    numbers[key] = numbers[key] || new Intl.NumberFormat(LOCALE, {
      maximumFractionDigits: digits, minimumFractionDigits: digits });
    return numbers[key].format(n);
  }
  const money = new Intl.NumberFormat(LOCALE, { style: 'currency', currency: 'CNY' });
  const dates = new Intl.DateTimeFormat(LOCALE, { dateStyle: 'medium', timeStyle: 'short' });
  const hours = new Intl.DateTimeFormat(LOCALE, { month: 'numeric', day: 'numeric', hour: '2-digit', minute: '2-digit' });
  const clock = new Intl.DateTimeFormat(LOCALE, { month: 'numeric', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit', timeZoneName: 'short' });
  const fmt = {
    num,
    pct: (n) => (n === null || n === undefined ? '–' : num(n, 1) + '%'),
    cny: (fen) => (fen === null || fen === undefined ? '–' : money.format(fen / 100)),
    yuan: (text) => (text === null || text === undefined ? '–' : money.format(Number(text))),
    date: (epoch) => (epoch ? dates.format(new Date(epoch * 1000)) : '–'),
    iso: (text) => (text ? dates.format(new Date(text)) : '–'),
    hour: (epoch) => hours.format(new Date(epoch * 1000)),
    asOf: (epoch) => (epoch ? clock.format(new Date(epoch * 1000)) : '–'),  // to the second, with the zone
    gib: (mib) => (mib === null || mib === undefined ? '–' : num(mib / 1024, 1) + ' GiB'),
    dur(seconds) {
      if (seconds === null || seconds === undefined) return '–';
      const s = Math.max(0, Math.round(seconds));
      if (s < 60) return t('unit.s', { n: s });
      if (s < 3600) return t('unit.min', { n: Math.floor(s / 60) });
      if (s < 86400) return t('unit.h_min', { h: Math.floor(s / 3600), m: Math.floor((s % 3600) / 60) });
      return t('unit.d_h', { d: Math.floor(s / 86400), h: Math.floor((s % 86400) / 3600) });
    },
  };

  class ApiError extends Error {
    constructor(status, detail, field) { super(detail); this.status = status; this.field = field; }
  }

  async function api(path, { method = 'GET', body, text = false } = {}) {
    const headers = { Accept: text ? 'text/plain' : 'application/json' };
    if (method !== 'GET') headers['X-CSRF-Token'] = BOOT.csrf;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    let resp;
    try {
      resp = await fetch(path, { method, headers, credentials: 'same-origin',
        body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (e) {
      throw new ApiError(0, t('state.offline'));
    }
    if (resp.status === 401) {
      window.location.assign('/login?next=' + encodeURIComponent(window.location.pathname));
      throw new ApiError(401, t('state.session_over'));
    }
    if (!resp.ok) {
      let detail = resp.statusText, field = null;
      try { const j = await resp.json(); detail = j.detail || detail; field = j.field; } catch (e) { /* not JSON */ }
      throw new ApiError(resp.status, typeof detail === 'string' ? detail : JSON.stringify(detail), field);
    }
    return text ? resp.text() : resp.json();
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') node.className = v;
      else if (k === 'text') node.textContent = v;
      else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? '' : v);
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  function panel(titleKey, ...children) {
    const id = 'h-' + titleKey.replace(/[^a-z0-9]+/gi, '-');
    return el('section', { class: 'panel', 'aria-labelledby': id }, el('h2', { id, text: t(titleKey) }), ...children);
  }

  function kpi(labelKey, value, sub) {
    return el('div', { class: 'kpi', 'data-kpi': labelKey },
      el('div', { class: 'label', text: t(labelKey) }),
      el('div', { class: 'value', text: value }),
      sub ? el('div', { class: 'sub', text: sub }) : null);
  }

  /* columns: [{key, label (message key), num, render(row) -> text|Node}] */
  function table(columns, rows, emptyKey = 'state.empty') {
    if (!rows.length) return el('p', { class: 'state empty', text: t(emptyKey) });
    const head = el('tr', {}, columns.map((c) => el('th', { scope: 'col', class: c.num ? 'num' : null, text: t(c.label) })));
    const body = rows.map((r) => el('tr', {}, columns.map((c) => {
      const v = c.render ? c.render(r) : r[c.key];
      return el('td', { class: c.num ? 'num' : c.cls || null, 'data-col': c.key }, v === null || v === undefined ? '–' : v);
    })));
    return el('table', {}, el('thead', {}, head), el('tbody', {}, body));
  }

  function badge(text, kind) { return el('span', { class: 'badge ' + (kind || 'muted'), text }); }

  function stateBadge(state) {
    const kind = { running: 'ok', scheduled: 'ok', succeeded: 'ok', pending: 'warn', failed: 'bad',
      cancelled: 'muted', preempted: 'warn', ready: 'ok', lost: 'bad', fenced: 'bad', firing: 'bad',
      resolved: 'ok', allocated: 'ok', free: 'ok', unavailable: 'bad' }[state];
    return badge(t('state.' + state), kind);
  }

  function status(kind, text) { return el('p', { class: 'state ' + kind, role: kind === 'error' ? 'alert' : null, text }); }

  const content = () => document.getElementById('gp-content');

  function mount(...nodes) { content().replaceChildren(...nodes); }

  /* Run load() now and every `ms` while the tab is visible; errors show, then retry. */
  function live(load, ms = 5000) {
    const stamp = document.getElementById('gp-live');
    let timer = null, busy = false;
    async function tick() {
      if (busy) return;
      busy = true;
      try {
        await load();
        stamp.textContent = t('state.updated', { time: new Date().toLocaleTimeString(LOCALE) });
        stamp.classList.remove('error');
      } catch (e) {
        stamp.textContent = t('state.load_failed', { why: e.message });
        stamp.classList.add('error');
        if (content().querySelector('.state.loading')) mount(status('error', t('state.load_failed', { why: e.message })));
      } finally { busy = false; }
    }
    tick();
    timer = setInterval(() => { if (!document.hidden) tick(); }, ms);
    document.addEventListener('visibilitychange', () => { if (!document.hidden) tick(); });
    return { refresh: tick, stop: () => clearInterval(timer) };
  }

  /* Keep a node in place across refreshes (so inputs keep focus): build once, then update. */
  function slot(id) {
    let node = document.getElementById(id);
    if (!node) node = el('div', { id });
    return node;
  }

  function can(...roles) { return roles.includes(BOOT.role); }

  /* Where a job runs: node[devices] per node, '–' when it holds nothing. */
  function placement(job) {
    if (!job.allocation) return '–';
    return job.allocation.nodes.map((n) => `${n.node}[${n.devices.map((d) => d.device).join(',')}]`).join(' ');
  }

  /* A pending job's estimated start (the leader's plan): when, where, and from what. */
  function expectedStart(job) {
    const e = job.estimate;
    if (!e) return '–';
    if (e.start === null) return t('jobs.not_in_plan');
    return t('jobs.expected_at', { time: fmt.asOf(e.start), nodes: e.nodes.join(',') || '–', basis: e.basis });
  }

  /* Cancel the job shown (an array's first task alone, not its array: ?task=) after the user
     confirms; any refusal is shown; then ``after()``. */
  async function cancelJob(job, after) {
    if (!window.confirm(t('jobs.confirm_cancel', { id: job.id }))) return;
    const task = job.array_job === job.id ? `?task=${job.array_index}` : '';
    try { await api(`/api/v1/jobs/${job.id}/cancel${task}`, { method: 'POST' }); } catch (e) { window.alert(e.message); }
    after();
  }

  function wireHeader() {
    const lang = document.getElementById('gp-lang');
    if (lang) lang.addEventListener('click', () => {
      document.cookie = 'gpupool_lang=' + lang.dataset.lang + '; path=/; max-age=31536000; samesite=strict';
      window.location.reload();
    });
    const out = document.getElementById('gp-logout');
    if (out) out.addEventListener('click', async () => {
      try { await api('/ui/logout', { method: 'POST' }); } finally { window.location.assign('/login'); }
    });
    if (BOOT.page === 'forbidden') mount(status('error', t('state.forbidden')));
  }
  wireHeader();

  return { BOOT, t, fmt, api, ApiError, el, panel, kpi, table, badge, stateBadge, status, mount, live, slot, can, placement, expectedStart, cancelJob, LOCALE };
})();
