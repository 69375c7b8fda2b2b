// Sign-in with email and password: the API sets the HttpOnly session cookie; the console keeps
// nothing itself.

import { api, paths } from './api.js';
import { field, h } from './dom.js';
import { ctx, navigate, page, showError, showStatus, clearAlert } from './shell.js';

function nextUrl() {
  const next = new URLSearchParams(location.search).get('next');
  // only console paths: never an open redirect
  return next && next.startsWith('/console/') && !next.startsWith('//') ? next : '/console/agents';
}

export async function signInPage() {
  const { data } = await api('GET', paths.session());
  if (data && data.user) {
    ctx.user = data.user;
    await navigate(nextUrl(), { replace: true });
    return;
  }
  const email = h('input', { type: 'email', name: 'email', autocomplete: 'username', required: true, id: 'sign-in-email' });
  const password = h('input', { type: 'password', name: 'password', autocomplete: 'current-password', required: true, id: 'sign-in-password' });
  const submit = h('button', { type: 'submit', id: 'sign-in-submit' }, 'Sign in');
  const form = h('form', { class: 'card narrow', novalidate: true },
    field({ label: 'Email', control: email }),
    field({ label: 'Password', control: password }),
    h('div', { class: 'actions' }, submit));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearAlert();
    submit.disabled = true;
    try {
      await api('POST', paths.signIn(), { email: email.value.trim(), password: password.value });
      ctx.user = null;
      password.value = '';
      await navigate(nextUrl(), { replace: true });
      showStatus('Signed in.');
    } catch (e) {
      showError(e, 'Signing in');
      if (e.status === 403) {
        showStatus('Open the console at the address occ printed (its public origin), not another name for the same host.');
      }
      submit.disabled = false;
      password.focus();
    }
  });
  page('Sign in to occ',
    h('p', { class: 'lead' }, 'Manage the OpenClaw Agents of this occ installation.'),
    form);
}
