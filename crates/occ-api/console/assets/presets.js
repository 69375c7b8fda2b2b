// A new Agent from one of the Namespace's Presets, in one step: the person picks a Preset and
// fills in its variables; the console renders the template (as the API's rendering does:
// `{{ vars.NAME }}`, one pass, a whole reference keeps the variable's type) and keeps the password
// the template uses (a model key, a dedicated Agent's harness key) as a new Secret, or uses a
// saved connection's key Secret instead (its base URL filling a `baseUrl` variable, the models
// its provider lists offered for a `model` variable). To deploy, it sends one
// provisioning job (`provisionAgent`: the Configuration, the Agent, its Secret grants, the first
// deploy) and shows its steps as the worker runs them; a failed step keeps what was made and can
// be retried there. Without deploying, it creates the Configuration and the Agent and lets the
// Agent use the Secrets it consumes; a step that fails undoes the ones before it.

import { api, paths } from './api.js';
import { field, h, replace, setFieldError } from './dom.js';
import { letAgentUseSecret } from './secret-access.js';
import { canCollection, ctx, href, navigate, page, showError, showStatus } from './shell.js';

const REFERENCE = /^\{\{ *vars\.([A-Za-z_][A-Za-z0-9_]*) *\}\}/;

/** A template string as literal text and variable references (`\\{{` is a literal `{{`). */
function pieces(text) {
  const out = [];
  let literal = '';
  let i = 0;
  while (i < text.length) {
    if (text.startsWith('\\{{', i)) {
      literal += '{{';
      i += 3;
      continue;
    }
    const m = text.startsWith('{{', i) ? REFERENCE.exec(text.slice(i)) : null;
    if (m) {
      if (literal) out.push({ text: literal });
      literal = '';
      out.push({ name: m[1] });
      i += m[0].length;
      continue;
    }
    literal += text[i];
    i += 1;
  }
  if (literal) out.push({ text: literal });
  return out;
}

/** The variable a string consists of, when it is exactly one reference. */
function wholeReference(text) {
  const parts = pieces(text);
  return parts.length === 1 && parts[0].name ? parts[0].name : null;
}

/** Fills `values` into every reference of `value` (one pass; unknown references stay). */
export function render(value, values) {
  if (typeof value === 'string') {
    const parts = pieces(value);
    if (parts.length === 1 && parts[0].name && Object.hasOwn(values, parts[0].name)) return values[parts[0].name];
    return parts.map((p) => {
      if (!p.name) return p.text;
      return Object.hasOwn(values, p.name) ? String(values[p.name]) : `{{ vars.${p.name} }}`;
    }).join('');
  }
  if (Array.isArray(value)) return value.map((v) => render(v, values));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [render(k, values), render(v, values)]));
  }
  return value;
}

/** Where a variable's field goes: the name first, passwords last, the rest by name. */
function fieldRank([name, spec]) {
  if (name === 'name') return 0;
  return spec.type === 'password' ? 2 : 1;
}

/** Where a connection without a base URL sends requests: its provider's public endpoint. */
function connectionUrl(connection) {
  if (connection.config && connection.config.base_url) return connection.config.base_url;
  return connection.type === 'anthropic' ? 'https://api.anthropic.com/v1' : 'https://api.openai.com/v1';
}

/**
 * One input per declared variable, its default filled in. With saved connections, a password
 * variable also offers them: a chosen connection's key Secret stands for the password (nothing
 * is typed or stored again) and its base URL fills a `baseUrl` variable.
 */
function variableFields(template, connections = []) {
  const vars = Object.entries(template.variables || {});
  vars.sort((a, b) => fieldRank(a) - fieldRank(b) || a[0].localeCompare(b[0]));
  return vars.map(([name, spec]) => {
    const id = `preset-var-${name}`;
    let control;
    if (spec.type === 'boolean') {
      control = h('input', { type: 'checkbox', id, checked: spec.default === true });
    } else {
      control = h('input', {
        type: spec.type === 'password' ? 'password' : spec.type === 'number' ? 'number' : 'text',
        id,
        autocomplete: 'off',
        spellcheck: 'false',
        value: spec.default === undefined ? '' : String(spec.default),
      });
    }
    const wrapper = field({ label: name, control, hint: spec.description || `A ${spec.type}.` });
    control.addEventListener('input', () => setFieldError(wrapper, null));
    let connection = null;
    if (spec.type === 'password' && connections.length) {
      connection = h('select', { id: `${id}-connection`, 'aria-label': `${name}: a saved connection or a typed key` },
        h('option', { value: '' }, 'Type a key'),
        connections.map((c) => h('option', { value: c.id }, `Saved connection ${c.name}`)));
      wrapper.append(connection);
    }
    return { name, spec, control, wrapper, connection };
  });
}

