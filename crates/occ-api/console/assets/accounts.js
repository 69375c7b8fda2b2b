// People's accounts, for Installation administrators: every account with its principal (the id
// the Access page grants Roles to), creating one, and disabling, enabling or ending the
// sessions of one — each at the version this page read, so a change made meanwhile by someone
// else is refused (409) instead of overwritten.

import { api, paths } from './api.js';
import { field, h, replace, setFieldError, when } from './dom.js';
import { actionButton, clearAlert, ctx, page, showError, showStatus } from './shell.js';

export async function accountsPage({ scope }) {
  const admin = Boolean(ctx.permissions && ctx.permissions.installation.includes('administer'));
  if (!admin) {
    page('Accounts', h('p', { class: 'empty', id: 'accounts-not-allowed' },
      'Administering accounts needs Installation administration.'));
    return;
  }
  const list = h('div', { class: 'table-wrap', id: 'accounts' }, h('p', { class: 'loading' }, 'Loading accounts…'));

  const email = h('input', { type: 'email', id: 'account-email-input', required: true, autocomplete: 'off' });
  const name = h('input', { type: 'text', id: 'account-name', maxlength: 200, autocomplete: 'off' });
  const password = h('input', { type: 'password', id: 'account-password', required: true, minlength: 12, maxlength: 128, autocomplete: 'new-password' });
  const emailField = field({ label: 'Email', control: email });
  const nameField = field({ label: 'Name (optional)', control: name });
  const passwordField = field({ label: 'First password', control: password, hint: '12 to 128 characters; give it to the person privately.' });
  const submit = h('button', { type: 'submit', id: 'create-account', 'data-mutating': true }, 'Create account');
  const form = h('form', { class: 'card inline-form', novalidate: true, 'aria-labelledby': 'create-account-heading' },
    h('h2', { id: 'create-account-heading' }, 'Create an account'),
    h('p', { class: 'hint' }, 'A new account holds no access: grant it a Role on a Namespace on the Access page.'),
    emailField, nameField, passwordField, h('div', { class: 'actions' }, submit));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearAlert();
    for (const f of [emailField, passwordField, nameField]) setFieldError(f, null);
    if (!email.value.trim()) {
      setFieldError(emailField, 'Enter an email.');
      email.focus();
      return;
    }
    submit.disabled = true;
    try {
      const body = { email: email.value.trim(), password: password.value };
      if (name.value.trim()) body.name = name.value.trim();
      const made = (await api('POST', paths.accounts(), body)).data;
      email.value = '';
      name.value = '';
      password.value = '';
      showStatus(`Account ${made.email} created; its principal is ${made.principalId}.`);
      await load();
    } catch (e) {
      const byPath = { '/email': emailField, '/password': passwordField, '/name': nameField };
      for (const d of e.details) if (byPath[d.path]) setFieldError(byPath[d.path], `${d.code}: ${e.message}`);
      showError(e, 'Creating the account');
    } finally {
      submit.disabled = false;
    }
  });

  page('Accounts',
    h('p', { class: 'lead' }, 'The people who sign in to this installation. Disabling an account, or ending its sessions, takes effect on its next request.'),
    list,
    form);

  async function load() {
    const accounts = (await api('GET', paths.accounts())).data;
    if (scope.disposed) return;
    replace(list, h('table', { class: 'list', id: 'accounts-table' },
      h('caption', { class: 'visually-hidden' }, 'Accounts'),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'Email'), h('th', { scope: 'col' }, 'Name'), h('th', { scope: 'col' }, 'Principal'),
        h('th', { scope: 'col' }, 'State'), h('th', { scope: 'col' }, 'Created'),
        h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Actions')))),
      h('tbody', {}, accounts.map((a) => {
        const self = ctx.user && ctx.user.id === a.id;
        return h('tr', { dataset: { account: a.id, email: a.email, disabled: String(a.disabled) } },
          h('td', { 'data-label': 'Email' }, a.email, self ? ' (you)' : ''),
          h('td', { 'data-label': 'Name' }, a.name),
          h('td', { 'data-label': 'Principal' }, h('code', {}, a.principalId)),
          h('td', { 'data-label': 'State' }, a.disabled
            ? h('span', { class: 'badge state-failed' }, 'disabled')
            : h('span', { class: 'badge state-running' }, 'enabled')),
          h('td', { 'data-label': 'Created' }, when(a.createdAt)),
          h('td', { 'data-label': 'Actions' },
            actionButton(a.disabled ? 'Enable' : 'Disable', {
              allowed: !self, kind: 'secondary', onclick: () => change(a, a.disabled ? 'enable' : 'disable'),
            }),
            ' ',
            actionButton('End sessions', { allowed: !a.disabled, kind: 'secondary', onclick: () => change(a, 'revoke') })));
      }))));
  }

  async function change(account, what) {
    clearAlert();
    try {
      await api('POST', `${paths.account(account.id)}/${what}`, { expectedVersion: account.version });
      const done = { disable: 'disabled: it signs in no more', enable: 'enabled', revoke: 'signed out everywhere' }[what];
      showStatus(`Account ${account.email} ${done}.`);
      await load();
    } catch (e) {
      showError(e, `Changing the account ${account.email}`);
    }
  }

  await load();
}
