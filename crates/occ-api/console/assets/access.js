// Access to the selected Namespace: who holds a Role on the whole Namespace (the built-in
// viewer, operator and admin Roles, or another of its Roles), granting and removing that, and
// the service principals automation signs in as. Installation administrators only: the API
// decides, this page offers only what it would allow.

import { api, paths } from './api.js';
import { confirmDialog, field, h, replace, setFieldError, when } from './dom.js';
import { actionButton, clearAlert, ctx, page, showError, showStatus } from './shell.js';

const BUILT_IN = ['viewer', 'operator', 'admin'];

/** The built-in Roles first (in their order), then the others by name. */
export function orderRoles(roles) {
  const rank = (r) => {
    const i = BUILT_IN.indexOf(r.name);
    return i < 0 ? BUILT_IN.length : i;
  };
  return [...roles].sort((a, b) => rank(a) - rank(b) || (a.name || a.id).localeCompare(b.name || b.id));
}

/** Whole-Namespace bindings: those naming no resource. */
export function namespaceWide(bindings) {
  return bindings.filter((b) => !b.resourceKind && !b.resourceId);
}

export async function accessPage({ scope }) {
  const ns = ctx.ns;
  const admin = Boolean(ctx.permissions && ctx.permissions.installation.includes('administer'));
  if (!ns) {
    page('Access', h('p', { class: 'empty' }, 'There is no Namespace to manage.'));
    return;
  }
  if (!admin) {
    page('Access', h('p', { class: 'empty', id: 'access-not-allowed' },
      'Managing who may do what in a Namespace needs Installation administration.'));
    return;
  }
  const grants = h('div', { class: 'table-wrap', id: 'access-grants' }, h('p', { class: 'loading' }, 'Loading…'));
  const principals = h('div', { class: 'table-wrap', id: 'service-principals' }, h('p', { class: 'loading' }, 'Loading…'));

  // ---- grant a Role on the whole Namespace ----
  const subject = h('input', { type: 'text', id: 'grant-subject', required: true, autocomplete: 'off', list: 'grant-subjects', spellcheck: false });
  const subjects = h('datalist', { id: 'grant-subjects' });
  const role = h('select', { id: 'grant-role', required: true });
  const subjectField = field({ label: 'Person or service principal', control: subject,
    hint: 'An identity id: prn_… for a person (their console session shows it), spn_… for a service principal.' });
  const roleField = field({ label: 'Role', control: role,
    hint: 'viewer reads everything; operator also deploys, stops and reads logs; admin also creates, changes and deletes. Your own grants must cover the Role.' });
  const grantButton = h('button', { type: 'submit', id: 'grant-role-button', 'data-mutating': true }, 'Grant on this Namespace');
  const grantForm = h('form', { class: 'card inline-form', novalidate: true, 'aria-labelledby': 'grant-heading' },
    h('h2', { id: 'grant-heading' }, 'Give access to the whole Namespace'),
    subjectField, subjects, roleField, h('div', { class: 'actions' }, grantButton));
  grantForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearAlert();
    setFieldError(subjectField, null);
    if (!subject.value.trim()) {
      setFieldError(subjectField, 'Enter an identity id.');
      subject.focus();
      return;
    }
    grantButton.disabled = true;
    try {
      await api('POST', paths.namespaceBindings(ns), { subjectKind: 'identity', subjectId: subject.value.trim(), roleId: role.value });
      showStatus(`Granted ${role.selectedOptions[0].textContent} to ${subject.value.trim()}.`);
      subject.value = '';
      await load();
    } catch (e) {
      const bad = e.details.find((d) => d.path === '/subjectId');
      if (bad) setFieldError(subjectField, `${bad.code}: ${e.message}`);
      showError(e, 'Granting the Role');
    } finally {
      grantButton.disabled = false;
    }
  });

  // ---- service principals ----
  const spName = h('input', { type: 'text', id: 'principal-name', required: true, maxlength: 64, autocomplete: 'off' });
  const spScoped = h('input', { type: 'checkbox', id: 'principal-scoped', checked: true });
  const spNameField = field({ label: 'Name', control: spName, hint: 'Unique in the installation, e.g. ci-deploy.' });
  const createSp = h('button', { type: 'submit', id: 'create-principal', 'data-mutating': true }, 'Create service principal');
  const spForm = h('form', { class: 'card inline-form', novalidate: true, 'aria-labelledby': 'principal-heading' },
    h('h2', { id: 'principal-heading' }, 'Create a service principal'),
    h('p', { class: 'hint' }, 'An identity for automation. Grant it a Role above, then issue it a key with ',
      h('code', {}, 'occ service-key create'), ' (the key is shown once and kept in a file).'),
    spNameField,
    h('div', { class: 'field' }, h('label', { class: 'check' }, spScoped, ' Only in this Namespace (its keys work nowhere else)')),
    h('div', { class: 'actions' }, createSp));
  spForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearAlert();
    setFieldError(spNameField, null);
    if (!spName.value.trim()) {
      setFieldError(spNameField, 'Enter a name.');
      spName.focus();
      return;
    }
    createSp.disabled = true;
    try {
      const body = { name: spName.value.trim() };
      if (spScoped.checked) body.namespaceId = ns;
      const made = (await api('POST', paths.servicePrincipals(), body)).data;
      spName.value = '';
      subject.value = made.id;
      showStatus(`Service principal ${made.name} created (${made.id}).`);
      await load();
    } catch (e) {
      const bad = e.details.find((d) => d.path === '/name');
      if (bad) setFieldError(spNameField, `${bad.code}: ${e.message}`);
      showError(e, 'Creating the service principal');
    } finally {
      createSp.disabled = false;
    }
  });

  page('Access',
    h('p', { class: 'lead' }, 'Who may do what in this Namespace, on everything in it, including what is created later.'),
    h('h2', {}, 'Roles on the whole Namespace'),
    grants,
    grantForm,
    h('h2', {}, 'Service principals'),
    principals,
    spForm);

  async function load() {
    const [roles, bindings, sps] = await Promise.all([
      api('GET', paths.roles(ns)),
      api('GET', paths.bindings(ns)),
      api('GET', paths.servicePrincipals()),
    ]);
    if (scope.disposed) return;
    const ordered = orderRoles(roles.data);
    const roleName = (id) => (ordered.find((r) => r.id === id) || {}).name || id;
    const chosen = role.value;
    replace(role, ordered.map((r) => h('option', { value: r.id, selected: r.id === chosen }, r.name || r.id)));
    const spById = new Map(sps.data.map((p) => [p.id, p]));
    const wide = namespaceWide(bindings.data);
    replace(grants, wide.length
      ? h('table', { class: 'list', id: 'access-grants-table' },
        h('caption', { class: 'visually-hidden' }, 'Roles on the whole Namespace'),
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Who'), h('th', { scope: 'col' }, 'Role'),
          h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Actions')))),
        h('tbody', {}, wide.map((b) => h('tr', { dataset: { binding: b.id, subject: b.subjectId, role: roleName(b.roleId) } },
          h('td', { 'data-label': 'Who' }, spById.has(b.subjectId) ? `${spById.get(b.subjectId).name || ''} ` : '', h('code', {}, b.subjectId)),
          h('td', { 'data-label': 'Role' }, roleName(b.roleId)),
          h('td', { 'data-label': 'Actions' }, actionButton('Remove', {
            allowed: true, kind: 'danger-outline', onclick: () => removeGrant(b, roleName(b.roleId)),
          }))))))
      : h('p', { class: 'empty' }, 'Nobody holds a Role on the whole Namespace.'));
    const mine = sps.data.filter((p) => !p.namespaceId || p.namespaceId === ns);
    replace(subjects, mine.map((p) => h('option', { value: p.id }, p.name || p.id)));
    replace(principals, mine.length
      ? h('table', { class: 'list', id: 'service-principals-table' },
        h('caption', { class: 'visually-hidden' }, 'Service principals'),
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Name'), h('th', { scope: 'col' }, 'Id'),
          h('th', { scope: 'col' }, 'Scope'), h('th', { scope: 'col' }, 'State'), h('th', { scope: 'col' }, 'Created'),
          h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Actions')))),
        h('tbody', {}, mine.map((p) => h('tr', { dataset: { principal: p.id, name: p.name || '' } },
          h('td', { 'data-label': 'Name' }, p.name || '—'),
          h('td', { 'data-label': 'Id' }, h('code', {}, p.id)),
          h('td', { 'data-label': 'Scope' }, p.namespaceId ? 'this Namespace' : 'the installation'),
          h('td', { 'data-label': 'State' }, p.disabled ? h('span', { class: 'badge state-failed' }, 'disabled') : h('span', { class: 'badge state-running' }, 'enabled')),
          h('td', { 'data-label': 'Created' }, when(p.createdAt)),
          h('td', { 'data-label': 'Actions' },
            actionButton(p.disabled ? 'Enable' : 'Disable', { allowed: true, kind: 'secondary', onclick: () => toggle(p) }),
            ' ',
            actionButton('Delete', { allowed: true, kind: 'danger-outline', onclick: () => removePrincipal(p) }))))))
      : h('p', { class: 'empty' }, 'No service principal acts in this Namespace.'));
  }

  async function removeGrant(binding, name) {
    const confirmed = await confirmDialog({
      title: `Remove ${name} from ${binding.subjectId}?`,
      body: 'They lose what this Role grants in the Namespace on their next request.',
      confirmLabel: 'Remove',
      danger: true,
    });
    if (!confirmed) return;
    clearAlert();
    try {
      await api('DELETE', `${paths.bindings(ns)}/${encodeURIComponent(binding.id)}`);
      showStatus(`Removed ${name} from ${binding.subjectId}.`);
      await load();
    } catch (e) {
      showError(e, 'Removing the Role');
    }
  }

  async function toggle(p) {
    clearAlert();
    try {
      await api('POST', `${paths.servicePrincipal(p.id)}/${p.disabled ? 'enable' : 'disable'}`);
      showStatus(`Service principal ${p.name || p.id} ${p.disabled ? 'enabled' : 'disabled: its keys are refused from now on'}.`);
      await load();
    } catch (e) {
      showError(e, p.disabled ? 'Enabling the service principal' : 'Disabling the service principal');
    }
  }

  async function removePrincipal(p) {
    const confirmed = await confirmDialog({
      title: `Delete service principal ${p.name || p.id}?`,
      body: 'Its keys and its grants are deleted with it.',
      confirmLabel: 'Delete service principal',
      danger: true,
    });
    if (!confirmed) return;
    clearAlert();
    try {
      await api('DELETE', paths.servicePrincipal(p.id));
      showStatus(`Service principal ${p.name || p.id} deleted.`);
      await load();
    } catch (e) {
      showError(e, 'Deleting the service principal');
    }
  }

  await load();
}
