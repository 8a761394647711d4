/* The login page: trade a token for a session cookie, then go where the user was headed. */
'use strict';
(() => {
  const { t } = GP;  // core.js: boot data, messages, and the language switch
  const form = document.getElementById('gp-login');
  const error = document.getElementById('gp-login-error');
  const input = document.getElementById('gp-token');
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    error.textContent = '';
    if (!input.value.trim()) { error.textContent = t('login.empty'); input.focus(); return; }
    let resp;
    try {
      resp = await fetch('/ui/session', { method: 'POST', credentials: 'same-origin',
        headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ token: input.value.trim() }) });
    } catch (err) { error.textContent = t('state.offline'); return; }
    if (resp.ok) {
      // only a path of this server: never '//elsewhere' or '/\\elsewhere' (browsers read \\ as /)
      const next = new URLSearchParams(window.location.search).get('next') || '/';
      let target = '/';
      try {
        const url = new URL(next, window.location.origin);
        if (url.origin === window.location.origin && next.startsWith('/')) target = url.pathname + url.search;
      } catch (err) { /* not a URL: go home */ }
      window.location.assign(target);
      return;
    }
    error.textContent = t({ 401: 'login.bad', 403: 'login.not_human', 429: 'login.slow' }[resp.status] || 'login.failed');
    input.setAttribute('aria-invalid', 'true');
    input.focus();
  });
})();
