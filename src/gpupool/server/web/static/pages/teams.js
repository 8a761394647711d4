/* Teams: the quota tree (guaranteed, borrowing and lending limits, used, borrowed, fair-share
   factor and decayed borrowed card-hours), every level where guarantees exceed a parent's
   guarantee or the pool, and usage and cost per team. */
'use strict';
(() => {
  const { t, fmt, api, el, panel, table, mount, can } = GP;
  let built = false, treeBox, overBox, usageBox, costBox, shareBox;

  function order(tenants) {
    const kids = {};
    for (const x of tenants) (kids[x.parent || ''] = kids[x.parent || ''] || []).push(x);
    const names = new Set(tenants.map((x) => x.name));
    const out = [];
    const walk = (parent, depth) => (kids[parent] || []).sort((a, b) => a.name.localeCompare(b.name))
      .forEach((x) => { out.push({ ...x, depth }); walk(x.name, depth + 1); });
    walk('', 0);
    for (const x of tenants) if (x.parent && !names.has(x.parent) && !out.includes(x)) { out.push({ ...x, depth: 0 }); walk(x.name, 1); }
    return out;
  }

  function gpu(x) { return x.quotas.find((q) => q.resource === 'gpu') || null; }

  function tree(tenants, shares) {
    const share = (x) => (shares ? shares.items.find((r) => r.tenant === x.name) || null : null);
    const limit = (v) => (v === null || v === undefined ? t('teams.unlimited') : fmt.num(v, 1));
    return table([
      { key: 'name', label: 'col.tenant', render: (x) => el('span', { class: 'indent' + Math.min(3, x.depth) }, x.name) },
      { key: 'weight', label: 'col.weight', num: true, render: (x) => fmt.num(x.weight, 1) },
      { key: 'nominal', label: 'col.guaranteed', num: true, render: (x) => gpu(x) ? fmt.num(gpu(x).nominal, 1) : '–' },
      { key: 'borrowing', label: 'col.borrowing', num: true, render: (x) => gpu(x) ? limit(gpu(x).borrowing_limit) : '–' },
      { key: 'lending', label: 'col.lending', num: true, render: (x) => gpu(x) ? limit(gpu(x).lending_limit) : '–' },
      { key: 'used', label: 'col.used', num: true, render: (x) => gpu(x) && gpu(x).used !== null ? fmt.num(gpu(x).used, 1) : '–' },
      { key: 'borrowed', label: 'col.borrowed', num: true, render: (x) => {
        const q = gpu(x); if (!q || q.used === null) return '–';
        return fmt.num(Math.max(0, q.used - q.nominal), 1);
      } },
      { key: 'fairshare', label: 'col.fairshare', num: true, render: (x) => share(x) ? fmt.num(share(x).fairshare, 2) : '–' },
      { key: 'fs_usage', label: 'col.fs_usage', num: true, render: (x) => share(x) ? fmt.num(share(x).raw_usage, 1) : '–' },
      { key: 'others', label: 'col.other_quotas', render: (x) => x.quotas.filter((q) => q.resource !== 'gpu').map((q) => `${q.resource}: ${fmt.num(q.nominal, 1)}`).join(', ') || '–' },
    ], order(tenants), 'state.no_tenants');
  }

  /* A level whose guarantees exceed what is above them, in the page's language. */
  function amount(resource, n) {
    const key = resource === 'cpu' ? 'teams.n_cores' : resource === 'gpu_mem' ? 'teams.n_mib' : 'teams.n_cards';
    return t(key, { n: fmt.num(n, Number.isInteger(n) ? 0 : 1) });
  }

  function overbooked(items) {
    if (!items.length) return null;
    const line = (o) => {
      const parts = o.members.map((m) => `${m.tenant} ${amount(o.resource, m.guarantee)}`);
      if (o.others > 0) parts.push(`${t('teams.others')} ${amount(o.resource, o.others)}`);
      const vars = { resource: o.resource, members: parts.join(' + '), total: amount(o.resource, o.total),
        limit: amount(o.resource, o.limit), over: o.over };
      return el('li', { 'data-over': o.over || '', text: t(o.over === null ? 'teams.over_pool' : 'teams.over_tenant', vars) });
    };
    return el('div', { class: 'overbooked', role: 'alert' },
      el('h3', { class: 'warn', text: t('teams.overbooked') }),
      el('ul', {}, items.map(line)),
      el('p', { class: 'sub', text: t('teams.overbooked_note') }));
  }

  async function usage() {
    const since = Math.floor(Date.now() / 1000) - 7 * 86400;
    const sum = await api('/api/v1/usage/summary?since=' + since);
    const per = {};
    for (const r of sum.items) per[r.tenant] = (per[r.tenant] || 0) + r.compute_pct_seconds / 360000;
    const data = Object.entries(per).sort((a, b) => b[1] - a[1]).map(([label, v]) => ({ label, values: [v] }));
    return data.length ? Charts.bars(data, [t('teams.card_hours_7d')], { format: (v) => fmt.num(v, 1), title: t('teams.usage') })
      : GP.status('empty', t('teams.no_usage'));
  }

  async function costs(tenants) {
    const month = (await api('/api/v1/overview')).month.month; // the billing zone's month
    const invoices = await Promise.all(tenants.map((x) => api(`/api/v1/billing/invoice?tenant=${encodeURIComponent(x.name)}&month=${month}`).catch(() => null)));
    const data = invoices.filter(Boolean).map((inv) => ({ label: inv.tenant, values: [inv.total_fen] })).sort((a, b) => b.values[0] - a.values[0]);
    const asOf = Math.min(...invoices.filter(Boolean).map((inv) => inv.as_of));
    const chart = data.length ? Charts.bars(data, [t('teams.cost_month')], { format: fmt.cny, title: t('teams.cost') })
      : GP.status('empty', t('teams.no_usage'));
    return Number.isFinite(asOf) ? el('div', {}, chart, el('p', { class: 'state', id: 'cost-as-of', text: t('billing.as_of', { time: fmt.asOf(asOf) }) })) : chart;
  }

  async function load() {
    const tenants = (await api('/api/v1/tenants?limit=1000')).items;
    if (!built) {
      treeBox = el('div'); overBox = el('div', { id: 'gp-overbooked' }); usageBox = el('div'); costBox = el('div');
      shareBox = el('div');
      const parts = [panel('teams.tree', overBox, treeBox, shareBox), el('div', { class: 'grid' }, panel('teams.usage', usageBox),
        can('admin', 'finance', 'tenant-admin') ? panel('teams.cost', costBox) : null)];
      mount(...parts);
      built = true;
    }
    const over = (await api('/api/v1/overbooking')).items;
    overBox.replaceChildren(...[overbooked(over)].filter(Boolean));
    const shares = await api('/api/v1/fairshare').catch(() => null); // an older server: none
    treeBox.replaceChildren(tree(tenants, shares));
    shareBox.replaceChildren(...(shares && !shares.active
      ? [el('p', { class: 'sub', id: 'gp-fairshare-off', text: t('teams.fairshare_off', { h: fmt.num(shares.half_life_h, 0) }) })] : []));
    usageBox.replaceChildren(await usage());
    if (can('admin', 'finance', 'tenant-admin')) costBox.replaceChildren(await costs(tenants));
  }
  GP.live(load, 15000);
})();
