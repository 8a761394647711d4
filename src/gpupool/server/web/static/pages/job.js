/* One job: what it asked for, where it runs, its events, a live tail of its log, card-hours
   and cost so far; cancel; open a notebook's app. */
'use strict';
(() => {
  const { t, fmt, api, el, panel, table, stateBadge, mount, can, BOOT } = GP;
  const id = BOOT.job;
  let built = false, factsBox, costBox, eventsBox, logBox, actBox, lastChunk = 0;

  function facts(j) {
    const rows = [
      ['col.id', '#' + j.id], ['col.name', j.name || '–'], ['col.tenant', j.tenant],
      ['col.user', j.submitted_by], ['col.state', stateBadge(j.state)], ['col.request', j.shape || j.request],
      ['col.command', (j.command || []).join(' ') || '–'], ['col.class', j.priority_class],
      ['col.submitted', fmt.date(j.submit_time)], ['col.started', fmt.date(j.started_at)],
      ['col.finished', fmt.date(j.finished_at)], ['col.exit', j.exit_code ?? '–'],
      ['col.where', GP.placement(j)],
      ['col.reason', j.reason || '–'],
      ...(j.estimate ? [['col.expected_start', GP.expectedStart(j)]] : []),
    ];
    return el('dl', { class: 'facts' }, rows.flatMap(([k, v]) => [el('dt', { text: t(k) }), el('dd', { 'data-fact': k }, v)]));
  }

  function cost(c) {
    return el('dl', { class: 'facts' },
      el('dt', { text: t('job.card_hours') }), el('dd', { 'data-fact': 'card_hours' }, fmt.num(c.card_hours, 3)),
      el('dt', { text: t('job.cost') }), el('dd', { 'data-fact': 'cost' }, c.cost_fen === null ? t('job.no_price') : fmt.cny(c.cost_fen)),
      el('dt', { text: '' }), el('dd', { class: 'state', text: t('job.estimate_note') }));
  }

  function events(list) {
    return table([
      { key: 'time', label: 'col.time', render: (e) => fmt.date(e.time) },
      { key: 'to_state', label: 'col.state', render: (e) => stateBadge(e.to_state) },
      { key: 'actor', label: 'col.actor' },
      { key: 'reason', label: 'col.reason', cls: 'reason' },
    ], list.slice().reverse(), 'state.empty');
  }

  /* a one-time login link made with this session, opened at once: the notebook gets its own
     path-scoped cookie (docs/interactive.md, "Notebooks") */
  async function openNotebook(j) {
    const made = await api(`/api/v1/jobs/${j.id}/notebook-link`, { method: 'POST' });
    window.location.assign(made.login_path);
  }

  async function tail() {
    const logs = await api(`/api/v1/jobs/${id}/logs?after=${lastChunk}`);
    for (const c of logs.chunks) { logBox.append(c.text); lastChunk = c.id; }
    if (!logBox.textContent) logBox.textContent = '';
    logBox.scrollTop = logBox.scrollHeight;
  }

  async function load() {
    if (!id) { mount(GP.status('error', t('job.not_found', { id: '?' }))); return; }
    let j;
    try { j = await api(`/api/v1/jobs/${id}`); } catch (e) {
      if (e.status === 404) { mount(GP.status('error', t('job.not_found', { id }))); return; }
      throw e;
    }
    const [evs, c] = await Promise.all([api(`/api/v1/jobs/${id}/events`), api(`/api/v1/jobs/${id}/cost`)]);
    if (!built) {
      factsBox = el('div'); costBox = el('div'); eventsBox = el('div'); actBox = el('div');
      logBox = el('pre', { class: 'log', id: 'job-log', role: 'log', tabindex: '0', 'aria-label': t('job.log') });
      mount(el('div', { class: 'grid' }, panel('job.facts', factsBox, actBox), panel('job.usage', costBox)),
        panel('job.events', eventsBox), panel('job.log', logBox));
      built = true;
    }
    factsBox.replaceChildren(facts(j));
    costBox.replaceChildren(cost(c));
    eventsBox.replaceChildren(events(evs));
    const live = !['succeeded', 'failed', 'cancelled'].includes(j.state);
    const acts = can('admin', 'tenant-admin', 'member');
    actBox.replaceChildren(
      live && acts && j.interactive === 'notebook' && j.state === 'running'
        ? el('button', { type: 'button', id: 'job-notebook', onclick: () => openNotebook(j),
          text: t('action.open_notebook') }) : '',
      live && acts
        ? el('button', { type: 'button', class: 'danger', id: 'job-cancel', onclick: () => GP.cancelJob(j, load),
          text: t('action.cancel') }) : '');
    await tail();
  }
  GP.live(load, 3000);
})();
