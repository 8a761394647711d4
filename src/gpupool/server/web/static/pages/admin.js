/* Admin: users and tokens (create, disable, new token shown once, revoke), tenants, pools,
   reservations (with what each will stop or move when it begins), alerts and the audit log
   with filters. Tenant-admins see their users. */
'use strict';
(() => {
  const { t, fmt, api, el, panel, table, badge, stateBadge, mount, can } = GP;
  const audit = { actor: '', action: '' };
  let built = false;
  const boxes = {};

  async function act(call) {
    try { return await call(); } catch (e) { window.alert(e.message); return null; } finally { load(); }
  }

  function secret(box, token) {
    box.replaceChildren(el('p', { text: t('admin.token_once') }), el('p', { class: 'secret', id: 'admin-new-token', text: token }));
  }

  function userForm(tenants) {
    const msg = el('p', { class: 'field-error', role: 'alert' });
    const name = el('input', { id: 'user-name', name: 'name', required: true });
    const roles = can('admin') ? ['member', 'viewer', 'tenant-admin', 'finance', 'admin', 'metrics'] : ['member', 'viewer', 'tenant-admin'];
    const role = el('select', { id: 'user-role', name: 'role' }, roles.map((r) => el('option', { value: r, text: t('role.' + r) })));
    const tenant = el('select', { id: 'user-tenant', name: 'tenant' }, el('option', { value: '', text: t('admin.no_tenant') }),
      tenants.map((x) => el('option', { value: x.name, text: x.name })));
    const f = el('form', { class: 'inline', novalidate: true },
      el('div', { class: 'field' }, el('label', { for: 'user-name', text: t('col.user') }), name),
      el('div', { class: 'field' }, el('label', { for: 'user-role', text: t('col.role') }), role),
      el('div', { class: 'field' }, el('label', { for: 'user-tenant', text: t('col.tenant') }), tenant),
      el('button', { type: 'submit', text: t('admin.create_user') }));
    f.addEventListener('submit', async (e) => {
      e.preventDefault(); msg.textContent = '';
      try {
        const out = await api('/api/v1/users', { method: 'POST', body: { name: name.value.trim(), role: role.value, tenant: tenant.value || null } });
        secret(msg, out.token); msg.className = ''; load();
      } catch (err) { msg.className = 'field-error'; msg.textContent = t('jobs.refused', { why: err.message }); }
    });
    return el('div', {}, f, msg);
  }

  function users(list, tokenBox) {
    return table([
      { key: 'name', label: 'col.user' }, { key: 'role', label: 'col.role', render: (u) => t('role.' + u.role) },
      { key: 'tenant', label: 'col.tenant' },
      { key: 'disabled', label: 'col.status', render: (u) => u.disabled ? badge(t('admin.disabled'), 'bad') : badge(t('admin.enabled'), 'ok') },
      { key: 'act', label: 'col.actions', render: (u) => el('span', {},
        el('button', { type: 'button', class: 'secondary', onclick: () => act(() => api(`/api/v1/users/${encodeURIComponent(u.name)}`, { method: 'PATCH', body: { disabled: !u.disabled } })),
          text: t(u.disabled ? 'action.enable' : 'action.disable') }), ' ',
        el('button', { type: 'button', class: 'secondary', onclick: async () => {
          const out = await act(() => api(`/api/v1/users/${encodeURIComponent(u.name)}/tokens`, { method: 'POST', body: {} }));
          if (out) secret(tokenBox, out.token);
        }, text: t('admin.new_token') })) },
    ], list, 'state.empty');
  }

  function tokens(list) {
    return table([
      { key: 'id', label: 'col.id' }, { key: 'user', label: 'col.user' }, { key: 'prefix', label: 'col.prefix' },
      { key: 'created_at', label: 'col.created', render: (x) => fmt.date(x.created_at) },
      { key: 'expires_at', label: 'col.expires', render: (x) => x.expires_at ? fmt.date(x.expires_at) : t('admin.never') },
      { key: 'revoked', label: 'col.status', render: (x) => x.revoked ? badge(t('admin.revoked'), 'muted') : badge(t('admin.valid'), 'ok') },
      { key: 'act', label: 'col.actions', render: (x) => x.revoked ? '' : el('button', { type: 'button', class: 'secondary',
        onclick: () => { if (window.confirm(t('admin.confirm_revoke', { id: x.id }))) act(() => api(`/api/v1/tokens/${x.id}`, { method: 'DELETE' })); }, text: t('action.revoke') }) },
    ], list.slice().reverse(), 'state.empty');
  }

  function tenantForm(tenants) {
    const msg = el('p', { class: 'field-error', role: 'alert' });
    const name = el('input', { id: 'tenant-name', name: 'name', required: true });
    const parent = el('select', { id: 'tenant-parent', name: 'parent' }, el('option', { value: '', text: t('admin.no_parent') }),
      tenants.map((x) => el('option', { value: x.name, text: x.name })));
    const f = el('form', { class: 'inline', novalidate: true },
      el('div', { class: 'field' }, el('label', { for: 'tenant-name', text: t('col.tenant') }), name),
      el('div', { class: 'field' }, el('label', { for: 'tenant-parent', text: t('col.parent') }), parent),
      el('button', { type: 'submit', text: t('admin.create_tenant') }));
    f.addEventListener('submit', async (e) => {
      e.preventDefault(); msg.textContent = '';
      try { await api('/api/v1/tenants', { method: 'POST', body: { name: name.value.trim(), parent: parent.value || null } }); name.value = ''; load(); } catch (err) { msg.textContent = t('jobs.refused', { why: err.message }); }
    });
    return el('div', {}, f, msg);
  }

  function auditFilters() {
    const field = (key) => el('div', { class: 'field' }, el('label', { for: 'audit-' + key, text: t('col.' + key) }),
      el('input', { id: 'audit-' + key, value: audit[key], onchange: (e) => { audit[key] = e.target.value.trim(); load(); } }));
    return el('div', { class: 'toolbar' }, field('actor'), field('action'));
  }

  function advisoryForm(mode) {
    const box = (action) => {
      const input = el('input', { type: 'checkbox', id: 'advisory-' + action, checked: mode.advisory.includes(action),
        onchange: (e) => act(() => api('/api/v1/advisory', { method: 'PUT', body: { actions: { [action]: e.target.checked } } })) });
      return el('label', { for: 'advisory-' + action, class: 'check' }, input, ' ', t('advisory.' + action));
    };
    return el('div', {}, el('p', { class: 'muted', text: t('admin.advisory_hint') }),
      el('div', { class: 'toolbar' }, [...mode.advisory, ...mode.acting].sort().map(box)));
  }

  function proposals(list) {
    const decide = (p, verb) => act(() => api(`/api/v1/proposals/${p.id}/${verb}`, { method: 'POST' }));
    return table([
      { key: 'id', label: 'col.id' }, { key: 'subject', label: 'col.subject' }, { key: 'tenant', label: 'col.tenant' },
      { key: 'action', label: 'col.action', render: (p) => t('advisory.' + p.action) },
      { key: 'reason', label: 'col.reason', cls: 'reason' }, { key: 'gain', label: 'col.gain', cls: 'reason' },
      { key: 'expires_at', label: 'col.expires', render: (p) => fmt.date(p.expires_at) },
      { key: 'act', label: 'col.actions', render: (p) => el('span', {},
        el('button', { type: 'button', id: 'approve-' + p.id, onclick: () => decide(p, 'approve'), text: t('action.approve') }), ' ',
        el('button', { type: 'button', class: 'secondary', id: 'reject-' + p.id, onclick: () => decide(p, 'reject'), text: t('action.reject') })) },
    ], list, 'state.no_proposals');
  }

  /* What a reservation does when it begins: the replicas it moves (a copy first) and where,
     the jobs it stops, the services it leaves without a place. */
  function reservationPlan(r) {
    if (!r.plan) return el('span', { text: t('admin.res_on') });
    const job = (j) => t('admin.res_job', { id: j.job_id }) + (j.service ? ` (${j.service})` : '');
    const lines = [];
    if (r.plan.moves.length) lines.push(el('div', { 'data-plan': 'moves', text: t('admin.res_moves', { jobs: r.plan.moves.map((m) => `${job(m)} → ${m.to.join(', ')}`).join('; ') }) }));
    if (r.plan.stops.length) lines.push(el('div', { 'data-plan': 'stops', text: t('admin.res_stops', { jobs: r.plan.stops.map(job).join(', ') }) }));
    if (r.plan.stranded.length) lines.push(el('div', { class: 'error', 'data-plan': 'stranded', text: t('admin.res_strands', { jobs: r.plan.stranded.map(job).join(', ') }) }));
    if (r.plan.hidden) lines.push(el('div', { text: t('admin.res_hidden', { n: r.plan.hidden }) }));
    return lines.length ? el('div', {}, lines) : el('span', { text: t('admin.res_nothing') });
  }

  async function load() {
    const admin = can('admin');
    const [us, tk, tn] = await Promise.all([api('/api/v1/users'), api('/api/v1/tokens'), api('/api/v1/tenants?limit=1000')]);
    if (!built) {
      for (const k of ['users', 'newToken', 'userForm', 'tokens', 'tenants', 'tenantForm', 'pools', 'reservations', 'alerts', 'audit', 'auditFilters', 'rules', 'advisory', 'proposals']) boxes[k] = el('div');
      const parts = [panel('admin.users', boxes.userForm, boxes.newToken, boxes.users), panel('admin.tokens', boxes.tokens),
        panel('admin.tenants', boxes.tenantForm, boxes.tenants)];
      if (admin) parts.push(el('div', { class: 'grid' }, panel('admin.pools', boxes.pools), panel('admin.reservations', boxes.reservations)),
        el('div', { class: 'grid' }, panel('admin.rules', boxes.rules), panel('admin.alerts', boxes.alerts)),
        panel('admin.proposals', boxes.advisory, boxes.proposals),
        panel('admin.audit', boxes.auditFilters, boxes.audit));
      mount(...parts);
      boxes.userForm.replaceChildren(userForm(tn.items));
      boxes.tenantForm.replaceChildren(tenantForm(tn.items));
      if (admin) boxes.auditFilters.replaceChildren(auditFilters());
      built = true;
    }
    boxes.users.replaceChildren(users(us, boxes.newToken));
    boxes.tokens.replaceChildren(tokens(tk));
    boxes.tenants.replaceChildren(table([{ key: 'name', label: 'col.tenant' }, { key: 'parent', label: 'col.parent' },
      { key: 'weight', label: 'col.weight', num: true, render: (x) => fmt.num(x.weight, 1) }], tn.items, 'state.no_tenants'));
    if (!admin) return;
    const q = new URLSearchParams(Object.entries(audit).filter(([, v]) => v));
    const [pools, res, alerts, log] = await Promise.all([api('/api/v1/pools'), api('/api/v1/reservations'),
      api('/api/v1/alerts?state=all&limit=50'), api('/api/v1/audit?limit=100&' + q)]);
    const rules = await api('/api/v1/alerts/rules');
    const [mode, pending] = await Promise.all([api('/api/v1/advisory'), api('/api/v1/proposals?state=pending')]);
    boxes.advisory.replaceChildren(advisoryForm(mode));
    boxes.proposals.replaceChildren(proposals(pending.items));
    boxes.rules.replaceChildren(table([{ key: 'kind', label: 'col.kind', render: (r) => t('alert.' + r.kind) },
      { key: 'limit', label: 'col.condition', render: (r) => t('rule.' + r.kind, { v: fmt.num(r.limit, 0) }) },
      { key: 'webhook', label: 'col.webhook', render: (r) => t(r.webhook ? 'admin.webhook_on' : 'admin.webhook_off') }], rules, 'state.empty'));
    boxes.pools.replaceChildren(table([{ key: 'name', label: 'col.pool' }, { key: 'sharing', label: 'col.mode', render: (p) => t('mode.' + p.sharing) },
      { key: 'policy', label: 'col.policy' }, { key: 'description', label: 'col.description' }], pools, 'state.empty'));
    boxes.reservations.replaceChildren(table([{ key: 'id', label: 'col.id' }, { key: 'tenant', label: 'col.tenant' },
      { key: 'nodes', label: 'col.nodes', render: (r) => r.nodes.join(', ') },
      { key: 'start', label: 'col.start', render: (r) => fmt.date(r.start) }, { key: 'end', label: 'col.end', render: (r) => fmt.date(r.end) },
      { key: 'plan', label: 'col.when_begins', cls: 'reason', render: reservationPlan }],
    res.slice().sort((a, b) => a.start - b.start), 'admin.no_reservations'),
    res.length ? el('p', { class: 'state', text: t('admin.res_ahead_note') }) : null);
    boxes.alerts.replaceChildren(table([{ key: 'state', label: 'col.state', render: (a) => stateBadge(a.state) },
      { key: 'kind', label: 'col.kind', render: (a) => t('alert.' + a.kind) }, { key: 'tenant', label: 'col.tenant' },
      { key: 'subject', label: 'col.subject' }, { key: 'message', label: 'col.message', cls: 'reason' },
      { key: 'started_at', label: 'col.since', render: (a) => fmt.iso(a.started_at) }], alerts, 'state.no_alerts'));
    boxes.audit.replaceChildren(table([{ key: 'time', label: 'col.time', render: (a) => fmt.date(a.time) },
      { key: 'actor', label: 'col.actor' }, { key: 'role', label: 'col.role', render: (a) => a.role ? t('role.' + a.role) : '–' },
      { key: 'action', label: 'col.action' }, { key: 'target', label: 'col.target', cls: 'reason' },
      { key: 'result', label: 'col.result', num: true }, { key: 'client', label: 'col.client' }], log.items, 'state.empty'));
  }
  GP.live(load, 10000);
})();