/**
 * Offers the models a chosen connection's provider lists for its key as suggestions of the
 * `model` field (asked through occ: the key never reaches the browser). A later choice wins
 * over an answer still on its way.
 */
async function offerModels(model, connection) {
  const listId = `${model.control.id}-choices`;
  let list = model.wrapper.querySelector('datalist');
  if (!list) {
    list = h('datalist', { id: listId });
    model.wrapper.append(list);
    model.control.setAttribute('list', listId);
  }
  let note = model.wrapper.querySelector('.model-offer');
  if (!note) {
    note = h('p', { class: 'hint model-offer', id: `${model.control.id}-offered`, 'aria-live': 'polite' });
    model.wrapper.append(note);
  }
  const asked = (model.asked = (model.asked || 0) + 1);
  replace(list);
  if (!connection) {
    note.textContent = '';
    return;
  }
  note.textContent = `Asking ${connection.name} for its models…`;
  let text;
  try {
    const models = (await api('GET', paths.credentialSourceModels(ctx.ns, connection.id))).data;
    if (asked !== model.asked) return;
    replace(list, ...models.map((m) => h('option', { value: m.id }, m.name)));
    text = models.length
      ? `${models.length} model${models.length === 1 ? '' : 's'} offered by ${connection.name}: pick one or type an id.`
      : `${connection.name} lists no models; type an id.`;
  } catch (e) {
    if (asked !== model.asked) return;
    text = `The models of ${connection.name} could not be listed (${e.message}); type an id.`;
  }
  note.textContent = text;
}

/** Wires each password field's connection choice to the fields it fills. */
function wireConnections(fields, connections) {
  const baseUrl = fields.find((f) => f.name === 'baseUrl' && f.spec.type === 'string');
  const model = fields.find((f) => f.name === 'model' && f.spec.type === 'string');
  for (const f of fields.filter((x) => x.connection)) {
    f.connection.addEventListener('change', () => {
      const chosen = connections.find((c) => c.id === f.connection.value);
      f.control.disabled = Boolean(chosen);
      if (chosen) f.control.value = '';
      setFieldError(f.wrapper, null);
      if (chosen && baseUrl) baseUrl.control.value = connectionUrl(chosen);
      if (model) offerModels(model, chosen || null);
    });
  }
}

/** The variables' values, or null after marking the fields that need one. */
function readValues(fields) {
  const values = {};
  let ok = true;
  for (const f of fields) {
    setFieldError(f.wrapper, null);
    if (f.spec.type === 'boolean') {
      values[f.name] = f.control.checked;
      continue;
    }
    if (f.connection && f.connection.value) {
      // A saved connection's key: its Secret stands for the password.
      values[f.name] = { connection: f.connection.value };
      continue;
    }
    const raw = f.control.value;
    if (raw === '') {
      setFieldError(f.wrapper, `Enter ${f.name}.`);
      ok = false;
      continue;
    }
    if (f.spec.type === 'number') {
      const n = Number(raw);
      if (!Number.isFinite(n)) {
        setFieldError(f.wrapper, `${f.name} must be a number.`);
        ok = false;
        continue;
      }
      values[f.name] = n;
    } else {
      values[f.name] = raw;
    }
  }
  return ok ? values : null;
}

