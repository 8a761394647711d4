/* Overview: cards by model, utilisation now and over 24 h / 7 d, queue, alerts, month. */
'use strict';
(() => {
  const { t, fmt, api, el, panel, kpi, table, stateBadge, mount } = GP;
  let window_ = '24h';
  let historyBox = null;

  function kpis(o) {
    const u = o.utilisation, q = o.queue, m = o.month;
    const free = o.models.reduce((a, r) => a + r.free, 0);
    return el('div', { class: 'kpis' },
      kpi('overview.cards', fmt.num(u.cards)),
      kpi('overview.allocated', fmt.num(u.allocated), fmt.pct(u.allocated_pct)),
      kpi('overview.free', fmt.num(free)),
      kpi('overview.used', fmt.pct(u.used_pct), t('overview.reporting', { n: fmt.num(u.reporting) })),
      kpi('overview.pending', fmt.num(q.pending), q.oldest_wait_s === null ? null : t('overview.oldest', { d: fmt.dur(q.oldest_wait_s) })),
      kpi('overview.running', fmt.num(q.running)),
      kpi('overview.alerts', fmt.num(o.alerts_firing)),
      m.cost_fen !== undefined ? costKpi(m) : kpi('overview.card_hours_month', fmt.num(m.card_hours, 1), m.month));
  }

  /* The month's cost is every team's invoice in its own mode; the card-hours beside it are
     priced at list prices, so the two figures say what each sums rather than pretend to multiply. */
  function costKpi(m) {
    const box = kpi('overview.cost', fmt.cny(m.cost_fen),
      t('overview.card_hours_list', { n: fmt.num(m.card_hours, 1), month: m.month, list: fmt.cny(m.list_cost_fen) }));
    const modes = Object.entries(m.cost_by_mode || {}).map(([mode, cny]) => `${t('billing.mode_short_' + mode)} ${fmt.yuan(cny)}`).join(' · ');
    box.append(el('div', { class: 'sub', id: 'cost-note', title: t('overview.cost_note_help'), text: t('overview.cost_note', { modes: modes || '–' }) }),
      el('div', { class: 'sub', id: 'cost-as-of', text: t('overview.cost_as_of', { time: fmt.asOf(m.cost_as_of) }) }));
    return box;
  }

  function models(o) {
    return table([
      { key: 'model', label: 'col.model' },
      { key: 'total', label: 'col.total', num: true, render: (r) => fmt.num(r.total) },
      { key: 'allocated', label: 'col.allocated', num: true, render: (r) => fmt.num(r.allocated) },
      { key: 'free', label: 'col.free', num: true, render: (r) => fmt.num(r.free) },
      { key: 'unavailable', label: 'col.unavailable', num: true, render: (r) => fmt.num(r.unavailable) },
      { key: 'whole', label: 'col.whole', num: true, render: (r) => fmt.num(r.whole) },
      { key: 'mig', label: 'col.mig', num: true, render: (r) => fmt.num(r.mig) },
      { key: 'share', label: 'col.share', num: true, render: (r) => fmt.num(r.share) },
    ], o.models, 'state.no_nodes');
  }

  async function drawHistory() {
    const h = await api('/api/v1/overview/history?window=' + window_);
    const pts = (k) => h.points.map((p) => ({ x: p.time, y: p[k] }));
    const any = h.points.some((p) => p.allocated_pct !== null);
    const chart = any
      ? Charts.line([{ label: t('overview.allocated_pct'), points: pts('allocated_pct') },
        { label: t('overview.used_pct'), points: pts('used_pct') }], { title: t('overview.history') })
      : GP.status('empty', t('overview.no_history'));
    historyBox.replaceChildren(chart);
  }

  function historyPanel() {
    historyBox = el('div', { id: 'gp-history' });
    const tabs = el('div', { class: 'tabs', role: 'group', 'aria-label': t('overview.window') },
      ['24h', '7d'].map((w) => el('button', { type: 'button', class: 'secondary', 'aria-pressed': String(w === window_),
        onclick: (e) => { window_ = w; tabs.querySelectorAll('button').forEach((b) => b.setAttribute('aria-pressed', String(b === e.target))); drawHistory(); },
        text: t('overview.window_' + w) })));
    return panel('overview.history', tabs, historyBox);
  }

  function alertsTable(alerts) {
    return table([
      { key: 'state', label: 'col.state', render: (a) => stateBadge(a.state) },
      { key: 'kind', label: 'col.kind', render: (a) => t('alert.' + a.kind) },
      { key: 'subject', label: 'col.subject' },
      { key: 'started_at', label: 'col.since', render: (a) => fmt.iso(a.started_at) },
    ], alerts.slice(0, 8), 'state.no_alerts');
  }

  let built = false, kpiBox, modelBox, alertBox;
  async function load() {
    const [o, alerts] = await Promise.all([api('/api/v1/overview'), api('/api/v1/alerts?limit=8')]);
    if (!built) {
      kpiBox = el('div'); modelBox = el('div'); alertBox = el('div');
      mount(kpiBox, el('div', { class: 'grid' }, panel('overview.models', modelBox), panel('overview.active_alerts', alertBox)), historyPanel());
      built = true;
      drawHistory();
    }
    kpiBox.replaceChildren(kpis(o));
    modelBox.replaceChildren(models(o));
    alertBox.replaceChildren(alertsTable(alerts));
  }
  GP.live(load, 5000);
})();
