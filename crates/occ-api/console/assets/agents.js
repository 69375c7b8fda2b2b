// The Agents of a Namespace (with each one's lifecycle state) and the Create Agent form.

import { ApiError, api, paths } from './api.js';
import { field, h, replace, setFieldError, uid, when } from './dom.js';
import { STATES, isTransitional, latestRevision, lifecycleState } from './lifecycle.js';
import { letAgentUseSecret } from './secret-access.js';
import {
  actionButton, badge, canCollection, clearAlert, ctx, href, link, navigate, page, showError, showStatus,
} from './shell.js';

/** The four workspace files, in the order the console shows them. */
export const FILES = ['AGENTS.md', 'SOUL.md', 'IDENTITY.md', 'USER.md'];

/** A stable element id for a workspace file (`AGENTS.md` → `agents-md`). */
export function fileKey(name) {
  return name.toLowerCase().replace('.', '-');
}

/** Textarea values use LF newlines, whatever the platform typed. */
export function lf(text) {
  return text.replace(/\r\n?/g, '\n');
}

/**
 * An Agent's revisions and the status of its newest deployment (`latest` is null when it has
 * no revision the caller may read).
 */
export async function loadLatest(ns, agentId) {
  const revisions = (await api('GET', paths.revisions(ns, agentId))).data;
  const revision = latestRevision(revisions);
  if (!revision) return { revisions, latest: null };
  const deployment = (await api('GET', paths.deployment(ns, agentId, revision.id))).data;
  return { revisions, latest: { revision, deployment } };
}

// ---- Agents list --------------------------------------------------------------------------------

export async function agentsPage({ scope }) {
  if (!ctx.ns) {
    page('Agents', h('p', {}, 'You cannot read any Namespace yet. Ask an administrator for access.'));
    return;
  }
  const canCreate = canCollection('agent', 'create');
  const body = h('div', { class: 'table-wrap' }, h('p', { class: 'loading' }, 'Loading Agents…'));
  const refresh = h('button', { type: 'button', class: 'secondary', id: 'refresh-agents', onclick: () => refreshList().catch((e) => showError(e, 'Refreshing')) }, 'Refresh');
  page('Agents',
    h('div', { class: 'toolbar' },
      actionButton('Create Agent', {
        allowed: canCreate,
        id: 'create-agent',
        onclick: () => navigate(href('/console/agents/new')),
      }),
      actionButton('From a Preset', {
        allowed: canCreate,
        id: 'create-from-preset',
        kind: 'secondary',
        onclick: () => navigate(href('/console/agents/from-preset')),
      }),
      refresh),
    body);

  let polling = false;
  async function load() {
    const agents = (await api('GET', paths.agents(ctx.ns))).data;
    const rows = await Promise.all(agents.map(async (agent) => {
      const { latest } = await loadLatest(ctx.ns, agent.id);
      return { agent, latest, state: lifecycleState(agent, latest) };
    }));
    if (scope.disposed) return false;
    if (!rows.length) {
      replace(body, h('p', { class: 'empty' }, 'No Agents in this Namespace yet.',
        canCreate ? ' Create one to run an OpenClaw gateway.' : ''));
    } else {
      rows.sort((a, b) => a.agent.name.localeCompare(b.agent.name));
      replace(body, h('table', { class: 'list', id: 'agents-table' },
        h('caption', { class: 'visually-hidden' }, 'Agents in this Namespace'),
        h('thead', {}, h('tr', {},
          h('th', { scope: 'col' }, 'Name'), h('th', { scope: 'col' }, 'State'),
          h('th', { scope: 'col' }, 'Active revision'), h('th', { scope: 'col' }, 'Configuration'),
          h('th', { scope: 'col' }, 'Created'))),
        h('tbody', {}, rows.map(({ agent, latest, state }) => h('tr', { dataset: { agent: agent.id, name: agent.name } },
          h('td', { 'data-label': 'Name' }, link(`/console/agents/${agent.id}`, agent.name)),
          h('td', { 'data-label': 'State' }, badge(state, STATES[state])),
          h('td', { 'data-label': 'Active revision' },
            agent.activeRevisionId
              ? (latest && latest.revision.id === agent.activeRevisionId ? `#${latest.revision.revision}` : h('code', {}, agent.activeRevisionId))
              : '—'),
          h('td', { 'data-label': 'Configuration' }, h('code', {}, agent.configurationId)),
          h('td', { 'data-label': 'Created' }, when(agent.createdAt)))))));
    }
    return rows.some((r) => isTransitional(r.state));
  }
  /** Loads, and while some Agent is changing state, keeps the list updating by itself. */
  async function refreshList() {
    const busy = await load();
    if (busy && !polling) {
      polling = true;
      scope.poll(2000, async () => {
        polling = await load();
        return polling;
      });
    }
  }
  try {
    await refreshList();
  } catch (e) {
    replace(body, h('p', { class: 'empty' }, 'The Agents could not be loaded.'));
    throw e;
  }
}