export async function presetAgentPage() {
  if (!ctx.ns) {
    page('New Agent from a Preset', h('p', {}, 'Select a Namespace first.'));
    return;
  }
  const allowed = canCollection('agent', 'create') && canCollection('configuration', 'create');
  const presets = (await api('GET', paths.presets(ctx.ns))).data;
  // Saved connections (credential sources) the caller may read; none when it may read none.
  const connections = (await api('GET', paths.credentialSources(ctx.ns)).catch(() => ({ data: [] }))).data;
  if (!presets.length) {
    page('New Agent from a Preset', h('p', { class: 'empty' }, 'This Namespace has no Preset you can read.'));
    return;
  }
  const select = h('select', { id: 'preset-select' },
    presets.map((p) => h('option', { value: p.id }, p.name)));
  const variables = h('div', { class: 'stack', id: 'preset-variables' });
  const deployNow = h('input', { type: 'checkbox', id: 'preset-deploy', checked: true });
  const submit = h('button', { type: 'submit', id: 'preset-submit', disabled: !allowed, 'data-mutating': true }, 'Create Agent');
  let fields = [];
  const chosen = () => presets.find((p) => p.id === select.value);
  function showVariables() {
    fields = variableFields(chosen().template, connections);
    wireConnections(fields, connections);
    replace(variables, ...(fields.length ? fields.map((f) => f.wrapper) : [h('p', { class: 'hint' }, 'This Preset has no variables.')]));
  }
  select.addEventListener('change', showVariables);
  showVariables();

  const progress = h('ol', { class: 'steps', id: 'preset-progress', hidden: true });
  const form = h('form', { class: 'stack', novalidate: true, id: 'preset-form' },
    field({ label: 'Preset', control: select, hint: 'A template of this Namespace: a Configuration, the Agent\'s settings and its variables.' }),
    variables,
    h('label', { class: 'check' }, deployNow, ' Deploy it now'),
    h('div', { class: 'actions' }, submit),
    progress);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const preset = chosen();
    const values = readValues(fields);
    if (!values) {
      form.querySelector('[aria-invalid="true"]')?.focus();
      return;
    }
    submit.disabled = true;
    const undo = [];
    try {
      const draft = await draftFromPreset(preset, values, undo, connections);
      if (deployNow.checked) {
        const job = await admit(draft);
        // Admitted: the job owns what it makes from here (a failure keeps it for a retry).
        undo.length = 0;
        const done = await followJob(job, progress);
        await navigate(href(`/console/agents/${done.agentId}`));
        showStatus(`Agent ${draft.name} created from ${preset.name} and deploying.`);
      } else {
        const agent = await createDraft(draft, undo);
        await navigate(href(`/console/agents/${agent.id}`));
        showStatus(`Agent ${agent.name} created from ${preset.name}. Deploy it with “Deploy new version”.`);
      }
    } catch (e) {
      // Nothing half-made stays: what this attempt created goes again, newest first.
      for (const step of undo.reverse()) await step().catch(() => {});
      showError(e, `Creating an Agent from ${preset.name}`);
    } finally {
      submit.disabled = !allowed;
    }
  });
  page('New Agent from a Preset',
    allowed ? null : h('p', { class: 'notice' }, 'You do not have permission to create Agents and Configurations in this Namespace.'),
    form);
}

/** The steps of a provisioning job, in order, with what the person reads for each. */
const STEPS = [
  ['admitted', 'Accepted'],
  ['configuration', 'Configuration'],
  ['transport', 'Agent and its credentials'],
  ['handoff', 'First deployment'],
];

