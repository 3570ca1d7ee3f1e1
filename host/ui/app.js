// The gateway's admin console: a single page with hash routes, no framework, no build step.
// Everything untrusted (records, names, error messages) goes into the DOM as text only:
// elements are built with createElement and textContent, never innerHTML.
'use strict';

(() => {
  // ---------------------------------------------------------------- state

  let csrf = null;          // from /ui/login or /ui/session; sent as x-csrf-token on writes
  let signedIn = false;
  let cleanups = [];        // run when the page changes (resize listeners, charts)
  let projectsCache = null; // [{id, name, ...}] for project names in tables and selects
  // What the signed-in roles may do, from /ui/session: {read, change, owner, readProjects,
  // changeProjects} ('all' or project ids). The admin API decides all the same; the page only
  // leaves out what would be refused.
  let can = { read: true, change: true, owner: true, readProjects: 'all', changeProjects: 'all' };
  let signIn = { adminToken: true, sso: false }; // from /ui/sign-in

  const $ = (id) => document.getElementById(id);

  // ---------------------------------------------------------------- DOM helpers

  // h('a', {href: '#/x', class: 'c', dataset: {testid: 'x'}, onclick: fn}, 'text', child, ...)
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v === undefined || v === null || v === false) continue;
        if (k === 'class') el.className = v;
        else if (k === 'testid') el.setAttribute('data-testid', v);
        else if (k === 'dataset') Object.assign(el.dataset, v);
        else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
        else if (k === 'value') el.value = v;
        else if (k === 'checked' || k === 'disabled' || k === 'readOnly' || k === 'hidden') el[k] = !!v;
        else el.setAttribute(k, v === true ? '' : String(v));
      }
    }
    append(el, children);
    return el;
  }

  function append(el, children) {
    for (const c of children) {
      if (c === undefined || c === null || c === false) continue;
      if (Array.isArray(c)) append(el, c);
      else if (c instanceof Node) el.appendChild(c);
      else el.appendChild(document.createTextNode(String(c)));
    }
  }

  function clear(el) {
    while (el.firstChild) el.removeChild(el.firstChild);
  }

  // A table with column headers (th scope=col) and rows of cells (strings or nodes).
  function table(testid, caption, headers, rows, emptyText) {
    const t = h('table', { testid, class: 'data' });
    if (caption) t.appendChild(h('caption', null, caption));
    t.appendChild(h('thead', null, h('tr', null, headers.map((x) => h('th', { scope: 'col' }, x)))));
    const body = h('tbody');
    if (rows.length === 0) {
      body.appendChild(h('tr', { class: 'empty' }, h('td', { colspan: headers.length }, emptyText || 'None.')));
    }
    for (const r of rows) body.appendChild(r instanceof Node ? r : h('tr', null, r.map((c) => h('td', null, c))));
    t.appendChild(body);
    return h('div', { class: 'table-wrap' }, t);
  }

  function field(id, labelText, input, hint) {
    input.id = id;
    return h('div', { class: 'field' },
      h('label', { for: id }, labelText),
      input,
      hint ? h('span', { class: 'hint', id: id + '-hint' }, hint) : null);
  }

  function dl(pairs, testid) {
    const d = h('dl', { class: 'fields', testid });
    for (const [k, v, tid] of pairs) {
      d.appendChild(h('dt', null, k));
      d.appendChild(h('dd', { testid: tid }, v === null || v === undefined || v === '' ? '—' : v));
    }
    return d;
  }

  // ---------------------------------------------------------------- formatting

  const dash = '—';

  function fmtInt(n) {
    if (n === null || n === undefined) return dash;
    return Number(n).toLocaleString('en-US');
  }

  // Money in USD: small amounts keep their significant digits ($0.000123).
  function fmtUsd(x) {
    if (x === null || x === undefined || Number.isNaN(Number(x))) return dash;
    x = Number(x);
    if (x === 0) return '$0';
    const abs = Math.abs(x);
    if (abs >= 1) return '$' + x.toFixed(2);
    // Three significant digits, in plain notation: 0.5 -> 0.50, 0.00618099 -> 0.00618.
    const digits = Math.min(12, Math.max(2, 2 - Math.floor(Math.log10(abs))));
    let s = x.toFixed(digits).replace(/0+$/, '');
    if (/\.\d?$/.test(s)) s = x.toFixed(2);
    return '$' + s;
  }

  function fmtTime(s) {
    if (!s) return dash;
    const d = new Date(s);
    if (Number.isNaN(d.getTime())) return String(s);
    return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z').replace(/Z$/, ' UTC');
  }

  function timeEl(s) {
    if (!s) return dash;
    return h('time', { datetime: String(s) }, fmtTime(s));
  }

  function fmtMs(ms) {
    if (ms === null || ms === undefined) return dash;
    return ms >= 1000 ? (ms / 1000).toFixed(2) + ' s' : Math.round(ms) + ' ms';
  }

  function fmtLimits(l) {
    if (!l) return 'none';
    const parts = [];
    if (l.rpm != null) parts.push(`${fmtInt(l.rpm)} rpm`);
    if (l.tpm != null) parts.push(`${fmtInt(l.tpm)} tpm`);
    if (l.dailyBudgetUsd != null) parts.push(`${fmtUsd(l.dailyBudgetUsd)}/day`);
    if (l.monthlyBudgetUsd != null) parts.push(`${fmtUsd(l.monthlyBudgetUsd)}/month`);
    return parts.length ? parts.join(', ') : 'none';
  }

  function badge(status) {
    const s = status == null ? 'unknown' : String(status);
    const cls = /^(success|serving|hit|live|ok|completed)$/.test(s) ? 'ok'
      : /^(error|failed|blocked|revoked|trap|rejected|refused)/.test(s) ? 'bad'
        : /^(rate_limited|cancelled|expired|ejected)/.test(s) ? 'warn' : 'neutral';
    return h('span', { class: 'badge ' + cls }, s);
  }

  function listText(xs) {
    if (!Array.isArray(xs) || xs.length === 0) return dash;
    return xs.map((x) => (typeof x === 'string' ? x : JSON.stringify(x))).join(', ');
  }

  // A scope's list (a key's routes, models or tools; a project's tools): none is all of them.
  function scopeText(xs) {
    return listText(xs) === dash ? 'all' : listText(xs);
  }

  function projectName(id) {
    if (!id) return dash;
    const p = projectsCache && projectsCache.find((x) => x.id === id);
    return p ? p.name : id;
  }

  // ---------------------------------------------------------------- API

  class ApiError extends Error {
    constructor(message, status, invocationId, signedOut) {
      super(message);
      this.status = status;
      this.invocationId = invocationId || null;
      this.signedOut = !!signedOut;
    }
  }

  async function api(method, path, body, opts) {
    const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' }, cache: 'no-store' };
    if (method !== 'GET' && method !== 'HEAD') init.headers['x-csrf-token'] = csrf || '';
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      throw new ApiError('The gateway could not be reached: ' + (e && e.message ? e.message : e), 0);
    }
    if (res.status === 401 && !(opts && opts.allow401)) {
      showLogin('Your session has ended: sign in again.');
      throw new ApiError('Not signed in', 401, null, true);
    }
    let data = null;
    const text = await res.text().catch(() => '');
    if (text) {
      try { data = JSON.parse(text); } catch (_) { data = null; }
    }
    if (!res.ok) {
      const msg = data && typeof data.error === 'string' ? data.error
        : data && data.error && typeof data.error.message === 'string' ? data.error.message
          : `HTTP ${res.status} ${res.statusText || ''}`.trim();
      throw new ApiError(msg, res.status, data && data.invocationId);
    }
    return data;
  }

  function query(params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) {
      if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
    }
    const s = q.toString();
    return s ? '?' + s : '';
  }

  function enc(s) {
    return encodeURIComponent(s);
  }

  // ---------------------------------------------------------------- alerts

  function showError(e, where) {
    if (e && e.signedOut) return; // the login form says it
    const box = where || $('error');
    clear(box);
    const msg = e && e.message ? e.message : String(e);
    box.appendChild(h('span', { class: 'alert-msg' }, msg));
    if (e && e.invocationId) {
      box.appendChild(h('span', { class: 'alert-id' }, ' (invocation ', h('code', null, e.invocationId), ')'));
    }
    if (!where) {
      box.appendChild(h('button', {
        type: 'button', class: 'link', 'aria-label': 'Dismiss the error',
        onclick: () => { box.hidden = true; clear(box); },
      }, '×'));
    }
    box.hidden = false;
  }

  function hideError(where) {
    const box = where || $('error');
    box.hidden = true;
    clear(box);
  }

  // Runs an async action, showing its error instead of throwing.
  function guard(fn, where) {
    return async (...args) => {
      try {
        await fn(...args);
      } catch (e) {
        showError(e, where);
      }
    };
  }

  // ---------------------------------------------------------------- confirmation dialog

  function confirmDialog(title, text, okLabel) {
    const d = $('confirm');
    $('confirm-title').textContent = title;
    $('confirm-text').textContent = text;
    d.querySelector('[value="ok"]').textContent = okLabel || 'Confirm';
    d.returnValue = '';
    return new Promise((resolve) => {
      d.addEventListener('close', () => resolve(d.returnValue === 'ok'), { once: true });
      d.showModal();
    });
  }

  // ---------------------------------------------------------------- auth

  function showLogin(message) {
    signedIn = false;
    csrf = null;
    watchExpiry(null);
    runCleanups();
    clear($('page'));
    hideError();
    if ($('confirm').open) $('confirm').close('cancel');
    $('loading').hidden = true;
    $('shell').hidden = true;
    $('signout').hidden = true;
    $('login').hidden = false;
    const err = $('login-error');
    if (message) {
      err.textContent = message;
      err.hidden = false;
    } else {
      err.textContent = '';
      err.hidden = true;
    }
    $('login-token').value = '';
    $('login-sso').hidden = !signIn.sso;
    $('login-token-fields').hidden = !signIn.adminToken;
    $('login-submit').hidden = !signIn.adminToken;
    $('login-token').required = signIn.adminToken;
    if (signIn.adminToken) $('login-token').focus();
    else if (signIn.sso) $('login-sso').focus();
  }

  // Whether the roles may change project `id` (its keys and limits).
  function canChangeProject(id) {
    return can.changeProjects === 'all' || (Array.isArray(can.changeProjects) && can.changeProjects.includes(id));
  }

  function applySession(data) {
    csrf = data && data.csrf;
    watchExpiry(data && data.expiresAt);
    if (data && data.can) can = data.can;
    const who = $('whoami');
    const roles = (data && Array.isArray(data.roles)) ? data.roles.join(', ') : '';
    who.textContent = data && data.user ? `${data.user} (${roles})` : (roles ? `admin token (${roles})` : '');
    who.hidden = !who.textContent;
    // What the roles cannot open is not offered.
    for (const page of ['plugins', 'audit']) {
      const link = document.querySelector(`.nav a[data-page="${page}"]`);
      if (link) link.parentElement.hidden = !can.read;
    }
    const users = document.querySelector('.nav a[data-page="users"]');
    if (users) users.parentElement.hidden = !can.owner;
  }

  let expiryTimer = null;
  function watchExpiry(expiresAt) {
    if (expiryTimer) clearTimeout(expiryTimer);
    expiryTimer = null;
    const ms = expiresAt ? new Date(expiresAt).getTime() - Date.now() : NaN;
    if (Number.isFinite(ms) && ms < 2 ** 31 - 1) {
      expiryTimer = setTimeout(() => { if (signedIn) showLogin('Your session has expired: sign in again.'); }, Math.max(0, ms));
    }
  }

  function showApp() {
    signedIn = true;
    $('loading').hidden = true;
    $('login').hidden = true;
    $('shell').hidden = false;
    $('signout').hidden = false;
    if (!location.hash || location.hash === '#' || location.hash === '#/') {
      history.replaceState(null, '', '#/overview');
    }
    route();
  }

  async function login(ev) {
    ev.preventDefault();
    const err = $('login-error');
    const button = ev.target.querySelector('button[type=submit]');
    const token = $('login-token').value;
    err.hidden = true;
    button.disabled = true;
    try {
      await api('POST', '/ui/login', { token }, { allow401: true });
      const data = await api('GET', '/ui/session');
      applySession(data);
      $('login-token').value = '';
      projectsCache = null;
      showApp();
    } catch (e) {
      showError(e.status === 401 ? new ApiError(e.message || 'Wrong admin token', 401, e.invocationId) : e, err);
      $('login-token').select();
    } finally {
      button.disabled = false;
    }
  }

  async function logout() {
    let data = null;
    try {
      data = await api('POST', '/ui/logout', undefined, { allow401: true });
    } catch (e) {
      // Signed out all the same as far as this page goes.
    }
    $('whoami').hidden = true;
    // Signed in through the provider: signed out there too.
    if (data && typeof data.endSession === 'string' && /^https?:\/\//.test(data.endSession)) {
      location.assign(data.endSession);
      return;
    }
    showLogin();
  }

  async function start() {
    $('login-form').addEventListener('submit', login);
    $('signout').addEventListener('click', logout);
    window.addEventListener('hashchange', () => { if (signedIn) route(); });
    // A click on the current page's link reloads it.
    for (const a of document.querySelectorAll('.nav a')) {
      a.addEventListener('click', (ev) => {
        if (a.getAttribute('href') === location.hash) { ev.preventDefault(); route(); }
      });
    }
    try {
      signIn = (await api('GET', '/ui/sign-in', undefined, { allow401: true })) || signIn;
    } catch (_) { /* the defaults: the admin token's form */ }
    // Back from a single sign-on the provider or the gateway refused: say why.
    const refused = new URLSearchParams(location.search).get('signin');
    if (refused) {
      history.replaceState(null, '', location.pathname + location.hash);
      showLogin(refused);
      return;
    }
    try {
      const data = await api('GET', '/ui/session', undefined, { allow401: true });
      applySession(data);
      showApp();
    } catch (e) {
      if (e.status === 401) showLogin();
      else {
        showLogin();
        showError(e, $('login-error'));
      }
    }
  }

  // ---------------------------------------------------------------- routing

  function runCleanups() {
    for (const f of cleanups) {
      try { f(); } catch (_) { /* ignore */ }
    }
    cleanups = [];
  }

  function parseHash() {
    const raw = location.hash.replace(/^#\/?/, '');
    const qi = raw.indexOf('?');
    const path = qi >= 0 ? raw.slice(0, qi) : raw;
    const params = new URLSearchParams(qi >= 0 ? raw.slice(qi + 1) : '');
    const parts = path.split('/').filter(Boolean).map((p) => {
      try { return decodeURIComponent(p); } catch (_) { return p; }
    });
    return { parts, params };
  }

  // Shows a hash route now (also when it is the current one: a reload of the page's data).
  function navigate(hash) {
    if (location.hash !== hash) history.pushState(null, '', hash);
    route();
  }

  function route() {
    runCleanups();
    hideError();
    if ($('confirm').open) $('confirm').close('cancel');
    const { parts, params } = parseHash();
    const page = parts[0] || 'overview';
    // A fresh container per render: work still running for the previous page writes into a
    // detached element and so never into this one.
    const old = $('page');
    const root = h('div', { id: 'page' });
    old.replaceWith(root);
    for (const a of document.querySelectorAll('.nav a')) {
      if (a.dataset.page === page) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    let render;
    if (page === 'overview') render = () => pageOverview(root, params);
    else if (page === 'projects' && parts[1]) render = () => pageProject(root, parts[1]);
    else if (page === 'projects') render = () => pageProjects(root);
    else if (page === 'invocations' && parts[1]) render = () => pageInvocation(root, parts[1]);
    else if (page === 'invocations') render = () => pageInvocations(root, params);
    else if (page === 'plugins') render = () => pagePlugins(root);
    else if (page === 'tokens') render = () => pageTokens(root);
    else if (page === 'users') render = () => pageUsers(root);
    else if (page === 'audit') render = () => pageAudit(root, params);
    else render = () => { title(root, 'Not found'); root.appendChild(h('p', null, 'No such page.')); };
    Promise.resolve().then(render).catch((e) => showError(e));
  }

  function title(root, text, sub) {
    document.title = text + ' · Gateway console';
    const t = h('h1', { testid: 'page-title' }, text);
    root.appendChild(t);
    if (sub) root.appendChild(h('p', { class: 'muted sub' }, sub));
    return t;
  }

  async function loadProjects(force) {
    if (!projectsCache || force) {
      const data = await api('GET', '/admin/projects');
      projectsCache = (data && data.projects) || [];
    }
    return projectsCache;
  }

  // ---------------------------------------------------------------- overview

  const PERIODS = {
    '24h': { label: '24 h', ms: 24 * 3600e3, bucket: 'hour' },
    '7d': { label: '7 d', ms: 7 * 24 * 3600e3, bucket: 'hour' },
    '30d': { label: '30 d', ms: 30 * 24 * 3600e3, bucket: 'day' },
  };
  const PALETTE = ['#2563eb', '#dc2626', '#16a34a', '#d97706', '#7c3aed', '#0891b2', '#db2777', '#65a30d', '#4b5563', '#ea580c'];

  function floorBucket(ms, bucket) {
    const d = new Date(ms);
    d.setUTCMinutes(0, 0, 0);
    if (bucket === 'day') d.setUTCHours(0);
    return d.getTime();
  }

  async function pageOverview(root, params) {
    const period = PERIODS[params.get('period')] ? params.get('period') : '24h';
    const by = params.get('by') === 'route' ? 'route' : 'model';
    const p = PERIODS[period];
    title(root, 'Overview');

    const setHash = (np, nb) => navigate('#/overview' + query({ period: np, by: nb }));
    const controls = h('div', { class: 'controls' },
      h('div', { class: 'segmented', role: 'group', 'aria-label': 'Period' },
        Object.entries(PERIODS).map(([k, v]) => h('button', {
          type: 'button', testid: 'period-' + k, 'aria-pressed': k === period ? 'true' : 'false',
          class: k === period ? 'active' : '', onclick: () => setHash(k, by),
        }, v.label))),
      field('overview-by', 'By', h('select', {
        testid: 'overview-by',
        onchange: (ev) => setHash(period, ev.target.value),
      }, ['model', 'route'].map((x) => h('option', { value: x, selected: x === by }, x)))));
    root.appendChild(controls);

    const now = Date.now();
    const since = new Date(now - p.ms).toISOString();

    const totals = h('div', { class: 'totals', testid: 'totals', 'aria-live': 'polite' });
    const charts = h('div', { class: 'charts' });
    const tops = h('div', { class: 'tops' });
    root.append(totals, charts, tops);

    const [series, byProject, byUser, byModel] = await Promise.all([
      api('GET', '/admin/usage' + query({ since, bucket: p.bucket, by })),
      api('GET', '/admin/usage' + query({ since, by: 'project' })),
      api('GET', '/admin/usage' + query({ since, by: 'user' })),
      api('GET', '/admin/usage' + query({ since, by: 'model' })),
      loadProjects(true).catch(() => []),
    ]);

    const rows = (series && series.rows) || [];
    const sum = (k) => rows.reduce((a, r) => a + (Number(r[k]) || 0), 0);
    const big = (label, value, testid) => h('div', { class: 'total' },
      h('div', { class: 'total-label', id: testid + '-label' }, label),
      h('div', { class: 'total-value', testid, 'aria-labelledby': testid + '-label' }, value));
    totals.append(
      big('Requests', String(sum('requests')), 'total-requests'),
      big('Errors', String(sum('errors')), 'total-errors'),
      big('Tokens', String(sum('totalTokens')), 'total-tokens'),
      big('Cost', fmtUsd(sum('costUsd')), 'total-cost'));

    drawCharts(charts, rows, p.bucket, new Date(since).getTime(), now, by);

    const topTable = (testid, caption, data, label) => {
      const list = ((data && data.rows) || []).slice().sort((a, b) =>
        (Number(b.costUsd) || 0) - (Number(a.costUsd) || 0) || (Number(b.requests) || 0) - (Number(a.requests) || 0)).slice(0, 10);
      return h('section', { class: 'top-table' }, table(testid, caption, [label, 'Requests', 'Errors', 'Tokens', 'Cost'],
        list.map((r) => [label === 'Project' ? projectCell(r.group) : (r.group == null ? '(none)' : String(r.group)),
          fmtInt(r.requests), fmtInt(r.errors), fmtInt(r.totalTokens), fmtUsd(r.costUsd)]), 'No traffic in this period.'));
    };
    tops.append(
      topTable('top-projects', 'Top projects', byProject, 'Project'),
      topTable('top-users', 'Top users', byUser, 'User'),
      topTable('top-models', 'Top models', byModel, 'Model'));
  }

  function projectCell(id) {
    if (id == null) return '(none)';
    const p = projectsCache && projectsCache.find((x) => x.id === id);
    return h('a', { href: '#/projects/' + enc(id) }, p ? p.name : String(id));
  }

  function drawCharts(container, rows, bucket, sinceMs, nowMs, by) {
    const step = bucket === 'day' ? 24 * 3600e3 : 3600e3;
    const xs = [];
    for (let t = floorBucket(sinceMs, bucket); t <= nowMs; t += step) xs.push(t / 1000);
    const index = new Map(xs.map((x, i) => [x, i]));
    const groups = [];
    for (const r of rows) {
      const g = r.group == null ? '(none)' : String(r.group);
      if (!groups.includes(g)) groups.push(g);
    }
    const names = groups.length ? groups : ['(no traffic)'];
    const metrics = [
      { key: 'requests', title: 'Requests', fmt: (v) => fmtInt(v), whole: true },
      { key: 'errors', title: 'Errors', fmt: (v) => fmtInt(v), whole: true },
      { key: 'totalTokens', title: 'Tokens', fmt: (v) => fmtInt(v), whole: true },
      { key: 'costUsd', title: 'Cost (USD)', fmt: (v) => fmtUsd(v) },
    ];
    const plots = [];
    for (const m of metrics) {
      const data = [xs.slice()];
      for (const g of names) {
        const ys = new Array(xs.length).fill(0);
        for (const r of rows) {
          const rg = r.group == null ? '(none)' : String(r.group);
          if (rg !== g || !r.bucket) continue;
          const i = index.get(floorBucket(new Date(r.bucket).getTime(), bucket) / 1000);
          if (i !== undefined) ys[i] += Number(r[m.key]) || 0;
        }
        data.push(ys);
      }
      const box = h('figure', { class: 'chart', testid: 'chart-' + m.key },
        h('figcaption', null, `${m.title} by ${by}`));
      const holder = h('div', { class: 'chart-plot' });
      box.appendChild(holder);
      container.appendChild(box);
      if (typeof window.uPlot !== 'function') {
        holder.appendChild(h('p', { class: 'muted' }, 'The chart library did not load.'));
        continue;
      }
      const opts = {
        width: Math.max(200, holder.clientWidth || 400),
        height: 200,
        cursor: { drag: { x: false, y: false } },
        legend: { show: true },
        scales: {
          x: { time: true },
          // From zero, and a visible range when every value is zero.
          y: { range: (u, min, max) => [0, max > 0 ? max * 1.1 : (m.whole ? 5 : 0.01)] },
        },
        axes: [
          { stroke: '#555', grid: { stroke: '#eee' }, ticks: { stroke: '#ddd' } },
          {
            stroke: '#555', grid: { stroke: '#eee' }, ticks: { stroke: '#ddd' }, size: 70,
            incrs: m.whole ? [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7, 1e8, 1e9] : undefined,
            values: (u, vals) => vals.map((v) => m.fmt(v)),
          },
        ],
        series: [{ value: (u, v) => (v == null ? dash : fmtTime(new Date(v * 1000).toISOString())) }]
          .concat(names.map((g, i) => ({
            label: g,
            stroke: PALETTE[i % PALETTE.length],
            width: 2,
            points: { show: xs.length < 60 },
            value: (u, v) => (v == null ? dash : m.fmt(v)),
          }))),
      };
      try {
        // eslint-disable-next-line new-cap
        plots.push({ u: new window.uPlot(opts, data, holder), holder });
      } catch (e) {
        holder.appendChild(h('p', { class: 'muted' }, 'The chart could not be drawn: ' + e.message));
      }
    }
    const resize = () => {
      for (const { u, holder } of plots) {
        const w = Math.max(200, holder.clientWidth);
        if (w !== u.width) u.setSize({ width: w, height: 200 });
      }
    };
    let pending = null;
    const onResize = () => {
      if (pending) cancelAnimationFrame(pending);
      pending = requestAnimationFrame(resize);
    };
    window.addEventListener('resize', onResize);
    // The holders get their final width once laid out.
    requestAnimationFrame(resize);
    cleanups.push(() => {
      window.removeEventListener('resize', onResize);
      for (const { u } of plots) u.destroy();
    });
  }

  // ---------------------------------------------------------------- projects

  function numberInput(testid, value, step) {
    return h('input', {
      type: 'number', min: '0', step: step || '1', inputmode: step ? 'decimal' : 'numeric',
      testid, value: value == null ? '' : String(value), placeholder: 'no limit',
    });
  }

  // Reads a limits form: empty = null (no limit).
  function readLimits(ids) {
    const out = {};
    for (const [k, id, isInt] of ids) {
      const v = $(id).value.trim();
      if (v === '') { out[k] = null; continue; }
      const n = Number(v);
      if (!Number.isFinite(n) || n < 0 || (isInt && !Number.isInteger(n))) {
        throw new ApiError(`${$(id).labels[0] ? $(id).labels[0].textContent : k}: not a valid ${isInt ? 'whole number' : 'number'}`, 0);
      }
      out[k] = n;
    }
    return out;
  }

  function utcDayStart() {
    const d = new Date();
    d.setUTCHours(0, 0, 0, 0);
    return d.toISOString();
  }

  async function pageProjects(root) {
    title(root, 'Projects');
    const formErr = h('div', { class: 'alert', role: 'alert', testid: 'new-project-error', hidden: true });
    const form = h('form', { class: 'inline-form', testid: 'new-project-form', 'aria-labelledby': 'new-project-h' },
      h('h2', { id: 'new-project-h' }, 'New project'),
      h('div', { class: 'row' },
        field('new-project-name', 'Name', h('input', { type: 'text', required: true, maxlength: '200', testid: 'new-project-name', autocomplete: 'off' })),
        h('button', { type: 'submit', testid: 'new-project-submit' }, 'Create project')),
      formErr);
    form.addEventListener('submit', guard(async (ev) => {
      ev.preventDefault();
      hideError(formErr);
      const name = $('new-project-name').value.trim();
      if (!name) throw new ApiError('Name: required', 0);
      const p = await api('POST', '/admin/projects', { name });
      projectsCache = null;
      navigate('#/projects/' + enc(p.id));
    }, formErr));
    const list = h('div');
    root.append(list);
    if (can.change) root.append(form);

    const [projects, spend] = await Promise.all([
      loadProjects(true),
      api('GET', '/admin/usage' + query({ since: utcDayStart(), by: 'project' })).catch(() => null),
    ]);
    const spendBy = new Map(((spend && spend.rows) || []).map((r) => [r.group, r]));
    list.appendChild(table('projects-table', null, ['Name', 'ID', 'Limits', 'Created', 'Spend today (UTC)'],
      projects.map((p) => {
        const s = spendBy.get(p.id);
        return h('tr', { testid: 'project-row', dataset: { id: p.id } },
          h('th', { scope: 'row' }, h('a', { href: '#/projects/' + enc(p.id), testid: 'project-link' }, p.name || p.id)),
          h('td', null, h('code', null, p.id)),
          h('td', null, fmtLimits(p.limits)),
          h('td', null, timeEl(p.createdAt)),
          h('td', null, s ? fmtUsd(s.costUsd) : '$0',
            p.limits && p.limits.dailyBudgetUsd != null ? ` of ${fmtUsd(p.limits.dailyBudgetUsd)}` : ''));
      }), 'No projects yet.'));
  }

  function spendBlock(testid, label, usage, budget) {
    const spend = usage ? Number(usage.spendUsd) || 0 : null;
    const box = h('div', { class: 'spend', testid });
    box.appendChild(h('div', { class: 'total-label' }, label));
    box.appendChild(h('div', { class: 'total-value', testid: testid + '-value' }, spend == null ? dash : fmtUsd(spend)));
    if (budget != null) {
      const pct = budget > 0 ? Math.min(100, (spend / budget) * 100) : 100;
      box.appendChild(h('div', { class: 'muted' }, `of ${fmtUsd(budget)} budget (${budget > 0 ? pct.toFixed(0) : 100} %)`));
      const meter = h('meter', { min: '0', max: String(budget || 1), low: String(budget * 0.8), high: String(budget * 0.95), optimum: '0', value: String(spend || 0), 'aria-label': label + ' against budget' });
      box.appendChild(meter);
    } else {
      box.appendChild(h('div', { class: 'muted' }, 'no budget'));
    }
    if (usage) {
      box.appendChild(h('div', { class: 'muted small' },
        `${fmtInt(usage.requests)} requests, ${fmtInt(usage.totalTokens)} tokens since ${fmtTime(usage.since)}`));
    }
    return box;
  }

  async function pageProject(root, id) {
    const heading = title(root, 'Project');
    const [project, day, month, keys, batches] = await Promise.all([
      api('GET', '/admin/projects/' + enc(id)),
      api('GET', `/admin/projects/${enc(id)}/usage?period=day`).catch((e) => { showError(e); return null; }),
      api('GET', `/admin/projects/${enc(id)}/usage?period=month`).catch((e) => { showError(e); return null; }),
      api('GET', `/admin/projects/${enc(id)}/keys`).catch((e) => { showError(e); return null; }),
      api('GET', `/admin/projects/${enc(id)}/batches`).catch((e) => { showError(e); return null; }),
    ]);
    heading.textContent = 'Project: ' + (project.name || project.id);
    document.title = heading.textContent + ' · Gateway console';
    const limits = project.limits || {};
    root.appendChild(dl([
      ['ID', h('code', { testid: 'project-id' }, project.id)],
      ['Name', project.name, 'project-name'],
      ['Created', timeEl(project.createdAt)],
      ['Guards', listText(project.guards), 'project-guards'],
      ['Tools', scopeText(project.tools), 'project-tools'],
    ]));

    // Spend against budgets.
    root.appendChild(h('section', { 'aria-labelledby': 'spend-h' },
      h('h2', { id: 'spend-h' }, 'Spend'),
      h('div', { class: 'totals' },
        spendBlock('spend-day', 'Today (UTC)', day, limits.dailyBudgetUsd),
        spendBlock('spend-month', 'This month (UTC)', month, limits.monthlyBudgetUsd))));

    // Limits.
    const limitsMsg = h('div', { class: 'alert', role: 'alert', testid: 'limits-error', hidden: true });
    const saved = h('span', { class: 'saved', role: 'status', testid: 'limits-status' });
    const limitsForm = h('form', { class: 'grid-form', testid: 'limits-form', 'aria-labelledby': 'limits-h' },
      h('h2', { id: 'limits-h' }, 'Limits'),
      h('p', { class: 'muted' }, 'Empty means no limit.'),
      h('div', { class: 'row' },
        field('limit-rpm', 'Requests per minute', numberInput('limit-rpm', limits.rpm)),
        field('limit-tpm', 'Tokens per minute', numberInput('limit-tpm', limits.tpm)),
        field('limit-daily', 'Daily budget (USD)', numberInput('limit-daily', limits.dailyBudgetUsd, 'any')),
        field('limit-monthly', 'Monthly budget (USD)', numberInput('limit-monthly', limits.monthlyBudgetUsd, 'any'))),
      h('div', { class: 'row' }, h('button', { type: 'submit', testid: 'limits-save' }, 'Save limits'), saved),
      limitsMsg);
    limitsForm.addEventListener('submit', guard(async (ev) => {
      ev.preventDefault();
      hideError(limitsMsg);
      saved.textContent = '';
      const body = readLimits([['rpm', 'limit-rpm', true], ['tpm', 'limit-tpm', true],
        ['dailyBudgetUsd', 'limit-daily', false], ['monthlyBudgetUsd', 'limit-monthly', false]]);
      await api('PUT', `/admin/projects/${enc(id)}/limits`, body);
      projectsCache = null;
      saved.textContent = 'Saved.';
    }, limitsMsg));
    const changes = canChangeProject(id);
    if (changes) root.appendChild(limitsForm);

    // Batches, with their progress: lines ended of all.
    const batchRows = ((batches && batches.batches) || []).map((b) => {
      const ended = (Number(b.completed) || 0) + (Number(b.failed) || 0);
      const total = Number(b.total) || 0;
      return h('tr', { testid: 'batch-row', dataset: { id: b.id, status: b.status } },
        h('th', { scope: 'row' }, h('code', null, b.id)),
        h('td', null, b.api === 'anthropic' ? 'Anthropic' : 'OpenAI', h('div', { class: 'muted small' }, b.endpoint)),
        h('td', { testid: 'batch-status' }, badge(b.status)),
        h('td', { testid: 'batch-progress' },
          h('progress', { max: total || 1, value: ended, 'aria-label': `${ended} of ${total} lines ended` }),
          ` ${fmtInt(ended)} of ${fmtInt(total)}`,
          Number(b.failed) ? h('div', { class: 'muted small' }, `${fmtInt(b.failed)} failed`) : null),
        h('td', null, timeEl(b.createdAt)),
        h('td', null, timeEl(b.endedAt)));
    });
    root.appendChild(h('section', { 'aria-labelledby': 'batches-h' },
      h('h2', { id: 'batches-h' }, 'Batches'),
      batches ? table('batches-table', null, ['ID', 'API', 'Status', 'Progress', 'Created', 'Ended'], batchRows, 'No batches.')
        : h('p', { class: 'muted' }, 'The batches could not be listed.')));

    // Keys.
    const keysBox = h('section', { 'aria-labelledby': 'keys-h' }, h('h2', { id: 'keys-h' }, 'Keys'));
    const keysList = h('div');
    const keysMsg = h('div', { class: 'alert', role: 'alert', testid: 'keys-error', hidden: true });
    keysBox.append(keysMsg, keysList);
    root.appendChild(keysBox);

    const renderKeys = (list) => {
      clear(keysList);
      if (!list) {
        keysList.appendChild(h('p', { class: 'muted' }, 'The keys could not be listed.'));
        return;
      }
      const now = Date.now();
      keysList.appendChild(table('keys-table', null, ['Prefix', 'Created', 'Expires', 'Revoked', 'Limits', 'Routes', 'Models', 'Tools', 'Actions'],
        list.map((k) => {
          const expired = k.expiresAt && new Date(k.expiresAt).getTime() <= now;
          const live = !k.revokedAt && !expired;
          return h('tr', { testid: 'key-row', dataset: { prefix: k.prefix } },
            h('th', { scope: 'row' }, h('code', { testid: 'key-prefix' }, k.prefix)),
            h('td', null, timeEl(k.createdAt)),
            h('td', null, k.expiresAt ? timeEl(k.expiresAt) : 'never', expired ? [' ', badge('expired')] : null),
            h('td', { testid: 'key-revoked' }, k.revokedAt ? [badge('revoked'), ' ', timeEl(k.revokedAt)] : 'no'),
            h('td', null, fmtLimits(k.limits)),
            h('td', null, scopeText(k.routes)),
            h('td', null, scopeText(k.models)),
            h('td', { testid: 'key-tools-cell' }, scopeText(k.tools)),
            h('td', { class: 'nowrap' }, live && changes ? h('button', {
              type: 'button', class: 'secondary small', testid: 'key-limits',
              'aria-label': 'Limits of key ' + k.prefix,
              onclick: () => editKeyLimits(k, keysMsg, reloadKeys),
            }, 'Limits') : null, live && changes ? ' ' : null, live && changes ? h('button', {
              type: 'button', class: 'danger small', testid: 'key-revoke',
              'aria-label': 'Revoke key ' + k.prefix,
              onclick: guard(async () => {
                const ok = await confirmDialog('Revoke key', `Revoke the key ${k.prefix}…? Requests with it will be refused at once. This cannot be undone.`, 'Revoke');
                if (!ok) return;
                hideError(keysMsg);
                await api('DELETE', '/admin/keys/' + enc(k.prefix));
                await reloadKeys();
              }, keysMsg),
            }, 'Revoke') : dash));
        }), 'No keys yet.'));
    };
    const reloadKeys = async () => {
      const data = await api('GET', `/admin/projects/${enc(id)}/keys`);
      renderKeys(data && data.keys);
    };
    renderKeys(keys && keys.keys);

    // New key.
    const newKeyMsg = h('div', { class: 'alert', role: 'alert', testid: 'new-key-error', hidden: true });
    const shown = h('div', { class: 'once', testid: 'new-key-panel', hidden: true });
    const keyForm = h('form', { class: 'grid-form', testid: 'new-key-form', 'aria-labelledby': 'new-key-h' },
      h('h2', { id: 'new-key-h' }, 'New key'),
      h('p', { class: 'muted' }, 'Every field is optional: an unscoped key reaches every route and model of the project, and every tool the project allows.'),
      h('div', { class: 'row' },
        field('key-routes', 'Routes (comma-separated)', h('input', { type: 'text', testid: 'key-routes', placeholder: 'all', autocomplete: 'off' })),
        field('key-models', 'Models (ROUTE/MODEL, comma-separated)', h('input', { type: 'text', testid: 'key-models', placeholder: 'all', autocomplete: 'off' }))),
      h('div', { class: 'row' },
        field('key-tools', 'Tools (SERVER__TOOL globs, comma-separated)', h('input', { type: 'text', testid: 'key-tools', placeholder: 'all', autocomplete: 'off', 'aria-describedby': 'key-tools-hint' }),
          'e.g. github__*, calc__add'),
        field('key-expires', 'Expires', h('input', { type: 'text', testid: 'key-expires', placeholder: 'never', autocomplete: 'off', 'aria-describedby': 'key-expires-hint' }),
          '30d, 2026-12-31 or an RFC 3339 time')),
      h('div', { class: 'row' },
        field('key-rpm', 'Requests per minute', numberInput('key-rpm', null)),
        field('key-tpm', 'Tokens per minute', numberInput('key-tpm', null)),
        field('key-daily', 'Daily budget (USD)', numberInput('key-daily', null, 'any')),
        field('key-monthly', 'Monthly budget (USD)', numberInput('key-monthly', null, 'any'))),
      h('div', { class: 'row' }, h('button', { type: 'submit', testid: 'new-key-submit' }, 'Create key')),
      newKeyMsg);
    const splitList = (s) => s.split(',').map((x) => x.trim()).filter(Boolean);
    keyForm.addEventListener('submit', guard(async (ev) => {
      ev.preventDefault();
      hideError(newKeyMsg);
      const body = {};
      const lim = readLimits([['rpm', 'key-rpm', true], ['tpm', 'key-tpm', true],
        ['dailyBudgetUsd', 'key-daily', false], ['monthlyBudgetUsd', 'key-monthly', false]]);
      if (Object.values(lim).some((v) => v != null)) body.limits = lim;
      const routes = splitList($('key-routes').value);
      const models = splitList($('key-models').value);
      const tools = splitList($('key-tools').value);
      const expires = $('key-expires').value.trim();
      if (routes.length) body.routes = routes;
      if (models.length) body.models = models;
      if (tools.length) body.tools = tools;
      if (expires) body.expires = expires;
      const created = await api('POST', `/admin/projects/${enc(id)}/keys`, body);
      keyForm.reset();
      showNewKey(shown, created);
      reloadKeys().catch((e) => showError(e, keysMsg));
    }, newKeyMsg));
    if (changes) root.append(shown, keyForm);
  }

  // A key's limits in a modal dialog: PUT /admin/keys/{prefix}/limits.
  function editKeyLimits(k, msgBox, done) {
    const l = k.limits || {};
    const err = h('div', { class: 'alert', role: 'alert', testid: 'key-limits-error', hidden: true });
    const d = h('dialog', { testid: 'key-limits-dialog', 'aria-labelledby': 'klim-h' });
    const form = h('form', null,
      h('h2', { id: 'klim-h' }, 'Limits of key ', h('code', null, k.prefix)),
      h('p', { class: 'muted' }, 'Empty means no limit of its own (the project\'s still apply).'),
      h('div', { class: 'row' },
        field('klim-rpm', 'Requests per minute', numberInput('klim-rpm', l.rpm)),
        field('klim-tpm', 'Tokens per minute', numberInput('klim-tpm', l.tpm))),
      h('div', { class: 'row' },
        field('klim-daily', 'Daily budget (USD)', numberInput('klim-daily', l.dailyBudgetUsd, 'any')),
        field('klim-monthly', 'Monthly budget (USD)', numberInput('klim-monthly', l.monthlyBudgetUsd, 'any'))),
      err,
      h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'secondary', testid: 'key-limits-cancel', onclick: () => d.close() }, 'Cancel'),
        h('button', { type: 'submit', testid: 'key-limits-save' }, 'Save')));
    form.addEventListener('submit', guard(async (ev) => {
      ev.preventDefault();
      hideError(err);
      const body = readLimits([['rpm', 'klim-rpm', true], ['tpm', 'klim-tpm', true],
        ['dailyBudgetUsd', 'klim-daily', false], ['monthlyBudgetUsd', 'klim-monthly', false]]);
      await api('PUT', `/admin/keys/${enc(k.prefix)}/limits`, body);
      d.close();
      await done().catch((e) => showError(e, msgBox));
    }, err));
    d.appendChild(form);
    d.addEventListener('close', () => d.remove());
    document.body.appendChild(d);
    cleanups.push(() => { if (d.open) d.close(); });
    d.showModal();
  }

  // The whole key, shown once: it lives only in this panel's input, gone when dismissed or
  // when the page changes (the page's container is replaced).
  // A secret made now (a key, an admin token), shown this once with a copy button.
  function showNewKey(panel, created, noun) {
    noun = noun || 'key';
    clear(panel);
    const input = h('input', { type: 'text', readOnly: true, testid: 'new-key-value', value: created.key, spellcheck: 'false', autocomplete: 'off', class: 'mono' });
    const copied = h('span', { role: 'status', class: 'saved', testid: 'new-key-copied' });
    panel.append(
      h('h2', { id: 'new-key-shown-h' }, `New ${noun} `, h('code', null, created.prefix || '')),
      h('p', { class: 'warn-text' }, `Copy the ${noun} now: it will not be shown again.`),
      field('new-key-value', noun === 'key' ? 'Key' : 'Token', input),
      h('div', { class: 'row' },
        h('button', {
          type: 'button', testid: 'new-key-copy',
          onclick: async () => {
            input.focus();
            input.select();
            try {
              if (!navigator.clipboard || !window.isSecureContext) throw new Error('no clipboard');
              await navigator.clipboard.writeText(input.value);
              copied.textContent = 'Copied.';
            } catch (_) {
              // Fallback: the text stays selected for Ctrl+C.
              copied.textContent = 'Selected: press Ctrl+C (⌘C) to copy.';
            }
          },
        }, 'Copy'),
        h('button', {
          type: 'button', class: 'secondary', testid: 'new-key-dismiss',
          onclick: () => { clear(panel); panel.hidden = true; },
        }, 'Done'),
        copied),
      h('p', { class: 'muted small' }, `Expires: ${created.expiresAt ? fmtTime(created.expiresAt) : 'never'}; ` + (noun === 'key'
        ? `limits: ${fmtLimits(created.limits)}; routes: ${scopeText(created.routes)}; models: ${scopeText(created.models)}; tools: ${scopeText(created.tools)}.`
        : `role: ${created.role}${created.projectId ? ' of ' + created.projectId : ''}.`)));
    panel.hidden = false;
    input.focus();
    input.select();
  }

  // ---------------------------------------------------------------- invocations

  const STATUSES = ['success', 'error', 'cancelled', 'rate_limited', 'blocked'];
  const FILTERS = ['projectId', 'userId', 'route', 'model', 'status', 'since', 'until'];

  // datetime-local values are taken as UTC: "2026-01-02T03:04" -> "2026-01-02T03:04:00Z".
  function localToUtc(v) {
    if (!v) return '';
    return (v.length === 16 ? v + ':00' : v) + 'Z';
  }
  function utcToLocal(v) {
    if (!v) return '';
    const d = new Date(v);
    if (Number.isNaN(d.getTime())) return '';
    return d.toISOString().slice(0, 16);
  }

  function tokens(usage) {
    if (!usage || typeof usage !== 'object') return dash;
    if (usage.total_tokens != null) return fmtInt(usage.total_tokens);
    const p = Number(usage.prompt_tokens) || 0;
    const c = Number(usage.completion_tokens) || 0;
    return fmtInt(p + c);
  }

  async function pageInvocations(root, params) {
    title(root, 'Invocations', 'Newest first. Times are UTC.');
    const filters = {};
    for (const k of FILTERS) filters[k] = params.get(k) || '';

    const projectSelect = h('select', { testid: 'filter-project' }, h('option', { value: '' }, 'All projects'));
    const form = h('form', { class: 'filters', testid: 'filters', 'aria-label': 'Filters' },
      h('div', { class: 'row' },
        field('filter-project', 'Project', projectSelect),
        field('filter-user', 'User', h('input', { type: 'text', testid: 'filter-user', value: filters.userId, autocomplete: 'off' })),
        field('filter-route', 'Route', h('input', { type: 'text', testid: 'filter-route', value: filters.route, autocomplete: 'off' })),
        field('filter-model', 'Model', h('input', { type: 'text', testid: 'filter-model', value: filters.model, autocomplete: 'off' })),
        field('filter-status', 'Status', h('select', { testid: 'filter-status' },
          h('option', { value: '' }, 'Any'),
          STATUSES.map((s) => h('option', { value: s, selected: s === filters.status }, s)))),
        field('filter-since', 'Since (UTC)', h('input', { type: 'datetime-local', testid: 'filter-since', value: utcToLocal(filters.since) })),
        field('filter-until', 'Until (UTC)', h('input', { type: 'datetime-local', testid: 'filter-until', value: utcToLocal(filters.until) }))),
      h('div', { class: 'row' },
        h('button', { type: 'submit', testid: 'filter-apply' }, 'Apply'),
        h('button', { type: 'button', class: 'secondary', testid: 'filter-reset', onclick: () => navigate('#/invocations') }, 'Reset'),
        h('a', { class: 'button secondary', testid: 'invocations-csv', download: 'invocations.csv', href: '/admin/invocations.csv' + query(filters) }, 'Export CSV')));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const f = {
        projectId: projectSelect.value,
        userId: $('filter-user').value.trim(),
        route: $('filter-route').value.trim(),
        model: $('filter-model').value.trim(),
        status: $('filter-status').value,
        since: localToUtc($('filter-since').value),
        until: localToUtc($('filter-until').value),
      };
      navigate('#/invocations' + query(f)); // the same filters again: a reload
    });
    root.appendChild(form);

    // data-state: loading until the first page of results is in (the test waits for "done").
    const results = h('div', { testid: 'invocations-results', dataset: { state: 'loading' } });
    const more = h('div', { class: 'row' });
    root.append(results, more);

    const projects = await loadProjects(true).catch(() => []);
    for (const p of projects) projectSelect.appendChild(h('option', { value: p.id, selected: p.id === filters.projectId }, p.name || p.id));
    if (filters.projectId && !projects.some((p) => p.id === filters.projectId)) {
      projectSelect.appendChild(h('option', { value: filters.projectId, selected: true }, filters.projectId));
    }

    const tbody = h('tbody');
    const headers = ['Time', 'Project', 'Route', 'Model', 'Status', 'HTTP', 'Tokens', 'Cost', 'Cache', 'Duration'];
    const t = h('table', { class: 'data', testid: 'invocations-table' },
      h('thead', null, h('tr', null, headers.map((x) => h('th', { scope: 'col' }, x)))), tbody);
    results.appendChild(h('div', { class: 'table-wrap' }, t));
    const count = h('p', { class: 'muted small', testid: 'invocations-count', role: 'status' });
    results.appendChild(count);
    let shownCount = 0;

    const addRows = (list) => {
      for (const r of list) {
        const link = h('a', { href: '#/invocations/' + enc(r.id), testid: 'invocation-link' }, fmtTime(r.createdAt));
        tbody.appendChild(h('tr', { testid: 'invocation-row', dataset: { id: r.id } },
          h('th', { scope: 'row' }, link),
          h('td', null, projectName(r.projectId)),
          h('td', null, r.route || dash),
          h('td', null, r.model || dash),
          h('td', null, badge(r.status)),
          h('td', null, r.httpStatus == null ? dash : String(r.httpStatus)),
          h('td', { class: 'num' }, tokens(r.usage)),
          h('td', { class: 'num' }, fmtUsd(r.usageCost)),
          h('td', null, r.cache || dash),
          h('td', { class: 'num' }, fmtMs(r.durationMs))));
      }
      shownCount += list.length;
    };

    const load = async (cursor) => {
      const data = await api('GET', '/admin/invocations' + query(Object.assign({}, filters, { cursor, limit: 50 })));
      const list = (data && data.invocations) || [];
      if (!cursor && list.length === 0) {
        tbody.appendChild(h('tr', { class: 'empty' }, h('td', { colspan: headers.length }, 'No invocations match.')));
      }
      addRows(list);
      count.textContent = `${shownCount} shown${data && data.next ? ', more older ones' : ''}.`;
      clear(more);
      if (data && data.next) {
        more.appendChild(h('button', {
          type: 'button', class: 'secondary', testid: 'invocations-older',
          onclick: guard(async (ev) => { ev.target.disabled = true; await load(data.next); }),
        }, 'Older'));
      }
    };
    await load(null);
    results.dataset.state = 'done';
  }

  const BODY_LIMIT = 20000;

  function bodyBlock(testid, label, value) {
    let text;
    if (value === null || value === undefined) text = '(none)';
    else if (typeof value === 'string') {
      text = value;
      try { text = JSON.stringify(JSON.parse(value), null, 2); } catch (_) { /* keep the text */ }
    } else {
      try { text = JSON.stringify(value, null, 2); } catch (_) { text = String(value); }
    }
    const cut = text.length > BODY_LIMIT;
    return h('section', { class: 'body-block', 'aria-label': label },
      h('h2', null, label),
      cut ? h('p', { class: 'muted', testid: testid + '-cut' }, `Showing the first ${BODY_LIMIT.toLocaleString('en-US')} of ${text.length.toLocaleString('en-US')} characters.`) : null,
      h('pre', { testid, tabindex: '0' }, cut ? text.slice(0, BODY_LIMIT) : text));
  }

  async function pageInvocation(root, id) {
    title(root, 'Invocation');
    root.appendChild(h('p', null, h('a', { href: '#/invocations' }, '← All invocations')));
    const [r] = await Promise.all([api('GET', '/admin/invocations/' + enc(id)), loadProjects().catch(() => [])]);
    const usage = r.usage && typeof r.usage === 'object' ? r.usage : null;
    root.appendChild(dl([
      ['ID', h('code', null, r.id)],
      ['Time', timeEl(r.createdAt)],
      ['Status', badge(r.status), 'invocation-status'],
      ['HTTP status', r.httpStatus == null ? null : String(r.httpStatus), 'invocation-http'],
      ['Project', r.projectId ? h('a', { href: '#/projects/' + enc(r.projectId) }, projectName(r.projectId)) : null, 'invocation-project'],
      ['Key', r.keyPrefix ? h('code', null, r.keyPrefix) : null],
      ['User', r.userId],
      ['Route', r.route, 'invocation-route'],
      ['Plugin', r.plugin],
      ['Model', r.model, 'invocation-model'],
      ['Type', r.type],
      ['Stream', r.stream == null ? null : (r.stream ? 'yes' : 'no')],
      ['Duration', fmtMs(r.durationMs)],
      ['Prompt tokens', usage ? fmtInt(usage.prompt_tokens) : null],
      ['Completion tokens', usage ? fmtInt(usage.completion_tokens) : null],
      ['Total tokens', usage ? tokens(usage) : null, 'invocation-tokens'],
      ['Cost', r.usageCost == null ? null : fmtUsd(r.usageCost), 'invocation-cost'],
      ['Cache', r.cache],
      ['Saved cost', r.savedCost == null ? null : fmtUsd(r.savedCost)],
      ['Error', r.error, 'invocation-error'],
      ['Provider error', r.providerError == null ? null : (typeof r.providerError === 'string' ? r.providerError : JSON.stringify(r.providerError))],
    ], 'invocation-fields'));

    if (usage) {
      root.appendChild(h('details', null, h('summary', null, 'Usage (all fields)'),
        h('pre', { testid: 'invocation-usage' }, JSON.stringify(usage, null, 2))));
    }

    const attempts = Array.isArray(r.attempts) ? r.attempts : [];
    root.appendChild(h('h2', null, 'Attempts'));
    root.appendChild(table('attempts-table', null, ['#', 'Route', 'Target', 'Status', 'Error', 'Duration'],
      attempts.map((a, i) => [String(i + 1), a.route || dash, a.target || dash, a.status == null ? dash : String(a.status), a.error || dash, fmtMs(a.durationMs)]),
      'Tries are listed when a request took more than one (retries, fallbacks).'));

    const guards = Array.isArray(r.guards) ? r.guards : [];
    root.appendChild(h('h2', null, 'Guards'));
    root.appendChild(table('guards-table', null, ['Guard', 'Stage', 'Verdict', 'Reason', 'Changes', 'Applied'],
      guards.map((g) => [g.guard || dash, g.stage || dash, g.verdict == null ? dash : badge(g.verdict), g.reason || dash,
        g.changes == null ? dash : (typeof g.changes === 'string' ? g.changes : JSON.stringify(g.changes)),
        g.applied == null ? dash : (g.applied ? 'yes' : 'no')]),
      'No guard ran.'));

    root.appendChild(bodyBlock('invocation-request', 'Request', r.request));
    root.appendChild(bodyBlock('invocation-response', 'Response', r.response));
  }

  // ---------------------------------------------------------------- plugins and routes

  async function pagePlugins(root) {
    title(root, 'Plugins and routes');
    const [plugins, routes, config] = await Promise.all([
      api('GET', '/admin/plugins'),
      api('GET', '/admin/routes').catch((e) => { showError(e); return null; }),
      api('GET', '/admin/config').catch((e) => { showError(e); return null; }),
    ]);

    if (config) {
      if (config.rejected) {
        root.appendChild(h('div', { class: 'alert', testid: 'config-rejected' },
          h('strong', null, 'The last configuration edit was refused: '), String(config.rejected)));
      }
      root.appendChild(h('p', { class: 'muted', testid: 'config-loaded' }, `Configuration loaded ${fmtTime(config.loadedAt)}.`));
    }

    root.appendChild(h('h2', null, 'Plugins'));
    const list = (plugins && plugins.plugins) || [];
    root.appendChild(table('plugins-table', null,
      ['Plugin', 'Name', 'Version', 'WIT version', 'World', 'Status', 'Load error', 'Instances', 'Routes', 'Loaded'],
      list.map((p) => {
        const inst = p.instances || {};
        return h('tr', { testid: 'plugin-row', dataset: { plugin: p.plugin == null ? '' : String(p.plugin) } },
          h('th', { scope: 'row' }, h('code', null, p.plugin == null ? dash : String(p.plugin))),
          h('td', null, p.name == null ? dash : String(p.name)),
          h('td', null, p.version == null ? dash : String(p.version)),
          h('td', null, p.wit_version == null ? dash : String(p.wit_version)),
          h('td', null, p.world == null ? dash : String(p.world)),
          // A newer file that is loading or was refused is shown beside the version serving.
          h('td', { testid: 'plugin-status' }, badge(p.status),
            p.next ? [' ', h('span', { class: 'nowrap', testid: 'plugin-next' }, `new version ${p.next.status}`)] : null),
          h('td', { class: 'wrap' }, p.reason != null ? String(p.reason) : (p.next && p.next.reason != null ? String(p.next.reason) : dash)),
          h('td', { testid: 'plugin-instances' }, p.instances ? h('ul', { class: 'plain' },
            ['active', 'loaded', 'rejected', 'traps'].map((k) => h('li', { class: 'nowrap' }, `${inst[k] == null ? dash : inst[k]} ${k}`))) : dash),
          h('td', null, listText(p.routes)),
          h('td', { class: 'nowrap' }, p.loaded_at ? timeEl(p.loaded_at) : dash));
      }), 'No plugins.'));

    root.appendChild(h('h2', null, 'Routes'));
    const rlist = (routes && routes.routes) || [];
    root.appendChild(table('routes-table', null,
      ['Route', 'Plugin', 'Targets', 'Cache TTL', 'Guards', 'Fallbacks', 'Settings'],
      rlist.map((r) => h('tr', { testid: 'route-row', dataset: { route: r.id == null ? '' : String(r.id) } },
        h('th', { scope: 'row' }, h('code', { testid: 'route-id' }, r.id == null ? dash : String(r.id))),
        h('td', null, r.plugin == null ? dash : String(r.plugin), r.pluginStatus ? [' ', badge(r.pluginStatus)] : null),
        h('td', null, targetsList(r.targets)),
        h('td', null, r.cacheTtlSecs == null ? 'off' : `${r.cacheTtlSecs} s${r.cacheScope ? ' (' + r.cacheScope + ')' : ''}`),
        h('td', null, listText(r.guards)),
        h('td', null, listText(r.fallbacks)),
        h('td', null, settingsList(r.settings)))),
      'No routes.'));
  }

  // ---------------------------------------------------------------- admin tokens

  const ROLES = ['owner', 'admin', 'viewer', 'project_admin', 'project_viewer'];

  async function pageTokens(root) {
    title(root, 'Admin tokens', 'Personal tokens for the admin API and automation, each with its role. A token is shown once, when made.');
    const msg = h('div', { class: 'alert', role: 'alert', testid: 'tokens-error', hidden: true });
    const list = h('div');
    const shown = h('div', { class: 'once', testid: 'new-token-panel', hidden: true });
    const projects = await loadProjects().catch(() => []);
    const projectName = (id) => {
      const p = projects.find((x) => x.id === id);
      return p ? `${p.name} (${id})` : id;
    };
    const reload = async () => {
      const data = await api('GET', '/admin/tokens');
      clear(list);
      const now = Date.now();
      list.appendChild(table('tokens-table', null, ['Prefix', 'Name', 'Role', 'Made by', 'Created', 'Expires', 'Last used', 'State', 'Actions'],
        ((data && data.tokens) || []).map((t) => {
          const state = t.revokedAt ? 'revoked' : (t.live ? 'live' : 'expired');
          return h('tr', { testid: 'token-row', dataset: { prefix: t.prefix } },
            h('th', { scope: 'row' }, h('code', { testid: 'token-prefix' }, t.prefix)),
            h('td', null, String(t.name)),
            h('td', { testid: 'token-role' }, String(t.role), t.projectId ? [' of ', projectName(t.projectId)] : null),
            h('td', null, h('code', null, String(t.createdBy))),
            h('td', null, timeEl(t.createdAt)),
            h('td', null, t.expiresAt ? timeEl(t.expiresAt) : 'never'),
            h('td', { testid: 'token-last-used' }, t.lastUsedAt ? timeEl(t.lastUsedAt) : 'never'),
            h('td', { testid: 'token-state' }, badge(state), t.revokedAt ? [' ', timeEl(t.revokedAt)] : null),
            h('td', null, state === 'live' ? h('button', {
              type: 'button', class: 'danger small', testid: 'token-revoke',
              'aria-label': 'Revoke token ' + t.prefix,
              onclick: guard(async () => {
                const ok = await confirmDialog('Revoke admin token', `Revoke the admin token ${t.prefix}…? It will be refused at once. This cannot be undone.`, 'Revoke');
                if (!ok) return;
                hideError(msg);
                await api('DELETE', '/admin/tokens/' + enc(t.prefix));
                await reload();
              }, msg),
            }, 'Revoke') : dash));
        }), 'No admin tokens yet.'));
    };
    root.append(msg, list);
    await reload();

    const formMsg = h('div', { class: 'alert', role: 'alert', testid: 'new-token-error', hidden: true });
    const projectSelect = h('select', { testid: 'token-project' },
      h('option', { value: '' }, '(every project)'),
      projects.map((p) => h('option', { value: p.id }, `${p.name} (${p.id})`)));
    const form = h('form', { class: 'grid-form', testid: 'new-token-form', 'aria-labelledby': 'new-token-h' },
      h('h2', { id: 'new-token-h' }, 'New admin token'),
      h('div', { class: 'row' },
        field('token-name', 'Name (what it is for)', h('input', { type: 'text', testid: 'token-name', required: true, autocomplete: 'off' })),
        field('token-role', 'Role', h('select', { testid: 'token-role-select' }, ROLES.map((r) => h('option', { value: r, selected: r === 'viewer' }, r)))),
        field('token-project', 'Project (for project_admin and project_viewer)', projectSelect),
        field('token-expires', 'Expires', h('input', { type: 'text', testid: 'token-expires', placeholder: '90d', autocomplete: 'off', 'aria-describedby': 'token-expires-hint' }),
          '90d, 2026-12-31, an RFC 3339 time, or never')),
      h('div', { class: 'row' }, h('button', { type: 'submit', testid: 'new-token-submit' }, 'Make token')),
      formMsg);
    form.addEventListener('submit', guard(async (ev) => {
      ev.preventDefault();
      hideError(formMsg);
      const body = { name: $('token-name').value.trim(), role: $('token-role').value };
      if (projectSelect.value) body.projectId = projectSelect.value;
      const expires = $('token-expires').value.trim();
      if (expires) body.expires = expires;
      const made = await api('POST', '/admin/tokens', body);
      form.reset();
      showNewKey(shown, { ...made, key: made.token }, 'admin token');
      reload().catch((e) => showError(e, msg));
    }, formMsg));
    root.append(shown, form);
  }

  // ---------------------------------------------------------------- users

  // The roles an owner gives people who sign in with single sign-on (beside their groups').
  async function pageUsers(root) {
    title(root, 'Users', 'Roles given to people by the email they sign in with, beside those their groups hold by the config\'s [oidc.roles].');
    const msg = h('div', { class: 'alert', role: 'alert', testid: 'users-error', hidden: true });
    const list = h('div');
    const projects = await loadProjects().catch(() => []);
    const reload = async () => {
      const data = await api('GET', '/admin/users');
      clear(list);
      list.appendChild(table('users-table', null, ['Email', 'Role', 'Given by', 'Given', 'Actions'],
        ((data && data.users) || []).map((u) => h('tr', { testid: 'user-row', dataset: { email: String(u.email), role: String(u.role) } },
          h('th', { scope: 'row' }, String(u.email)),
          h('td', { testid: 'user-role' }, String(u.role), u.projectId ? [' of ', h('code', null, String(u.projectId))] : null),
          h('td', null, h('code', null, String(u.createdBy))),
          h('td', null, timeEl(u.createdAt)),
          h('td', null, h('button', {
            type: 'button', class: 'danger small', testid: 'user-remove',
            'aria-label': `Take ${u.role} back from ${u.email}`,
            onclick: guard(async () => {
              const ok = await confirmDialog('Take the role back', `Take ${u.role} back from ${u.email}? They lose it at their next request.`, 'Take back');
              if (!ok) return;
              hideError(msg);
              await api('DELETE', '/admin/users/' + enc(u.email) + query({ role: u.role, projectId: u.projectId }));
              await reload();
            }, msg),
          }, 'Take back')))), 'No roles given yet.'));
    };
    root.append(msg, list);
    await reload();
    const formMsg = h('div', { class: 'alert', role: 'alert', testid: 'new-user-error', hidden: true });
    const projectSelect = h('select', { testid: 'user-project' },
      h('option', { value: '' }, '(every project)'),
      projects.map((p) => h('option', { value: p.id }, `${p.name} (${p.id})`)));
    const form = h('form', { class: 'grid-form', testid: 'new-user-form', 'aria-labelledby': 'new-user-h' },
      h('h2', { id: 'new-user-h' }, 'Give a role'),
      h('div', { class: 'row' },
        field('user-email', 'Email', h('input', { type: 'email', testid: 'user-email', required: true, autocomplete: 'off' })),
        field('user-role', 'Role', h('select', { testid: 'user-role-select' }, ROLES.map((r) => h('option', { value: r, selected: r === 'viewer' }, r)))),
        field('user-project', 'Project (for project_admin and project_viewer)', projectSelect)),
      h('div', { class: 'row' }, h('button', { type: 'submit', testid: 'new-user-submit' }, 'Give the role')),
      formMsg);
    form.addEventListener('submit', guard(async (ev) => {
      ev.preventDefault();
      hideError(formMsg);
      const body = { email: $('user-email').value.trim(), role: $('user-role').value };
      if (projectSelect.value) body.projectId = projectSelect.value;
      await api('POST', '/admin/users', body);
      form.reset();
      await reload();
    }, formMsg));
    root.append(form);
  }

  // ---------------------------------------------------------------- audit log

  async function pageAudit(root, params) {
    title(root, 'Audit log', 'Every change through the admin API, the console and the CLI, and every sign-in: newest first.');
    const filters = { actor: params.get('actor') || '', action: params.get('action') || '', outcome: params.get('outcome') || '' };
    const form = h('form', { class: 'controls', testid: 'audit-filters' },
      field('audit-actor', 'Actor', h('input', { type: 'text', testid: 'audit-actor', value: filters.actor, placeholder: 'any', autocomplete: 'off' })),
      field('audit-action', 'Action', h('input', { type: 'text', testid: 'audit-action', value: filters.action, placeholder: 'any', autocomplete: 'off' })),
      field('audit-outcome', 'Outcome', h('select', { testid: 'audit-outcome' },
        ['', 'ok', 'refused', 'failed'].map((o) => h('option', { value: o, selected: o === filters.outcome }, o || 'any')))),
      h('button', { type: 'submit', testid: 'audit-apply' }, 'Filter'));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      navigate('#/audit' + query({ actor: $('audit-actor').value.trim(), action: $('audit-action').value.trim(), outcome: $('audit-outcome').value }));
    });
    root.appendChild(form);
    const body = h('tbody');
    const more = h('button', { type: 'button', class: 'secondary', testid: 'audit-more', hidden: true }, 'Older events');
    const t = h('table', { testid: 'audit-table', class: 'data' },
      h('thead', null, h('tr', null, ['When', 'Actor', 'Role', 'Via', 'Address', 'Action', 'Target', 'Outcome', 'Change'].map((x) => h('th', { scope: 'col' }, x)))),
      body);
    root.append(h('div', { class: 'table-wrap' }, t), more);
    // The leaves of a JSON value by their dotted paths (arrays as JSON text).
    const leaves = (v, path, out) => {
      if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
        for (const [k, x] of Object.entries(v)) leaves(x, path ? path + '.' + k : k, out);
      } else {
        out.set(path || '(value)', JSON.stringify(v));
      }
      return out;
    };
    // What changed, one line a field: `limits.rpm: null → 5`; the whole before and after
    // under it.
    const change = (e) => {
      if (e.before == null && e.after == null) return dash;
      const before = leaves(e.before, '', new Map());
      const after = leaves(e.after, '', new Map());
      const lines = [];
      for (const k of new Set([...before.keys(), ...after.keys()])) {
        const b = e.before == null ? undefined : before.get(k);
        const a = e.after == null ? undefined : after.get(k);
        if (b === a) continue;
        lines.push(h('li', { class: 'wrap' }, h('code', null, k), ': ',
          b === undefined ? '' : [b, ' → '], a === undefined ? '(gone)' : a));
      }
      return h('div', { testid: 'audit-change' },
        h('ul', { class: 'plain small' }, lines.slice(0, 8), lines.length > 8 ? h('li', null, `… ${lines.length - 8} more`) : null),
        h('details', null, h('summary', null, 'JSON'),
          h('pre', { class: 'json', testid: 'audit-before' }, 'before: ' + JSON.stringify(e.before, null, 2)),
          h('pre', { class: 'json', testid: 'audit-after' }, 'after: ' + JSON.stringify(e.after, null, 2))));
    };
    const load = async (after) => {
      const data = await api('GET', '/admin/audit' + query({ format: 'json', limit: 50, after, ...filters }));
      const events = (data && data.events) || [];
      if (!after && events.length === 0) {
        body.appendChild(h('tr', { class: 'empty' }, h('td', { colspan: 9 }, 'No events.')));
      }
      for (const e of events) {
        body.appendChild(h('tr', { testid: 'audit-row', dataset: { action: String(e.action), outcome: String(e.outcome) } },
          h('td', { class: 'nowrap' }, timeEl(e.at)),
          h('td', { testid: 'audit-actor-cell' }, h('code', null, String(e.actor))),
          h('td', null, String(e.role)),
          h('td', null, String(e.via)),
          h('td', null, e.address == null ? dash : String(e.address)),
          h('td', { testid: 'audit-action-cell' }, h('code', null, String(e.action)), h('div', { class: 'muted small' }, String(e.endpoint))),
          h('td', null, e.target == null ? dash : h('code', null, String(e.target))),
          h('td', { testid: 'audit-outcome-cell' }, badge(e.outcome === 'ok' ? 'ok' : e.outcome === 'refused' ? 'refused' : 'failed'), ` ${e.status}`),
          h('td', null, change(e))));
      }
      more.hidden = !(data && data.next) || events.length < 50;
      more.onclick = guard(() => load(data.next));
    };
    await load(null);
  }

  function targetsList(targets) {
    if (!Array.isArray(targets) || targets.length === 0) return dash;
    return h('ul', { class: 'plain' }, targets.map((t) => h('li', null,
      h('code', null, t.baseUrl == null ? dash : String(t.baseUrl)),
      t.weight != null ? ` weight ${t.weight}` : '',
      ' ',
      t.ejected ? [badge('ejected'), t.ejectedUntil ? ` until ${fmtTime(t.ejectedUntil)}` : ''] : badge('live'))));
  }

  function settingsList(settings) {
    if (!settings || typeof settings !== 'object') return dash;
    const entries = Object.entries(settings);
    if (!entries.length) return dash;
    return h('ul', { class: 'plain settings' }, entries.map(([k, v]) => h('li', null,
      h('span', { class: 'setting-name' }, k), ': ', h('code', null, typeof v === 'string' ? v : JSON.stringify(v)))));
  }

  // ---------------------------------------------------------------- go

  window.addEventListener('unhandledrejection', (ev) => {
    // Every action catches its errors; this is a last resort so nothing goes unseen.
    ev.preventDefault();
    showError(ev.reason);
  });

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
