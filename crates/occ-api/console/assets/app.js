// The console's entry point: client-side routes, the signed-in context (session, Namespaces,
// the selected Namespace from `?namespace=`, and what the caller may do there) and the header.

import { api, paths, setUnauthenticatedHandler } from './api.js';
import { h, replace } from './dom.js';
import {
  Scope, clearAlert, ctx, href, loadPermissions, navigate, page, setHeaderRefresh, setRouter, showError, showStatus,
} from './shell.js';
import { signInPage } from './signin.js';
import { agentsPage, createAgentPage } from './agents.js';
import { agentPage } from './agent.js';
import { presetAgentPage } from './presets.js';
import { namespacesPage } from './namespaces.js';
import { connectionsPage } from './connections.js';
import { accessPage } from './access.js';
import { accountsPage } from './accounts.js';

const routes = [
  { pattern: /^\/console\/?$/, render: () => navigate(href('/console/agents'), { replace: true, keepMessages: true }) },
  { pattern: /^\/console\/login$/, public: true, render: signInPage },
  { pattern: /^\/console\/agents$/, nav: 'agents', render: agentsPage },
  { pattern: /^\/console\/agents\/new$/, nav: 'agents', render: createAgentPage },
  { pattern: /^\/console\/agents\/from-preset$/, nav: 'agents', render: presetAgentPage },
  { pattern: /^\/console\/agents\/(agt_[0-9a-f-]+)$/, nav: 'agents', render: agentPage },
  { pattern: /^\/console\/namespaces$/, nav: 'namespaces', render: namespacesPage },
  { pattern: /^\/console\/connections$/, nav: 'connections', render: connectionsPage },
  { pattern: /^\/console\/access$/, nav: 'access', render: accessPage },
  { pattern: /^\/console\/accounts$/, nav: 'accounts', render: accountsPage },
];

let scope = new Scope();
let renderCount = 0;

function signInUrl() {
  const next = location.pathname + location.search;
  const params = new URLSearchParams();
  if (!next.startsWith('/console/login')) params.set('next', next);
  const q = params.toString();
  return q ? `/console/login?${q}` : '/console/login';
}

setUnauthenticatedHandler(() => {
  ctx.user = null;
  navigate(signInUrl(), { replace: true, keepMessages: true });
  showStatus('Your session ended. Sign in again.');
});

/** Loads the session once; null when signed out. */
async function loadSession() {
  if (ctx.user) return ctx.user;
  const { data } = await api('GET', paths.session());
  ctx.user = data && data.user ? data.user : null;
  return ctx.user;
}

/** Namespaces the caller can read, and the selected one (from the URL, else `default`). */
async function loadNamespace() {
  const { data } = await api('GET', paths.namespaces());
  ctx.namespaces = data;
  const wanted = new URLSearchParams(location.search).get('namespace');
  const live = data.filter((n) => n.status !== 'deleting');
  const found = data.find((n) => n.id === wanted);
  const chosen = found || live.find((n) => n.name === 'default') || live[0] || data[0] || null;
  ctx.ns = chosen ? chosen.id : null;
  if (ctx.ns && ctx.ns !== wanted) {
    const params = new URLSearchParams(location.search);
    params.set('namespace', ctx.ns);
    history.replaceState(null, '', `${location.pathname}?${params}`);
  }
  ctx.permissions = ctx.ns ? await loadPermissions(ctx.ns) : null;
}

let currentRoute = { public: true };

function renderHeader(route) {
  currentRoute = route;
  const signedIn = Boolean(ctx.user) && !route.public;
  document.getElementById('nav').hidden = !signedIn;
  document.getElementById('account').hidden = !signedIn;
  document.getElementById('namespace-picker').hidden = !signedIn;
  if (!signedIn) return;
  document.getElementById('account-email').textContent = ctx.user.email;
  for (const a of document.querySelectorAll('[data-nav]')) {
    a.href = href(`/console/${a.dataset.nav}`);
    if (a.dataset.nav === route.nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  const select = document.getElementById('namespace-select');
  replace(select, ctx.namespaces.map((n) => h('option', { value: n.id, selected: n.id === ctx.ns },
    n.status === 'ready' ? n.name : `${n.name} (${n.status})`)));
  if (!ctx.namespaces.length) select.append(h('option', { value: '' }, 'No Namespace'));
}

async function render({ keepMessages = false } = {}) {
  renderCount += 1;
  const current = renderCount;
  scope.dispose();
  scope = new Scope();
  if (!keepMessages) {
    clearAlert();
    showStatus('');
  }
  const path = location.pathname;
  const route = routes.find((r) => r.pattern.test(path));
  try {
    if (!route) {
      renderHeader({ public: !ctx.user });
      page('Page not found', h('p', {}, 'There is no console page at this address. ',
        h('a', { href: href('/console/agents'), 'data-link': true }, 'Go to the Agents.')));
      return;
    }
    if (!route.public) {
      if (!(await loadSession())) {
        await navigate(signInUrl(), { replace: true, keepMessages });
        return;
      }
      await loadNamespace();
    }
    if (current !== renderCount) return;
    renderHeader(route);
    const match = path.match(route.pattern);
    await route.render({ scope, params: match.slice(1) });
  } catch (e) {
    if (current !== renderCount) return;
    if (e.status === 401) return; // the handler went to sign-in
    renderHeader(route || { public: true });
    showError(e, 'Loading the page');
    const main = document.getElementById('main');
    if (main.querySelector('.loading')) replace(main, h('h1', { tabindex: '-1' }, 'Something went wrong'));
  } finally {
    if (current === renderCount) {
      const heading = document.querySelector('#main h1');
      // move focus to the new page's heading, unless the user is already typing somewhere on it
      if (heading && !document.getElementById('main').contains(document.activeElement)) {
        heading.focus({ preventScroll: true });
      }
    }
  }
}

setRouter(render);
setHeaderRefresh(() => renderHeader(currentRoute));

document.addEventListener('click', (event) => {
  const a = event.target.closest('a[data-link]');
  if (!a || event.defaultPrevented || event.button !== 0) return;
  if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const url = new URL(a.href);
  if (url.origin !== location.origin || !url.pathname.startsWith('/console')) return;
  event.preventDefault();
  navigate(url.pathname + url.search);
});

window.addEventListener('popstate', () => render());

document.getElementById('namespace-select').addEventListener('change', (event) => {
  const ns = event.target.value;
  // an Agent belongs to one Namespace: from its page, go to the other Namespace's list
  const path = location.pathname.startsWith('/console/agents') ? '/console/agents' : location.pathname;
  navigate(href(path, { namespace: ns }));
});

document.getElementById('sign-out').addEventListener('click', async () => {
  try {
    await api('POST', paths.signOut());
  } catch (e) {
    showError(e, 'Signing out');
    return;
  }
  ctx.user = null;
  await navigate('/console/login', { replace: true });
  showStatus('Signed out.');
});

render();