/** A new idempotency key: the same one is sent again only for the same request. */
function requestId() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const x = [...b].map((v) => v.toString(16).padStart(2, '0')).join('');
  return `req_${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

/** Sends the draft as one provisioning job; its admitted state. */
async function admit(draft) {
  const body = { requestId: requestId(), name: draft.name, configuration: draft.configuration, ...draft.agent };
  return (await api('POST', paths.provision(ctx.ns), body)).data.provisioning;
}

/** Shows each step of the job as the worker runs it, until it succeeds (its state) or fails. */
async function followJob(job, list) {
  list.hidden = false;
  for (;;) {
    const at = STEPS.findIndex(([phase]) => phase === job.phase);
    replace(list, ...STEPS.map(([phase, label], i) => {
      const state = job.status === 'succeeded' || i < at ? 'done'
        : i === at ? (job.status === 'failed' ? 'failed' : 'current') : 'waiting';
      return h('li', { class: `step ${state}`, 'data-phase': phase, 'data-state': state }, label);
    }));
    if (job.status === 'succeeded') return job;
    if (job.status === 'failed') {
      const retry = h('button', { type: 'button', id: 'preset-retry', 'data-mutating': true }, 'Retry from this step');
      const failure = h('li', { class: 'step-error', role: 'alert' },
        `${job.error.code}: ${job.error.message} `, retry);
      list.append(failure);
      job = await new Promise((resolve, reject) => retry.addEventListener('click', () => {
        retry.disabled = true;
        api('POST', `${paths.provisioning(ctx.ns, job.workId)}/retry`).then((r) => resolve(r.data), reject);
      }));
      continue;
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
    job = (await api('GET', paths.provisioning(ctx.ns, job.workId))).data;
  }
}

/** The Configuration and the Agent without deploying, and the Agent's grants of its Secrets. */
async function createDraft(draft, undo) {
  const cfg = (await api('POST', paths.configurations(ctx.ns), draft.configuration)).data;
  undo.push(() => api('DELETE', paths.configuration(ctx.ns, cfg.id)));
  const agent = (await api('POST', paths.agents(ctx.ns), { name: draft.name, configurationId: cfg.id, ...draft.agent })).data;
  undo.push(() => api('DELETE', paths.agent(ctx.ns, agent.id)));
  // The Agent's own identity may use every Secret it consumes.
  const used = new Set(Object.values(draft.configuration.secretBindings || {}).map((b) => b.source.id));
  if (draft.agent.harnessAuth && draft.agent.harnessAuth.source) used.add(draft.agent.harnessAuth.source.id);
  for (const id of used) await letAgentUseSecret(ctx.ns, agent.servicePrincipalId, id);
  return agent;
}

/** The Agent a Preset describes with these values; each password becomes a Secret first. */
async function draftFromPreset(preset, values, undo, connections = []) {
  const template = preset.template;
  const passwords = Object.entries(template.variables || {}).filter(([, spec]) => spec.type === 'password');
  const plain = { ...values };
  for (const [name] of passwords) delete plain[name];
  const named = render(template, plain).agent || {};
  const agentName = typeof named.name === 'string' ? named.name.trim() : '';
  if (!agentName || wholeReference(agentName) !== null) {
    throw new Error(`${preset.name} names no Agent: give it a name variable or an agent.name`);
  }
  // A password becomes a Secret of the Namespace, whose id stands where the template names the
  // password (a binding's source.id; agent.harnessAuth.secret becomes the harness's source).
  const secretIds = {};
  for (const [name] of passwords) {
    if (values[name] === undefined) continue;
    if (values[name] && values[name].connection) {
      const connection = connections.find((c) => c.id === values[name].connection);
      secretIds[name] = connection.secrets.api_key.id;
      continue;
    }
    const secret = (await api('POST', paths.secrets(ctx.ns), { name: `${agentName}-${name}`, value: values[name] })).data;
    undo.push(() => api('DELETE', paths.secret(ctx.ns, secret.id)));
    secretIds[name] = secret.id;
  }
  const rendered = render(template, { ...plain, ...secretIds });
  const agentSpec = rendered.agent || {};
  const secretAt = template.agent && template.agent.harnessAuth && template.agent.harnessAuth.secret;
  const harnessPassword = typeof secretAt === 'string' ? wholeReference(secretAt) : null;
  let harnessAuth = agentSpec.harnessAuth;
  if (harnessPassword !== null && secretIds[harnessPassword]) {
    harnessAuth = { method: harnessAuth.method, source: { kind: 'secret', namespaceId: ctx.ns, id: secretIds[harnessPassword] } };
  }
  const configuration = rendered.configuration || {};
  const request = { kind: 'agent', values: configuration.values || {} };
  if (configuration.secretBindings && Object.keys(configuration.secretBindings).length) {
    request.secretBindings = configuration.secretBindings;
  }
  const agent = {};
  if (agentSpec.executionMode) agent.executionMode = agentSpec.executionMode;
  if (harnessAuth !== undefined) agent.harnessAuth = harnessAuth;
  if (agentSpec.backendId) agent.backendId = agentSpec.backendId;
  if (agentSpec.initialWorkspaceFiles) agent.initialWorkspaceFiles = agentSpec.initialWorkspaceFiles;
  return { name: agentName, configuration: request, agent };
}