// ---- JSON editor --------------------------------------------------------------------------------

function unescapePointer(segment) {
  return segment.replace(/~1/g, '/').replace(/~0/g, '~');
}

/** Where a JSON pointer's last key appears in the text (approximately: keys in order). */
function locate(text, pointer) {
  let from = 0;
  let found = null;
  for (const raw of pointer.split('/').slice(1)) {
    const key = unescapePointer(raw);
    if (/^\d+$/.test(key)) continue;
    const needle = JSON.stringify(key);
    const at = text.indexOf(needle, from);
    if (at < 0) break;
    found = { start: at, end: at + needle.length };
    from = at + needle.length;
  }
  return found;
}

/**
 * A JSON document editor: a labelled textarea, client-side syntax errors with their line and
 * column, and the API's validation details listed at the editor, each selecting its place.
 */
export function jsonEditor({ id, label, value, hint, readOnly }) {
  const textarea = h('textarea', {
    id, rows: 14, spellcheck: 'false', class: 'code', value, readOnly,
    autocapitalize: 'off', autocomplete: 'off',
  });
  const wrapper = field({ label, control: textarea, hint });
  const list = h('ul', { class: 'json-errors', id: `${id}-problems`, 'aria-label': `Problems in ${label}`, hidden: true });
  wrapper.append(list);
  textarea.setAttribute('aria-describedby', `${textarea.getAttribute('aria-describedby')} ${list.id}`);

  function select(start, end) {
    textarea.focus();
    textarea.setSelectionRange(start, end);
  }

  const editor = {
    wrapper,
    textarea,
    /** Shows problems: `[{pointer, code, message}]` (pointer relative to the document). */
    setProblems(problems) {
      replace(list, problems.map((p) => {
        const where = p.pointer === undefined ? null : locate(textarea.value, p.pointer);
        const label = p.pointer ? p.pointer : '(the document)';
        return h('li', {},
          where
            ? h('button', { type: 'button', class: 'link', onclick: () => select(where.start, where.end) }, label)
            : h('code', {}, label),
          ` ${p.code || ''}${p.message ? ` — ${p.message}` : ''}`);
      }));
      list.hidden = problems.length === 0;
      setFieldError(wrapper, problems.length ? `${problems.length} problem${problems.length > 1 ? 's' : ''} in this document (listed below).` : null);
    },
    clear() {
      editor.setProblems([]);
    },
    /** The parsed object, or null after showing why it is not one. */
    parse() {
      let parsed;
      try {
        parsed = JSON.parse(textarea.value);
      } catch (e) {
        const m = /position (\d+)/.exec(e.message);
        let where = '';
        if (m) {
          const pos = Number(m[1]);
          const before = textarea.value.slice(0, pos).split('\n');
          where = ` (line ${before.length}, column ${before[before.length - 1].length + 1})`;
          select(pos, Math.min(pos + 1, textarea.value.length));
        }
        editor.setProblems([{ code: 'INVALID_JSON', message: `not valid JSON${where}: ${e.message}` }]);
        return null;
      }
      if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) {
        editor.setProblems([{ pointer: '', code: 'INVALID_TYPE', message: 'must be a JSON object' }]);
        return null;
      }
      editor.clear();
      return parsed;
    },
    /** Shows an API error's details under `/values` at the editor; true if there were any. */
    showApiDetails(err, base = '/values') {
      const mine = err.details.filter((d) => d.path === base || d.path.startsWith(`${base}/`));
      if (!mine.length) return false;
      editor.setProblems(mine.map((d) => ({ pointer: d.path.slice(base.length), code: d.code })));
      return true;
    },
  };
  return editor;
}

