/* Services: each elastic inference service with its replicas (ready, draining, parked, where), and
   its load over the last 24 h against the forecast made for it and the capacity ready. */
'use strict';
(() => {
  const { t, fmt, api, el, panel, table, mount } = GP;
  const MAX_CHARTS = 6;

  function replicas(svc) {
    const range = `${svc.min_replicas}–${svc.max_replicas}`;
    return t('services.replicas_of', { ready: svc.ready, desired: svc.desired, range });
  }

  function list(services) {
    return table([
      { key: 'name', label: 'col.name' },
      { key: 'tenant', label: 'col.tenant' },
      { key: 'request', label: 'col.request' },
      { key: 'replicas', label: 'col.replicas', render: replicas },
      { key: 'metric', label: 'col.target', render: (s) => `${fmt.num(s.target, Number.isInteger(s.target) ? 0 : 2)} ${t('metric.' + s.metric)}` },
      { key: 'policy', label: 'col.policy', render: (s) => t('policy.' + s.policy) + (s.pinned !== null ? ' · ' + t('services.pinned', { n: s.pinned }) : '') },
      { key: 'status', label: 'col.status', cls: 'reason' },
    ], services, 'services.none');
  }

  function replicaTable(svc) {
    return table([
      { key: 'job_id', label: 'col.id', render: (r) => el('a', { href: '/jobs/' + r.job_id, text: '#' + r.job_id }) },
      { key: 'state', label: 'col.state', render: (r) => GP.stateBadge(r.state) },
      { key: 'node', label: 'col.node' },
      { key: 'endpoint', label: 'col.endpoint' },
      { key: 'ready', label: 'col.serving', render: (r) => r.parked ? t('services.parked', { cards: (r.parked_on || []).join(',') }) : r.draining ? t('services.draining') : r.ready ? t('services.serving') : t('services.not_ready') },
    ], svc.replicas, 'services.no_replicas');
  }

  async function chart(svc) {
    const tenant = encodeURIComponent(svc.tenant);
    const h = await api(`/api/v1/services/${encodeURIComponent(svc.name)}/history?tenant=${tenant}&hours=24`);
    if (!h.samples.length) return GP.status('empty', t('services.no_samples'));
    const pts = (f) => h.samples.map((s) => ({ x: s.time, y: f(s) }));
    const series = [{ label: t('services.load'), points: pts((s) => s.load) }];
    if (h.samples.some((s) => s.forecast !== null)) series.push({ label: t('services.forecast'), points: pts((s) => s.forecast) });
    if (svc.metric !== 'latency_p95') {
      series.push({ label: t('services.capacity'), points: pts((s) => s.ready * svc.target) });
      // what the autoscaler wanted: above the ready line, a scale-up the pool has not met
      series.push({ label: t('services.wanted'), points: pts((s) => s.desired * svc.target) });
    }
    return Charts.line(series, { yMax: 0, ySuffix: '', title: t('services.history', { name: svc.name }) });
  }

  async function load() {
    const services = await api('/api/v1/services');
    const parts = [panel('services.list', list(services))];
    for (const svc of services.slice(0, MAX_CHARTS)) {
      const head = el('p', { class: 'muted', text: `${svc.tenant} · ${t('metric.' + svc.metric)} · ${replicas(svc)}` });
      const box = el('section', { class: 'panel', 'aria-label': svc.name },
        el('h2', { text: t('services.history', { name: svc.name }) }), head, await chart(svc), replicaTable(svc));
      parts.push(box);
    }
    mount(...parts);
  }
  GP.live(load, 10000);
})();
