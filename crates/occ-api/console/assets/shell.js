// What every page shares: the alert and status regions, navigation that keeps the Namespace in
// the URL, the signed-in context and a per-page scope whose timers stop when the page is left.

import { api, paths } from './api.js';
import { h, replace } from './dom.js';

/** The signed-in context: `{user, namespaces, ns, permissions}` (set by app.js). */
export const ctx = { user: null, namespaces: [], ns: null, permissions: null };

// ---- alert and status ---------------------------------------------------------------------------

const alertEl = () => document.getElementById('alert');
const statusEl = () => document.getElementById('status');

/** Explanations added to an API error, by HTTP status. */
function explain(err) {
  switch (err.status) {
    case 403:
      return 'You are not allowed to do this: occ refused the request. Ask an administrator for the permission; the request id identifies the refusal in the audit log.';
    case 409:
      return 'The request conflicts with the current state. Refresh to see it before trying again.';
    case 503:
      if (err.code === 'UNKNOWN_OUTCOME') {
        return 'The outcome is unknown: the change may or may not have happened. Nothing was retried. Reload to see the current state before trying again.';
      }
      return 'A dependency of occ is unavailable. Nothing was retried; try again later.';
    default:
      return null;
  }
}

/**
 * Shows an error in the alert region: the API's code, message and request id, the offending
 * fields when there are details, and an explanation of what the status means for the user.
 */
export function showError(err, context) {
  const el = alertEl();
  const code = err.code || 'ERROR';
  const explanation = explain(err);
  const details = (err.details || []).map((d) => h('li', {}, h('code', {}, d.path || '/'), ` ${d.code}`));
  replace(el,
    h('div', { class: 'alert-body' },
      h('p', { class: 'alert-title' },
        context ? `${context}: ` : '',
        h('strong', { class: 'error-code' }, code),
        err.status ? ` (HTTP ${err.status})` : ''),
      h('p', { class: 'error-message' }, err.message || String(err)),
      details.length ? h('ul', { class: 'error-details', 'aria-label': 'Offending fields' }, details) : null,
      explanation ? h('p', { class: 'error-explanation' }, explanation) : null,
      err.requestId ? h('p', { class: 'request-id' }, 'Request id: ', h('code', {}, err.requestId)) : null),
    h('button', { type: 'button', class: 'secondary dismiss', onclick: clearAlert }, 'Dismiss'));
  el.hidden = false;
  el.dataset.code = code;
}

/** Hides the alert region. */
export function clearAlert() {
  const el = alertEl();
  el.hidden = true;
  el.replaceChildren();
  delete el.dataset.code;
}

/** Announces a success or progress message in the status region. */
export function showStatus(message) {
  replace(statusEl(), message ? h('p', {}, message) : null);
}

// ---- navigation ---------------------------------------------------------------------------------

/** A console URL with the current Namespace (and extra query parameters). */
export function href(path, params = {}) {
  const query = new URLSearchParams();
  const ns = params.namespace === undefined ? ctx.ns : params.namespace;
  if (ns) query.set('namespace', ns);
  for (const [k, v] of Object.entries(params)) if (k !== 'namespace' && v != null) query.set(k, v);
  const q = query.toString();
  return q ? `${path}?${q}` : path;
}

let headerRefresh = () => {};
/** Installs the function that redraws the header (app.js). */
export function setHeaderRefresh(fn) {
  headerRefresh = fn;
}
/** Redraws the header (after the list of Namespaces changed). */
export function refreshHeader() {
  headerRefresh();
}

let router = () => {};
/** Installs the function that renders the current URL (app.js). */
export function setRouter(fn) {
  router = fn;
}

/** Goes to `url` (a console path with its query) and renders it. */
export function navigate(url, { replace: replaceState = false, keepMessages = false } = {}) {
  if (replaceState) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  return router({ keepMessages });
}

/** A console link that navigates without a page load. */
export function link(path, text, params, attrs = {}) {
  return h('a', { href: href(path, params), 'data-link': true, ...attrs }, text);
}

// ---- page scope ---------------------------------------------------------------------------------

/** Timers and listeners that belong to the page on screen; disposed when another page renders. */
export class Scope {
  constructor() {
    this.disposed = false;
    this.cleanups = [];
  }
  /** Calls `fn` every `ms` (after the previous call settled) until disposed or it returns false. */
  poll(ms, fn) {
    let timer = null;
    const tick = async () => {
      if (this.disposed) return;
      let again = true;
      try {
        again = (await fn()) !== false;
      } catch (e) {
        showError(e, 'Updating');
      }
      if (again && !this.disposed) timer = setTimeout(tick, ms);
    };
    timer = setTimeout(tick, ms);
    const cancel = () => clearTimeout(timer);
    this.cleanups.push(cancel);
    return cancel;
  }
  onDispose(fn) {
    this.cleanups.push(fn);
  }
  dispose() {
    this.disposed = true;
    for (const fn of this.cleanups) fn();
    this.cleanups = [];
  }
}

// ---- permissions --------------------------------------------------------------------------------

/** What the caller may do in a Namespace (the occ route `GET /namespaces/{ns}/iam/permissions`). */
export async function loadPermissions(ns) {
  return (await api('GET', paths.permissions(ns))).data;
}

/** Whether the caller may do `action` on the Namespace's collection of `kind`. */
export function canCollection(kind, action) {
  const p = ctx.permissions;
  return Boolean(p && (p.collections[kind] || []).includes(action));
}

/** Whether the caller may do `action` on one Agent. */
export function canAgent(agentId, action) {
  const p = ctx.permissions;
  return Boolean(p && (p.agents[agentId] || []).includes(action));
}

/** Whether the caller may do `action` on one Configuration. */
export function canConfiguration(cfgId, action) {
  const p = ctx.permissions;
  return Boolean(p && (p.configurations[cfgId] || []).includes(action));
}

/** The main element, emptied, with a heading focused for screen readers after navigation. */
export function page(title, ...children) {
  const main = document.getElementById('main');
  document.title = `${title} · occ console`;
  const heading = h('h1', { tabindex: '-1' }, title);
  replace(main, heading, ...children);
  return { main, heading };
}

/** A mutating button: marked so tests (and people) can see it is disabled without permission. */
export function actionButton(label, { allowed, onclick, id, kind } = {}) {
  return h('button', {
    type: 'button',
    id,
    class: kind || '',
    disabled: !allowed,
    'data-mutating': true,
    onclick,
  }, label);
}

/** A state badge. */
export function badge(state, label) {
  return h('span', { class: `badge state-${state}`, dataset: { state } }, label);
}