// ---- Create Agent -------------------------------------------------------------------------------

const STARTER_DOCUMENT = {
  agents: { defaults: { model: { primary: 'openai/gpt-5' } } },
};

export async function createAgentPage() {
  if (!ctx.ns) {
    page('Create Agent', h('p', {}, 'Select a Namespace first.'));
    return;
  }
  const canCreate = canCollection('agent', 'create');
  const canCreateConfiguration = canCollection('configuration', 'create');

  // What the form starts from: modes, known Configurations, the stock workspace files.
  const [modes, agents, defaults] = await Promise.all([
    // the modes the Compute Driver runs, when the caller may read the Installation
    ctx.permissions.installation.includes('read')
      ? api('GET', paths.installation()).then((r) => r.data.capabilities.agentProvisioning.executionModes)
      : Promise.resolve(['embedded']),
    api('GET', paths.agents(ctx.ns)).then((r) => r.data),
    canCreate ? api('GET', paths.defaults(ctx.ns)).then((r) => r.data) : Promise.resolve(null),
  ]);
  const usedBy = new Map();
  for (const a of agents) {
    if (!usedBy.has(a.configurationId)) usedBy.set(a.configurationId, []);
    usedBy.get(a.configurationId).push(a.name);
  }

  // -- fields
  const name = h('input', { type: 'text', id: 'agent-name', name: 'name', required: true, maxlength: 200, autocomplete: 'off' });
  const nameField = field({ label: 'Name', control: name, hint: 'Unique in the Namespace.', pointer: '/name' });

  const sourceName = uid('configuration-source');
  const useExisting = h('input', { type: 'radio', name: sourceName, id: 'configuration-existing', value: 'existing' });
  const useNew = h('input', { type: 'radio', name: sourceName, id: 'configuration-new', value: 'new', disabled: !canCreateConfiguration });
  const select = h('select', { id: 'configuration-select' },
    [...usedBy.entries()].map(([id, names]) => h('option', { value: id }, `${id} — used by ${names.join(', ')}`)),
    h('option', { value: '' }, 'Another Configuration (enter its id)'));
  const otherId = h('input', { type: 'text', id: 'configuration-id', autocomplete: 'off', spellcheck: 'false', placeholder: 'cfg_…' });
  const otherField = field({ label: 'Configuration id', control: otherId, pointer: '/configurationId' });
  const selectField = field({ label: 'Configuration', control: select });
  const existingPanel = h('div', { class: 'subpanel', id: 'configuration-existing-panel' }, selectField, otherField);
  const editor = jsonEditor({
    id: 'configuration-json',
    label: 'New Configuration (openclaw.json)',
    value: JSON.stringify(STARTER_DOCUMENT, null, 2),
    hint: 'The native OpenClaw configuration document. It becomes generation 1 of a new Configuration.',
  });
  // A model provider's key, optional: stored as a Secret, bound into the new Configuration as an
  // environment variable that the provider's `apiKey` names, and granted to the Agent.
  const keyEnabled = h('input', { type: 'checkbox', id: 'model-key-enabled' });
  const providerId = h('input', { type: 'text', id: 'model-provider', value: 'openai', autocomplete: 'off', spellcheck: 'false' });
  const baseUrl = h('input', { type: 'url', id: 'model-base-url', value: 'https://api.openai.com/v1', autocomplete: 'off', spellcheck: 'false' });
  const apiStyle = h('select', { id: 'model-api' },
    h('option', { value: 'openai-responses' }, 'openai-responses'),
    h('option', { value: 'openai-completions' }, 'openai-completions'));
  const modelId = h('input', { type: 'text', id: 'model-id', value: 'gpt-5', autocomplete: 'off', spellcheck: 'false' });
  const modelKey = h('input', { type: 'password', id: 'model-key', autocomplete: 'off' });
  const providerField = field({ label: 'Provider id', control: providerId, hint: 'Its key under models.providers (lowercase letters, digits, -).' });
  const baseUrlField = field({ label: 'Base URL', control: baseUrl, hint: 'The provider\'s API, e.g. https://api.openai.com/v1 or a local OpenAI-compatible endpoint such as http://127.0.0.1:8080/v1.' });
  const apiField = field({ label: 'API', control: apiStyle });
  const modelField = field({ label: 'Model', control: modelId, hint: 'Becomes the Agent\'s primary model (<provider>/<model>).' });
  const keyField = field({ label: 'API key', control: modelKey, hint: 'Stored as a Secret of this Namespace; never shown again.' });
  const keyPanel = h('div', { class: 'subpanel', id: 'model-key-panel' }, providerField, baseUrlField, apiField, modelField, keyField);
  const keyToggle = h('label', { class: 'check' }, keyEnabled, ' Give the Agent a model provider key');
  function syncKeyPanel() { keyPanel.hidden = !keyEnabled.checked; }
  keyEnabled.addEventListener('change', syncKeyPanel);
  syncKeyPanel();
  const newPanel = h('div', { class: 'subpanel', id: 'configuration-new-panel' }, editor.wrapper, keyToggle, keyPanel);

  // The key's Secret once stored: kept across submits, so an Agent created on a later attempt
  // (after its Configuration was made) is still granted it.
  let modelSecret = null;

  /** The provider section's values, or null after marking what is wrong. */
  function providerInput() {
    const provider = providerId.value.trim();
    if (!/^[a-z0-9][a-z0-9-]{0,62}$/.test(provider)) {
      setFieldError(providerField, 'Use lowercase letters, digits and -.');
      return null;
    }
    if (!/^https?:\/\/[^\s@/]+/.test(baseUrl.value.trim())) {
      setFieldError(baseUrlField, 'Enter an http(s) URL without credentials.');
      return null;
    }
    if (!modelId.value.trim()) {
      setFieldError(modelField, 'Enter the model id.');
      return null;
    }
    if (!modelKey.value) {
      setFieldError(keyField, 'Enter the provider\'s API key.');
      return null;
    }
    // Not `<PROVIDER>_API_KEY`: `OPENAI_…` and `ANTHROPIC_…` are names a binding may not take.
    const variable = `MODEL_KEY_${provider.toUpperCase().replace(/-/g, '_')}`;
    return { provider, baseUrl: baseUrl.value.trim(), api: apiStyle.value, model: modelId.value.trim(), key: modelKey.value, variable };
  }

  /** The document with the provider wired in: its `apiKey` names the bound variable. */
  function withProvider(values, p) {
    const doc = structuredClone(values);
    doc.models = doc.models || {};
    doc.models.providers = doc.models.providers || {};
    doc.models.providers[p.provider] = {
      baseUrl: p.baseUrl, api: p.api, apiKey: `\${${p.variable}}`, models: [{ id: p.model, name: p.model }],
    };
    doc.agents = doc.agents || {};
    doc.agents.defaults = doc.agents.defaults || {};
    doc.agents.defaults.model = { primary: `${p.provider}/${p.model}` };
    return doc;
  }

  function syncConfigurationPanels() {
    existingPanel.hidden = !useExisting.checked;
    newPanel.hidden = !useNew.checked;
    otherField.hidden = select.value !== '';
  }
  (usedBy.size || !canCreateConfiguration ? useExisting : useNew).checked = true;
  for (const el of [useExisting, useNew, select]) el.addEventListener('change', syncConfigurationPanels);
  syncConfigurationPanels();

  const mode = h('select', { id: 'execution-mode' }, modes.map((m) => h('option', { value: m }, m)));
  const modeField = field({
    label: 'Execution mode', control: mode, pointer: '/executionMode',
    hint: 'What the installation\'s Compute Driver runs: embedded runs the gateway as one process; dedicated runs a Codex harness beside the gateway (the Configuration must select a Codex model).',
  });
  // A dedicated Agent's Codex harness logs in with a credential from a Secret of the Namespace,
  // or with the one a Backend issued to a ServiceAccount; only the harness receives it, never
  // the gateway.
  const authMethod = h('select', { id: 'harness-auth-method' },
    h('option', { value: 'api_key' }, 'api_key — an OpenAI API key'),
    h('option', { value: 'codex_pat' }, 'codex_pat — a Codex access token'),
    h('option', { value: 'chatgpt_service_account' }, 'chatgpt_service_account — a ChatGPT service account'));
  const authMethodField = field({
    label: 'Harness credential', control: authMethod, pointer: '/harnessAuth/method',
    hint: 'How the dedicated Codex harness logs in.',
  });
  const authSecret = h('input', { type: 'text', id: 'harness-auth-secret', autocomplete: 'off', spellcheck: 'false', placeholder: 'sec_…' });
  const authSecretField = field({
    label: 'Credential Secret id', control: authSecret, pointer: '/harnessAuth/source',
    hint: 'The Secret of this Namespace that holds the key or token (`occ secret list`).',
  });
  const authAccount = h('input', { type: 'text', id: 'harness-auth-account', autocomplete: 'off', spellcheck: 'false', placeholder: 'sa_…' });
  const authAccountField = field({
    label: 'ServiceAccount id', control: authAccount, pointer: '/harnessAuth/serviceAccountId',
    hint: 'A ServiceAccount of this Namespace with an issued credential (`occ service-account issue-credential`).',
  });
  const backend = h('input', { type: 'text', id: 'backend-id', autocomplete: 'off', spellcheck: 'false', placeholder: 'chatgpt' });
  const backendField = field({
    label: 'Backend id', control: backend, pointer: '/backendId',
    hint: 'The Backend that issued the ServiceAccount\'s credential (its id in the installation settings).',
  });
  const authPanel = h('div', { class: 'subpanel', id: 'harness-auth-panel' }, authMethodField, authSecretField, authAccountField, backendField);
  const byAccount = () => authMethod.value === 'chatgpt_service_account';
  function syncMode() {
    authPanel.hidden = mode.value !== 'dedicated';
    authSecretField.hidden = byAccount();
    authAccountField.hidden = !byAccount();
    backendField.hidden = !byAccount();
  }
  mode.addEventListener('change', syncMode);
  authMethod.addEventListener('change', syncMode);
  syncMode();

  const defaultsId = h('input', { type: 'hidden', id: 'workspace-defaults-id', value: defaults ? defaults.id : '' });
  const fileFields = FILES.map((file) => {
    const textarea = h('textarea', {
      id: `file-${fileKey(file)}`, rows: 10, class: 'code', spellcheck: 'false', dataset: { file },
      value: defaults ? defaults.files[file] || '' : '',
    });
    return field({ label: file, control: textarea, pointer: `/initialWorkspaceFiles/${file}` });
  });
  const defaultsNote = h('p', { class: 'hint', id: 'defaults-note' });
  const staleNotice = h('div', { class: 'notice warning', id: 'defaults-stale', hidden: true });

  function fillDefaults(d) {
    defaultsId.value = d.id;
    for (const f of fileFields) f.querySelector('textarea').value = d.files[f.querySelector('textarea').dataset.file] || '';
    defaultsNote.textContent = `Prefilled with the stock files of the installed OpenClaw (defaults ${d.id.slice(0, 12)}…). Edit them as this Agent's initial workspace.`;
  }
  if (defaults) fillDefaults(defaults);

  async function reloadDefaults() {
    try {
      const d = (await api('GET', paths.defaults(ctx.ns))).data;
      fillDefaults(d);
      staleNotice.hidden = true;
      staleNotice.replaceChildren();
      clearAlert();
      showStatus('The stock workspace files were reloaded into the four files.');
      fileFields[0].querySelector('textarea').focus();
    } catch (e) {
      showError(e, 'Reloading the stock files');
    }
  }

  const submit = h('button', { type: 'submit', id: 'create-agent-submit', disabled: !canCreate, 'data-mutating': true }, 'Create Agent');
  const form = h('form', { class: 'stack', novalidate: true, id: 'create-agent-form' },
    h('fieldset', {}, h('legend', {}, 'Agent'), nameField, modeField, authPanel),
    h('fieldset', { id: 'configuration-fieldset', dataset: { pointer: '/configurationId' } },
      h('legend', {}, 'Configuration'),
      h('div', { class: 'choices' },
        h('div', { class: 'choice' }, useExisting, h('label', { for: useExisting.id }, 'Use an existing Configuration')),
        h('div', { class: 'choice' }, useNew, h('label', { for: useNew.id }, 'Create a new Configuration'))),
      existingPanel, newPanel),
    h('fieldset', { id: 'workspace-fieldset' },
      h('legend', {}, 'Workspace files'),
      defaultsNote, staleNotice, defaultsId,
      h('div', { class: 'files-grid' }, fileFields),
      h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'secondary', id: 'reload-defaults-inline', disabled: !canCreate, onclick: reloadDefaults },
          'Reload stock files'))),
    h('div', { class: 'actions' }, submit, link('/console/agents', 'Cancel', undefined, { class: 'button secondary' })));

  const allFields = [nameField, otherField, modeField, authMethodField, authSecretField, ...fileFields];
  function clearErrors() {
    for (const f of allFields) setFieldError(f, null);
    editor.clear();
  }
  function showDetails(err) {
    let shown = 0;
    for (const d of err.details) {
      const target = allFields.find((f) => f.dataset.pointer === d.path);
      if (target && !target.hidden) {
        setFieldError(target, `${d.code}: ${err.message}`);
        shown += 1;
      }
    }
    return shown;
  }

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearAlert();
    clearErrors();
    if (!name.value.trim()) {
      setFieldError(nameField, 'Enter a name.');
      name.focus();
      return;
    }
    if (mode.value === 'dedicated' && byAccount() && !authAccount.value.trim()) {
      setFieldError(authAccountField, 'Enter the id of the ServiceAccount whose credential the harness uses.');
      authAccount.focus();
      return;
    }
    if (mode.value === 'dedicated' && !byAccount() && !authSecret.value.trim()) {
      setFieldError(authSecretField, 'Enter the id of the Secret that holds the harness credential.');
      authSecret.focus();
      return;
    }
    submit.disabled = true;
    try {
      let configurationId;
      if (useNew.checked) {
        let values = editor.parse();
        if (!values) return;
        const provider = keyEnabled.checked ? providerInput() : null;
        if (keyEnabled.checked && !provider) return;
        const request = { kind: 'agent', values };
        if (provider) {
          try {
            modelSecret = (await api('POST', paths.secrets(ctx.ns), { name: `${name.value.trim()}-model-key`, value: provider.key })).data;
          } catch (e) {
            showError(e, 'Storing the API key');
            return;
          }
          values = withProvider(values, provider);
          request.values = values;
          request.secretBindings = { [provider.variable]: { source: { kind: 'secret', namespaceId: ctx.ns, id: modelSecret.id } } };
        }
        let created;
        try {
          created = (await api('POST', paths.configurations(ctx.ns), request)).data;
        } catch (e) {
          // Nothing half-made stays: the key's Secret goes with the refused Configuration.
          if (modelSecret) await api('DELETE', paths.secret(ctx.ns, modelSecret.id)).catch(() => {});
          modelSecret = null;
          if (e instanceof ApiError && editor.showApiDetails(e)) editor.textarea.focus();
          showError(e, 'Creating the Configuration');
          return;
        }
        if (provider) {
          editor.textarea.value = JSON.stringify(values, null, 2);
          keyEnabled.checked = false;
          modelKey.value = '';
          syncKeyPanel();
        }
        configurationId = created.id;
        // From now on the form uses it: submitting again does not create another one.
        select.prepend(h('option', { value: created.id }, `${created.id} — created now (generation ${created.generation})`));
        select.value = created.id;
        useExisting.checked = true;
        syncConfigurationPanels();
        showStatus(`Configuration ${created.id} created (generation ${created.generation}).`);
      } else {
        configurationId = select.value || otherId.value.trim();
        if (!configurationId) {
          setFieldError(otherField, 'Enter the id of a Configuration of this Namespace.');
          otherId.focus();
          return;
        }
      }
      const files = {};
      for (const f of fileFields) {
        const textarea = f.querySelector('textarea');
        files[textarea.dataset.file] = lf(textarea.value);
      }
      const body = {
        name: name.value.trim(),
        configurationId,
        executionMode: mode.value,
        harnessAuth: mode.value !== 'dedicated'
          ? { method: 'runtime' }
          : byAccount()
            ? { method: 'chatgpt_service_account', serviceAccountId: authAccount.value.trim() }
            : { method: authMethod.value, source: { kind: 'secret', namespaceId: ctx.ns, id: authSecret.value.trim() } },
        initialWorkspaceFiles: files,
      };
      if (mode.value === 'dedicated' && byAccount() && backend.value.trim()) body.backendId = backend.value.trim();
      if (defaultsId.value) body.workspaceDefaultsId = defaultsId.value;
      let agent;
      try {
        agent = (await api('POST', paths.agents(ctx.ns), body)).data;
      } catch (e) {
        showError(e, 'Creating the Agent');
        if (e.status === 409) await checkStale();
        if (e.status === 400 && showDetails(e)) form.querySelector('[aria-invalid="true"]')?.focus();
        return;
      }
      if (modelSecret) {
        try {
          await letAgentUseSecret(ctx.ns, agent.servicePrincipalId, modelSecret.id);
        } catch (e) {
          showError(e, `Letting ${agent.name} use Secret ${modelSecret.id}`);
        }
      }
      await navigate(href(`/console/agents/${agent.id}`, { tab: 'configuration' }));
      showStatus(modelSecret
        ? `Agent ${agent.name} created with its model key in Secret ${modelSecret.id}. Deploy it with “Deploy new version”, then try it.`
        : `Agent ${agent.name} created. Deploy it with “Deploy new version”.`);
    } finally {
      submit.disabled = !canCreate;
    }
  });

  /** After a 409: were the stock files the form started from replaced since it loaded? */
  async function checkStale() {
    let current;
    try {
      current = (await api('GET', paths.defaults(ctx.ns))).data;
    } catch {
      return;
    }
    if (current.id === defaultsId.value) return;
    replace(staleNotice,
      h('h2', {}, 'The stock workspace files changed'),
      h('p', {}, 'occ now installs different stock files than the ones this form was loaded with, so it refused the Agent. Reload the form’s stock files and submit again. Reloading replaces your edits in the four files.'),
      h('button', { type: 'button', id: 'reload-defaults', onclick: reloadDefaults }, 'Reload stock files'));
    staleNotice.hidden = false;
    staleNotice.querySelector('button').focus();
  }

  page('Create Agent',
    canCreate ? null : h('p', { class: 'notice' }, 'You do not have permission to create Agents in this Namespace.'),
    form);
}
