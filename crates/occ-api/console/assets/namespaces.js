// Namespaces: the ones the caller can read (with their status), create and delete.

import { api, paths } from './api.js';
import { confirmDialog, field, h, replace, setFieldError, when } from './dom.js';
import {
  actionButton, clearAlert, ctx, href, link, loadPermissions, navigate, page, refreshHeader, showError, showStatus,
} from './shell.js';

export async function namespacesPage({ scope }) {
  const canCreate = Boolean(ctx.permissions && ctx.permissions.namespaceCollection.includes('create'));
  const body = h('div', { class: 'table-wrap' }, h('p', { class: 'loading' }, 'Loading Namespaces…'));

  const name = h('input', { type: 'text', id: 'namespace-name', required: true, maxlength: 200, autocomplete: 'off', disabled: !canCreate });
  const nameField = field({ label: 'Name', control: name, hint: 'Unique in the installation; a deleted Namespace\'s name stays reserved.' });
  const submit = h('button', { type: 'submit', id: 'create-namespace', disabled: !canCreate, 'data-mutating': true }, 'Create Namespace');
  const form = h('form', { class: 'card inline-form', novalidate: true, 'aria-labelledby': 'create-namespace-heading' },
    h('h2', { id: 'create-namespace-heading' }, 'Create a Namespace'),
    nameField, h('div', { class: 'actions' }, submit));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearAlert();
    setFieldError(nameField, null);
    if (!name.value.trim()) {
      setFieldError(nameField, 'Enter a name.');
      name.focus();
      return;
    }
    submit.disabled = true;
    try {
      const created = (await api('POST', paths.namespaces(), { name: name.value.trim() })).data;
      name.value = '';
      showStatus(`Namespace ${created.name} created (${created.status}).`);
      await refresh();
    } catch (e) {
      if (e.details.some((d) => d.path === '/name')) setFieldError(nameField, `${e.details.find((d) => d.path === '/name').code}: ${e.message}`);
      showError(e, 'Creating the Namespace');
    } finally {
      submit.disabled = !canCreate;
    }
  });

  page('Namespaces',
    h('p', { class: 'lead' }, 'A Namespace is a tenant boundary: Agents, Configurations and Secrets live in exactly one.'),
    body,
    form);

  let polling = false;
  async function load() {
    const list = (await api('GET', paths.namespaces())).data;
    // whether each may be deleted: the same question, asked per Namespace
    const perms = await Promise.all(list.map((n) => loadPermissions(n.id).catch(() => null)));
    if (scope.disposed) return false;
    const summary = (l) => JSON.stringify(l.map((n) => [n.id, n.name, n.status]));
    const changed = summary(list) !== summary(ctx.namespaces);
    ctx.namespaces = list;
    if (changed) refreshHeader();
    if (!list.length) {
      replace(body, h('p', { class: 'empty' }, 'You cannot read any Namespace.'));
      return false;
    }
    replace(body, h('table', { class: 'list', id: 'namespaces-table' },
      h('caption', { class: 'visually-hidden' }, 'Namespaces'),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'Name'), h('th', { scope: 'col' }, 'Status'), h('th', { scope: 'col' }, 'Id'),
        h('th', { scope: 'col' }, 'Created'), h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Actions')))),
      h('tbody', {}, list.map((n, i) => h('tr', { dataset: { namespace: n.id, name: n.name, status: n.status } },
        h('td', { 'data-label': 'Name' }, n.id === ctx.ns ? h('strong', {}, n.name, ' (selected)') : link('/console/agents', n.name, { namespace: n.id })),
        h('td', { 'data-label': 'Status' }, h('span', { class: `badge ns-${n.status}` }, n.status)),
        h('td', { 'data-label': 'Id' }, h('code', {}, n.id)),
        h('td', { 'data-label': 'Created' }, when(n.createdAt)),
        h('td', { 'data-label': 'Actions' }, actionButton('Delete', {
          id: `delete-namespace-${n.name}`,
          kind: 'danger-outline',
          allowed: Boolean(perms[i] && perms[i].namespace.includes('delete')) && n.status !== 'deleting',
          onclick: () => remove(n),
        })))))));
    for (const b of body.querySelectorAll('button[data-mutating]')) {
      const row = b.closest('tr');
      b.setAttribute('aria-label', `Delete Namespace ${row.dataset.name}`);
    }
    return list.some((n) => n.status === 'provisioning' || n.status === 'deleting');
  }
  async function refresh() {
    const busy = await load();
    if (busy && !polling) {
      polling = true;
      scope.poll(1500, async () => {
        polling = await load();
        return polling;
      });
    }
  }

  async function remove(ns) {
    const confirmed = await confirmDialog({
      title: `Delete Namespace ${ns.name}?`,
      body: 'Only an empty Namespace can be deleted. Its name stays reserved afterwards.',
      confirmLabel: 'Delete Namespace',
      danger: true,
    });
    if (!confirmed) return;
    clearAlert();
    try {
      await api('DELETE', paths.namespace(ns.id));
      showStatus(`Deleting Namespace ${ns.name}…`);
      if (ns.id === ctx.ns) {
        await navigate(href('/console/namespaces', { namespace: '' }), { keepMessages: true });
        return;
      }
      await refresh();
    } catch (e) {
      showError(e, `Deleting Namespace ${ns.name}`);
    }
  }

  await refresh();
}
