/* Billing: invoices per month and tenant, usage by model and team, rental plans, prices. */
'use strict';
(() => {
  const { t, fmt, api, el, panel, table, badge, mount, can, BOOT } = GP;
  let month = null;
  let built = false, invoiceBox, issuedBox, usageBox, plansBox, pricesBox, monthInput;
  const issuer = can('admin', 'finance') && !BOOT.tenant;  // company-wide: may issue the month

  async function invoices() {
    const tenants = (await api('/api/v1/tenants?limit=1000')).items;
    const all = await Promise.all(tenants.map((x) =>
      api(`/api/v1/billing/invoice?tenant=${encodeURIComponent(x.name)}&month=${month}`).catch((e) => ({ tenant: x.name, error: e.message }))));
    const link = (inv, format, text) => el('a', { href: `/api/v1/billing/invoice?tenant=${encodeURIComponent(inv.tenant)}&month=${month}&format=${format}&lang=${BOOT.lang}`, text });
    const total = all.reduce((a, inv) => a + (inv.total_fen || 0), 0);
    const asOf = Math.min(...all.filter((i) => i.as_of).map((i) => i.as_of));  // drafts count to it
    return el('div', {},
      table([
        { key: 'tenant', label: 'col.tenant' },
        { key: 'kind', label: 'col.kind', render: (i) => i.error ? '–' : t('billing.kind_' + i.kind) },
        { key: 'mode', label: 'col.mode', render: (i) => i.error ? '–' : t('billing.mode_' + i.mode) },
        { key: 'lines', label: 'col.lines', num: true, render: (i) => i.error ? '–' : fmt.num(i.lines.length) },
        { key: 'total', label: 'col.total_cny', num: true, render: (i) => i.error ? i.error : fmt.cny(i.total_fen) },
        { key: 'draft', label: 'col.status', render: (i) => i.error ? '–' : i.draft ? badge(t('billing.so_far'), 'warn') : badge(t('billing.closed'), 'ok') },
        { key: 'files', label: 'col.files', render: (i) => i.error ? '–' : el('span', {}, link(i, 'html', t('billing.printable')), ' · ', link(i, 'pdf', 'PDF'), ' · ', link(i, 'csv', 'CSV')) },
      ], all, 'state.no_tenants'),
      el('p', { class: 'state', id: 'billing-total', text: t('billing.sum', { total: fmt.cny(total) }) }),
      Number.isFinite(asOf) ? el('p', { class: 'state', id: 'billing-as-of', text: t('billing.as_of', { time: fmt.asOf(asOf) }) }) : '');
  }

  /* Month-end ("月底一键出账单"): every team's invoice, drafts then final and numbered. */
  async function issued() {
    const list = await api(`/api/v1/billing/invoices?month=${month}`);
    const doc = (i, format, text) => el('a', { href: `/api/v1/billing/invoices/${i.id}?format=${format}&lang=${BOOT.lang}`, text });
    const msg = el('p', { class: 'state', id: 'issue-result', role: 'status' });
    const run = (final) => async () => {
      if (final && !window.confirm(t('billing.finalise_confirm', { month }))) return;
      try {
        const out = await api('/api/v1/billing/invoices/issue', { method: 'POST', body: { month, final } });
        msg.textContent = out.length ? t(final ? 'billing.finalised_n' : 'billing.drafted_n', { n: out.filter((x) => x.changed).length })
          : t('billing.nothing', { month });
        const again = await issued(); issuedBox.replaceChildren(again);
        issuedBox.querySelector('#issue-result').textContent = msg.textContent;
      } catch (err) { msg.textContent = t('jobs.refused', { why: err.message }); }
    };
    const buttons = issuer ? el('div', { class: 'toolbar' },
      el('button', { type: 'button', id: 'issue-drafts', class: 'secondary', text: t('billing.issue_drafts'), onclick: run(false) }),
      el('button', { type: 'button', id: 'issue-final', text: t('billing.issue_final'), onclick: run(true) })) : '';
    return el('div', {}, buttons, msg,
      table([
        { key: 'number', label: 'col.number', render: (i) => i.number || '–' },
        { key: 'tenant', label: 'col.tenant' },
        { key: 'total', label: 'col.total_cny', num: true, render: (i) => fmt.yuan(i.total) },
        { key: 'state', label: 'col.status', render: (i) => i.state === 'final' ? badge(t('billing.final'), 'ok') : badge(t('billing.draft'), 'warn') },
        { key: 'files', label: 'col.files', render: (i) => el('span', {}, doc(i, 'pdf', 'PDF'), ' · ', doc(i, 'html', t('billing.printable')), ' · ', doc(i, 'csv', 'CSV')) },
      ], list, 'billing.none_issued'));
  }

  async function usage() {
    const rep = await api(`/api/v1/billing/reports/usage?month=${month}`);
    const models = [...new Set(rep.items.map((r) => r.model))].sort();
    const per = {};
    for (const r of rep.items) {
      per[r.tenant] = per[r.tenant] || models.map(() => 0);
      per[r.tenant][models.indexOf(r.model)] += r.card_hours;
    }
    const rows = Object.entries(per).map(([label, values]) => ({ label, values }));
    const chart = rows.length ? Charts.bars(rows, models, { format: (v) => t('billing.card_hours_n', { n: fmt.num(v, 1) }), title: t('billing.usage') })
      : GP.status('empty', t('teams.no_usage'));
    return el('div', {}, chart, el('p', { class: 'state', id: 'usage-as-of', text: t('billing.as_of', { time: fmt.asOf(rep.as_of) }) }));
  }

  async function plans() {
    const list = await api('/api/v1/billing/plans');
    return table([
      { key: 'id', label: 'col.id' }, { key: 'tenant', label: 'col.tenant' }, { key: 'model', label: 'col.model' },
      { key: 'cards', label: 'col.cards', num: true }, { key: 'plan', label: 'col.plan', render: (p) => t('billing.plan_' + p.plan) },
      { key: 'start', label: 'col.start', render: (p) => fmt.iso(p.start) }, { key: 'end', label: 'col.end', render: (p) => fmt.iso(p.end) },
      { key: 'total', label: 'col.total_cny', num: true, render: (p) => fmt.yuan(p.total) },
      { key: 'active', label: 'col.status', render: (p) => p.cancelled_at ? badge(t('billing.cancelled'), 'muted') : p.active ? badge(t('billing.active'), 'ok') : badge(t('billing.inactive'), 'muted') },
    ], list, 'billing.no_plans');
  }

  async function prices() {
    const list = await api('/api/v1/billing/prices');
    return table([
      { key: 'model', label: 'col.model' },
      { key: 'monthly', label: 'col.monthly', num: true, render: (p) => fmt.yuan(p.monthly) },
      { key: 'hourly', label: 'col.hourly', num: true, render: (p) => fmt.yuan(p.hourly) },
      { key: 'effective_from', label: 'col.from', render: (p) => (p.source === 'list' ? t('billing.always') : fmt.iso(p.effective_from)) },
      { key: 'source', label: 'col.source', render: (p) => t('billing.source_' + p.source) },
    ], list, 'state.empty');
  }

  async function load() {
    if (!built) {
      month = (await api('/api/v1/overview')).month.month;
      monthInput = el('input', { type: 'month', id: 'billing-month', value: month,
        onchange: (e) => { if (/^\d{4}-\d{2}$/.test(e.target.value)) { month = e.target.value; load(); } } });
      invoiceBox = el('div'); issuedBox = el('div'); usageBox = el('div'); plansBox = el('div'); pricesBox = el('div');
      mount(el('div', { class: 'toolbar' }, el('div', { class: 'field' }, el('label', { for: 'billing-month', text: t('col.month') }), monthInput)),
        panel('billing.invoices', invoiceBox), panel('billing.issued', issuedBox), panel('billing.usage', usageBox),
        el('div', { class: 'grid' }, panel('billing.plans', plansBox), panel('billing.prices', pricesBox)));
      built = true;
    }
    const [a, b, c, d, e] = await Promise.all([invoices(), usage(), plans(), prices(), issued()]);
    invoiceBox.replaceChildren(a); usageBox.replaceChildren(b); plansBox.replaceChildren(c); pricesBox.replaceChildren(d);
    if (!issuedBox.contains(document.activeElement)) issuedBox.replaceChildren(e);
  }
  GP.live(load, 30000);
})();
