// Connections: the Namespace's credential sources (saved connections to a model provider).
// A new one takes its key as a new Secret of the Namespace first; the key is never shown again,
// and a refused connection removes the Secret it was given.

import { api, paths } from './api.js';
import { confirmDialog, field, h, replace, setFieldError } from './dom.js';
import { actionButton, canCollection, clearAlert, ctx, page, showError, showStatus } from './shell.js';

const TYPES = [
  ['openai', 'OpenAI-compatible'],
  ['anthropic', 'Anthropic'],
];

export async function connectionsPage() {
  const ns = ctx.ns;
  const canCreate = canCollection('credential_source', 'create') && canCollection('secret', 'create');
  const canDelete = canCollection('credential_source', 'delete');
  const body = h('div', { class: 'table-wrap' }, h('p', { class: 'loading' }, 'Loading connections…'));

  const name = h('input', { type: 'text', id: 'connection-name', required: true, maxlength: 200, autocomplete: 'off', disabled: !canCreate });
  const type = h('select', { id: 'connection-type', disabled: !canCreate },
    TYPES.map(([value, label]) => h('option', { value }, label)));
  const baseUrl = h('input', { type: 'url', id: 'connection-base-url', autocomplete: 'off', placeholder: 'https://api.openai.com/v1', disabled: !canCreate });
  const key = h('input', { type: 'password', id: 'connection-key', required: true, autocomplete: 'new-password', disabled: !canCreate });
  const nameField = field({ label: 'Name', control: name, hint: 'Unique in the Namespace.' });
  const typeField = field({ label: 'Provider', control: type });
  const urlField = field({ label: 'Base URL', control: baseUrl, hint: 'Leave empty for the provider\'s public endpoint.', pointer: '/config/base_url' });
  const keyField = field({ label: 'API key', control: key, hint: 'Kept as a Secret of this Namespace; never shown again.' });
  const submit = h('button', { type: 'submit', id: 'create-connection', disabled: !canCreate, 'data-mutating': true }, 'Save connection');
  const form = h('form', { class: 'card inline-form', novalidate: true, 'aria-labelledby': 'create-connection-heading' },
    h('h2', { id: 'create-connection-heading' }, 'Save a connection'),
    nameField, typeField, urlField, keyField, h('div', { class: 'actions' }, submit));

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearAlert();
    for (const f of [nameField, urlField, keyField]) setFieldError(f, null);
    const wanted = name.value.trim();
    if (!wanted) {
      setFieldError(nameField, 'Enter a name.');
      name.focus();
      return;
    }
    if (!key.value) {
      setFieldError(keyField, 'Enter the API key.');
      key.focus();
      return;
    }
    submit.disabled = true;
    let secret = null;
    try {
      secret = (await api('POST', paths.secrets(ns), { name: `${wanted}-api-key`, value: key.value })).data;
      const request = {
        name: wanted,
        type: type.value,
        secrets: { api_key: { kind: 'secret', namespaceId: ns, id: secret.id } },
      };
      if (baseUrl.value.trim()) request.config = { base_url: baseUrl.value.trim() };
      const created = (await api('POST', paths.credentialSources(ns), request)).data;
      secret = null;
      name.value = '';
      baseUrl.value = '';
      key.value = '';
      showStatus(`Connection ${created.name} saved.`);
      await load();
    } catch (e) {
      if (secret) {
        // The connection was refused: the Secret made for its key goes again.
        await api('DELETE', paths.secret(ns, secret.id)).catch(() => {});
      }
      const at = (pointer) => e.details.find((d) => d.path === pointer);
      if (at('/name')) setFieldError(nameField, `${at('/name').code}: ${e.message}`);
      if (at('/config/base_url')) setFieldError(urlField, `${at('/config/base_url').code}: ${e.message}`);
      showError(e, 'Saving the connection');
    } finally {
      submit.disabled = !canCreate;
    }
  });

  page('Connections',
    h('p', { class: 'lead' }, 'Saved connections to model providers: a provider, its endpoint and the Secret holding its key.'),
    body,
    form);

  async function load() {
    const list = (await api('GET', paths.credentialSources(ns))).data;
    if (!list.length) {
      replace(body, h('p', { class: 'empty', id: 'connections-empty' }, 'No connection saved in this Namespace yet.'));
      return;
    }
    replace(body, h('table', { class: 'list', id: 'connections-table' },
      h('caption', { class: 'visually-hidden' }, 'Connections'),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'Name'), h('th', { scope: 'col' }, 'Provider'), h('th', { scope: 'col' }, 'Base URL'),
        h('th', { scope: 'col' }, 'State'), h('th', { scope: 'col' }, 'Id'),
        h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Actions')))),
      h('tbody', {}, list.map((s) => h('tr', { dataset: { connection: s.id, name: s.name } },
        h('td', { 'data-label': 'Name' }, s.name),
        h('td', { 'data-label': 'Provider' }, s.type),
        h('td', { 'data-label': 'Base URL' }, s.config.base_url ? h('code', {}, s.config.base_url) : 'public endpoint'),
        h('td', { 'data-label': 'State' }, h('span', { class: 'badge' }, s.state)),
        h('td', { 'data-label': 'Id' }, h('code', {}, s.id)),
        h('td', { 'data-label': 'Actions' }, actionButton('Delete', {
          id: `delete-connection-${s.name}`,
          kind: 'danger-outline',
          allowed: canDelete,
          onclick: () => remove(s),
        })))))));
    for (const b of body.querySelectorAll('button[data-mutating]')) {
      b.setAttribute('aria-label', `Delete connection ${b.closest('tr').dataset.name}`);
    }
  }

  async function remove(source) {
    const confirmed = await confirmDialog({
      title: `Delete connection ${source.name}?`,
      body: 'The Secret holding its key stays; delete it on its own when nothing uses it.',
      confirmLabel: 'Delete connection',
      danger: true,
    });
    if (!confirmed) return;
    clearAlert();
    try {
      await api('DELETE', paths.credentialSource(ns, source.id));
      showStatus(`Connection ${source.name} deleted.`);
      await load();
    } catch (e) {
      showError(e, `Deleting connection ${source.name}`);
    }
  }

  try {
    await load();
  } catch (e) {
    replace(body, h('p', { class: 'empty' }, 'The connections could not be loaded.'));
    showError(e, 'Loading connections');
  }
}
