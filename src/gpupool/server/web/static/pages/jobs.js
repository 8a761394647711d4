/* Queue and jobs: submit from a form (the request grammar; the API's errors inline), pending
   with reasons, running with placement, history; cancel. */
'use strict';
(() => {
  const { t, fmt, api, el, panel, table, stateBadge, mount, can, BOOT } = GP;
  let tab = 'pending';
  let built = false, listBox, tabBox, formMsg;

  /* "python3 -c 'print(1)'" -> ["python3", "-c", "print(1)"]: spaces split, quotes group. */
  function words(text) {
    const out = []; let cur = '', quote = null, any = false;
    for (const ch of text) {
      if (quote) { if (ch === quote) quote = null; else cur += ch; }
      else if (ch === '"' || ch === "'") { quote = ch; any = true; }
      else if (/\s/.test(ch)) { if (cur || any) out.push(cur); cur = ''; any = false; }
      else cur += ch;
    }
    if (quote) throw new Error(t('jobs.unclosed_quote'));
    if (cur || any) out.push(cur);
    return out;
  }

  const link = (id) => el('a', { href: '/jobs/' + id, text: '#' + id });
  const cancelButton = (j) => el('button', { type: 'button', class: 'secondary', 'data-cancel': j.id,
    onclick: () => GP.cancelJob(j, load), text: t('action.cancel') });
  const mayCancel = () => can('admin', 'tenant-admin', 'member');

  async function form() {
    const [tenants, classes] = await Promise.all([api('/api/v1/tenants?limit=1000'), api('/api/v1/priority-classes')]);
    const field = (id, labelKey, input) => el('div', { class: 'field' }, el('label', { for: id, text: t(labelKey) }), input);
    const tenant = el('select', { id: 'job-tenant', name: 'tenant' },
      tenants.items.map((x) => el('option', { value: x.name, text: x.name, selected: x.name === BOOT.tenant })));
    const request = el('input', { id: 'job-request', name: 'request', class: 'wide', required: true, placeholder: 'gpu=A100-80G:1,cpu=4' });
    const command = el('input', { id: 'job-command', name: 'command', class: 'wide', placeholder: 'python3 train.py' });
    const name = el('input', { id: 'job-name', name: 'name' });
    const klass = el('select', { id: 'job-class', name: 'priority_class' },
      classes.map((c) => el('option', { value: c.name, text: c.name, selected: c.name === 'training' })));
    formMsg = el('p', { class: 'field-error', id: 'job-error', role: 'alert' });
    const f = el('form', { class: 'inline', id: 'job-form', novalidate: true },
      field('job-tenant', 'col.tenant', tenant), field('job-request', 'col.request', request),
      field('job-command', 'col.command', command), field('job-name', 'col.name', name),
      field('job-class', 'col.class', klass),
      el('button', { type: 'submit', text: t('action.submit') }));
    f.addEventListener('submit', async (e) => {
      e.preventDefault();
      formMsg.className = 'field-error'; formMsg.textContent = '';
      f.querySelectorAll('[aria-invalid]').forEach((x) => x.removeAttribute('aria-invalid'));
      let body;
      try {
        body = { tenant: tenant.value, request: request.value.trim(), name: name.value.trim(),
          priority_class: klass.value, command: words(command.value) };
      } catch (err) { command.setAttribute('aria-invalid', 'true'); formMsg.textContent = err.message; return; }
      try {
        const job = await api('/api/v1/jobs', { method: 'POST', body });
        formMsg.className = 'field-ok';
        formMsg.textContent = t('jobs.submitted', { id: job.id, state: t('state.' + job.state) });
        tab = 'pending'; load();
      } catch (err) {
        const bad = f.querySelector(`[name="${(err.field || '').split('.')[0]}"]`);
        if (bad) { bad.setAttribute('aria-invalid', 'true'); bad.focus(); }
        formMsg.textContent = t('jobs.refused', { why: err.message });
      }
    });
    return el('div', {}, f, formMsg);
  }

  function tabs() {
    return el('div', { class: 'tabs', role: 'group', 'aria-label': t('jobs.which') },
      ['pending', 'running', 'history'].map((k) => el('button', { type: 'button', 'aria-pressed': String(k === tab), 'data-tab': k,
        onclick: () => { tab = k; load(); }, text: t('jobs.tab_' + k) })));
  }

  async function pending() {
    const q = await api('/api/v1/queue?limit=200');
    const cols = [
      { key: 'id', label: 'col.id', render: (j) => link(j.id) },
      { key: 'tenant', label: 'col.tenant' }, { key: 'submitted_by', label: 'col.user' },
      { key: 'name', label: 'col.name' }, { key: 'request', label: 'col.request', render: (j) => j.shape || j.request },
      { key: 'waited_s', label: 'col.waited', num: true, render: (j) => fmt.dur(j.waited_s) },
      { key: 'estimate', label: 'col.expected_start', render: (j) => GP.expectedStart(j) },
      { key: 'reason', label: 'col.reason', cls: 'reason', render: (j) => j.held ? t('jobs.held') : j.reason },
    ];
    if (mayCancel()) cols.push({ key: 'act', label: 'col.actions', render: (j) => cancelButton(j) });
    return table(cols, q.items, 'jobs.none_pending');
  }

  async function running() {
    const [a, r] = await Promise.all(['admitted', 'running'].map((s) => api('/api/v1/jobs?limit=500&state=' + s)));
    const rows = [...a.items, ...r.items].sort((x, y) => y.id - x.id);
    const cols = [
      { key: 'id', label: 'col.id', render: (j) => link(j.id) },
      { key: 'tenant', label: 'col.tenant' }, { key: 'submitted_by', label: 'col.user' },
      { key: 'name', label: 'col.name' }, { key: 'request', label: 'col.request', render: (j) => j.shape || j.request },
      { key: 'state', label: 'col.state', render: (j) => stateBadge(j.state) },
      { key: 'where', label: 'col.where', render: GP.placement },
      { key: 'started_at', label: 'col.started', render: (j) => fmt.date(j.started_at || (j.allocation && j.allocation.created_at)) },
    ];
    if (mayCancel()) cols.push({ key: 'act', label: 'col.actions', render: (j) => cancelButton(j) });
    return table(cols, rows, 'jobs.none_running');
  }

  async function history() {
    const pages = await Promise.all(['succeeded', 'failed', 'cancelled'].map((s) => api('/api/v1/jobs?limit=100&state=' + s)));
    const rows = pages.flatMap((p) => p.items).sort((x, y) => y.id - x.id).slice(0, 100);
    return table([
      { key: 'id', label: 'col.id', render: (j) => link(j.id) },
      { key: 'tenant', label: 'col.tenant' }, { key: 'name', label: 'col.name' },
      { key: 'request', label: 'col.request', render: (j) => j.shape || j.request },
      { key: 'state', label: 'col.state', render: (j) => stateBadge(j.state) },
      { key: 'exit_code', label: 'col.exit', num: true },
      { key: 'finished_at', label: 'col.finished', render: (j) => fmt.date(j.finished_at) },
      { key: 'reason', label: 'col.reason', cls: 'reason' },
    ], rows, 'jobs.none_finished');
  }

  async function load() {
    if (!built) {
      listBox = el('div', { id: 'job-list' }); tabBox = el('div');
      const parts = [];
      if (mayCancel()) parts.push(panel('jobs.submit', await form()));
      parts.push(panel('jobs.list', tabBox, listBox));
      mount(...parts);
      built = true;
    }
    tabBox.replaceChildren(tabs());
    listBox.replaceChildren(await { pending, running, history }[tab]());
  }
  GP.live(load, 3000);
})();
