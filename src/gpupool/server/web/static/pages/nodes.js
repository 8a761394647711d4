/* Nodes and devices: a tile per card or a heat map, filters, and drain / resume (admins). */
'use strict';
(() => {
  const { t, fmt, api, el, panel, table, stateBadge, badge, mount, can } = GP;
  const filters = { pool: '', model: '', vendor: '', state: '' };
  let view = 'tiles';
  let built = false, cardsBox, nodesBox, filterBox, countBox;

  function holderText(h) {
    if (h.tenant === null) return t('nodes.other_team');
    const slice = h.mig_profile ? 'MIG ' + h.mig_profile : h.compute_pct < 100 ? fmt.pct(h.compute_pct) : t('nodes.whole_card');
    return `${h.tenant} · ${t('nodes.job_n', { id: h.job_id })} · ${slice}`;
  }

  const gib = (mib) => (mib === null || mib === undefined ? '–' : fmt.num(mib / 1024, 0));  // GiB, whole

  function tile(d) {
    const util = d.util_pct;
    const bar = el('div', { class: 'bar', title: t('col.util') }, el('span'));
    bar.firstChild.style.width = (util || 0) + '%';
    return el('div', { class: 'tile ' + d.state, 'data-node': d.node, 'data-index': d.index },
      el('div', { class: 'head' }, el('span', {}, `${d.node} #${d.index}`), stateBadge(d.state)),
      el('div', { class: 'meta' }, `${d.model} · ${t('mode.' + d.mode)}${d.switching_to ? ' · ' + t('nodes.switching') + ' ' + t('mode.' + d.switching_to) : ''}${d.healthy ? '' : ' · ' + t('nodes.unhealthy')}`),
      d.mode_error ? el('div', { class: 'meta' }, d.mode_error) : null,
      d.holders.length ? el('div', {}, d.holders.map((h) => el('div', { class: 'holder' }, holderText(h)))) : null,
      d.mig_layout ? el('div', { class: 'meta' }, `${t('nodes.mig_layout')} ${d.mig_layout.join(', ') || t('nodes.mig_empty')}`) : null,
      bar,
      el('div', { class: 'meta' },
        `${t('col.util')} ${fmt.pct(util)}`),
      el('div', { class: 'meta', title: t('nodes.mem_help') }, `${t('nodes.mem')} ${gib(d.mem_used_mib)} / ${gib(d.granted_mib)} / ${fmt.gib(d.memory_mib)}`),
      el('div', { class: 'meta' }, `${fmt.num(d.temp_c, 0)} °C · ${fmt.num(d.power_w, 0)} W`));
  }

  function heatColour(d) {
    if (d.state === 'unavailable') return '#b3261e';
    if (d.util_pct === null) return d.state === 'allocated' ? '#7aa7d6' : '#d5dae1';
    const u = d.util_pct / 100; // white-blue ramp
    return `rgb(${Math.round(230 - 219 * u)}, ${Math.round(238 - 146 * u)}, ${Math.round(247 - 74 * u)})`;
  }

  function heat(devices) {
    const cells = devices.map((d) => {
      const c = el('span', { title: `${d.node} #${d.index} · ${d.model} · ${t('state.' + d.state)} · ${t('col.util')} ${fmt.pct(d.util_pct)}` });
      c.style.background = heatColour(d);
      return c;
    });
    return el('div', {},
      el('div', { class: 'legend' },
        el('span', {}, el('i', { class: 'h0' }), t('nodes.heat_idle')),
        el('span', {}, el('i', { class: 'h1' }), t('nodes.heat_busy')),
        el('span', {}, el('i', { class: 'h2' }), t('state.unavailable'))),
      el('div', { class: 'heat', role: 'img', 'aria-label': t('nodes.heat_label', { n: fmt.num(devices.length) }) }, cells));
  }

  function select(key, options) {
    const id = 'f-' + key;
    const s = el('select', { id, onchange: (e) => { filters[key] = e.target.value; load(); } },
      el('option', { value: '', text: t('nodes.any') }),
      options.map((o) => el('option', { value: o, text: key === 'state' ? t('state.' + o) : o })));
    s.value = filters[key];
    return el('div', { class: 'field' }, el('label', { for: id, text: t('col.' + key) }), s);
  }

  function toolbar(all) {
    const uniq = (k) => [...new Set(all.map((d) => d[k]))].sort();
    const views = el('div', { class: 'tabs', role: 'group', 'aria-label': t('nodes.view') },
      ['tiles', 'heat'].map((v) => el('button', { type: 'button', 'aria-pressed': String(v === view),
        onclick: () => { view = v; filterBox.replaceChildren(); load(); }, text: t('nodes.view_' + v) })));
    return el('div', { class: 'toolbar' }, select('pool', uniq('pool')), select('model', uniq('model')),
      select('vendor', uniq('vendor')), select('state', ['allocated', 'free', 'unavailable']), views);
  }

  async function drain(name) {
    const reason = window.prompt(t('nodes.drain_reason'), '');
    if (reason === null) return;
    await act(() => api(`/api/v1/nodes/${encodeURIComponent(name)}/drain`, { method: 'POST', body: { reason } }));
  }
  async function resume(name) {
    await act(() => api(`/api/v1/nodes/${encodeURIComponent(name)}`, { method: 'PATCH', body: { schedulable: true } }));
  }
  async function act(call) {
    try { await call(); } catch (e) { window.alert(e.message); }
    load();
  }

  function nodeTable(nodes) {
    const cols = [
      { key: 'name', label: 'col.node' },
      { key: 'pool', label: 'col.pool' },
      { key: 'state', label: 'col.state', render: (n) => n.schedulable ? stateBadge(n.state) : badge(t('state.drained'), 'warn') },
      { key: 'cards', label: 'col.cards', num: true, render: (n) => fmt.num(n.devices.length) },
      { key: 'heartbeat_at', label: 'col.heartbeat', render: (n) => fmt.date(n.heartbeat_at) },
      { key: 'drain_reason', label: 'col.reason', cls: 'reason' },
    ];
    if (can('admin')) cols.push({ key: 'act', label: 'col.actions', render: (n) => n.schedulable
      ? el('button', { type: 'button', class: 'secondary', onclick: () => drain(n.name), text: t('action.drain') })
      : el('button', { type: 'button', class: 'secondary', onclick: () => resume(n.name), text: t('action.resume') }) });
    return table(cols, nodes, 'state.no_nodes');
  }

  async function load() {
    const [all, nodes] = await Promise.all([api('/api/v1/devices'), api('/api/v1/nodes?limit=1000')]);
    // the filters are the API's (?pool=&model=&vendor=&state=), applied here to the one read
    const shown = all.filter((d) => Object.entries(filters).every(([k, v]) => !v || d[k] === v));
    if (!built) {
      filterBox = el('div'); countBox = el('p', { class: 'state' }); cardsBox = el('div'); nodesBox = el('div');
      mount(panel('nodes.cards', filterBox, countBox, cardsBox), panel('nodes.nodes', nodesBox));
      built = true;
    }
    if (!filterBox.firstChild) filterBox.replaceChildren(toolbar(all));
    countBox.textContent = t('nodes.shown', { n: fmt.num(shown.length), total: fmt.num(all.length) });
    cardsBox.replaceChildren(!shown.length ? GP.status('empty', t('state.no_cards'))
      : view === 'heat' ? heat(shown) : el('div', { class: 'tiles' }, shown.map(tile)));
    nodesBox.replaceChildren(nodeTable(nodes.items));
  }
  GP.live(load, 5000);
})();
