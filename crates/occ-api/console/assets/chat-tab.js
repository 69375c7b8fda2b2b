// The Agent page's "Try it" tab: send the Agent a message through occ and watch its reply
// arrive (server-sent events of `POST …/agents/{agt}/chat`). The conversation is the gateway's,
// kept under a session key shown here; "New conversation" starts another. Nothing is stored in
// the browser and nothing is retried: a failed turn is reported with its code.

import { ApiError, api, paths } from './api.js';
import { h, replace } from './dom.js';
import { assignRuntimeRole } from './secret-access.js';
import { ctx, showError } from './shell.js';

/**
 * The conversation this page continues until "New conversation": 128 random bits from the
 * browser's CSPRNG (the gateway session is also scoped to the signed-in person by occ).
 */
function newSessionKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `console-${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

/**
 * POSTs one message asking for events; calls `onDelta(text)` for each piece of the reply and
 * resolves the final answer, or rejects with an ApiError (a refusal, or the turn's error event).
 */
async function streamTurn(ns, agentId, body, onDelta, signal) {
  let response;
  try {
    response = await fetch(paths.chat(ns, agentId), {
      method: 'POST', credentials: 'same-origin', signal,
      headers: { accept: 'text/event-stream', 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError({ status: 0, code: 'NETWORK_ERROR', message: `occ could not be reached (${e.message}).` });
  }
  if (!response.ok) {
    let doc = null;
    try { doc = JSON.parse(await response.text()); } catch { doc = null; }
    const error = (doc && doc.error) || {};
    throw new ApiError({
      status: response.status,
      code: error.code || `HTTP_${response.status}`,
      message: error.message || 'The request failed',
      requestId: (doc && doc.meta && doc.meta.requestId) || response.headers.get('x-request-id'),
      details: error.details,
    });
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = 'message';
      let data = '';
      for (const line of block.split('\n')) {
        if (line.startsWith('event:')) event = line.slice(6).trim();
        else if (line.startsWith('data:')) data += line.slice(5).trimStart();
      }
      if (!data) continue;
      const payload = JSON.parse(data);
      if (event === 'delta') onDelta(payload.text || '');
      else if (event === 'final') return payload;
      else if (event === 'error') {
        const error = payload.error || {};
        throw new ApiError({ status: 200, code: error.code, message: error.message, requestId: payload.meta && payload.meta.requestId });
      }
    }
  }
  throw new ApiError({ status: 0, code: 'STREAM_ENDED', message: 'The reply ended before the turn finished.' });
}

/** Renders the tab into `panel`; returns what stops a turn in flight when the tab is left. */
export function renderChat(panel, { ns, agent, canChat }) {
  const heading = h('h2', {}, 'Try it');
  if (!agent.activeRevisionId) {
    replace(panel, heading, h('p', { class: 'notice', id: 'chat-unavailable' },
      'Messages go to the Agent\'s running gateway, and this Agent has no active revision. Deploy it to talk to it.'));
    return () => {};
  }
  if (!canChat) {
    replace(panel, heading, h('p', { class: 'notice', id: 'chat-forbidden' },
      'You may not talk to this Agent: that needs the use permission on it (or administer).'));
    return () => {};
  }
  let sessionKey = newSessionKey();
  let controller = null;
  const log = h('ol', { class: 'chat-log', id: 'chat-log', 'aria-live': 'polite' });
  const input = h('textarea', { id: 'chat-message', rows: 3, maxlength: 16384, placeholder: 'Ask the Agent something…', 'aria-label': 'Message' });
  const session = h('p', { class: 'hint', id: 'chat-session' });
  const status = h('p', { class: 'file-status', id: 'chat-status', 'aria-live': 'polite' });
  const send = h('button', { type: 'submit', id: 'chat-send' }, 'Send');
  const fresh = h('button', { type: 'button', class: 'secondary', id: 'chat-new', onclick: () => {
    sessionKey = newSessionKey();
    replace(log);
    showSession();
  } }, 'New conversation');
  const showSession = () => { session.textContent = `Conversation ${sessionKey} (the gateway keeps its history).`; };

  async function onSubmit(event) {
    event.preventDefault();
    const message = input.value;
    if (!message.trim()) {
      status.textContent = 'Write a message first.';
      return;
    }
    send.disabled = true;
    fresh.disabled = true;
    input.value = '';
    log.append(h('li', { class: 'chat-user' }, h('strong', {}, 'You: '), message));
    const reply = h('span', { class: 'chat-text' });
    const item = h('li', { class: 'chat-agent', dataset: { state: 'streaming' } }, h('strong', {}, `${agent.name}: `), reply);
    log.append(item);
    status.textContent = 'Waiting for the reply…';
    controller = new AbortController();
    try {
      const answer = await streamTurn(ns, agent.id, { message, sessionKey },
        (text) => { reply.textContent += text; }, controller.signal);
      reply.textContent = answer.reply;
      item.dataset.state = 'done';
      status.textContent = `${answer.model || 'Model unknown'} · ${answer.durationMs} ms`;
    } catch (e) {
      item.dataset.state = 'error';
      if (e.name === 'AbortError') {
        reply.textContent += ' (stopped)';
        status.textContent = 'Stopped.';
      } else {
        reply.textContent = `${e.code} — ${e.message}`;
        status.textContent = `The turn failed${e.requestId ? ` (request ${e.requestId})` : ''}.`;
        showError(e, 'Talking to the Agent');
      }
    } finally {
      controller = null;
      send.disabled = false;
      fresh.disabled = false;
      input.focus();
    }
  }

  showSession();
  const controlUi = h('div', { id: 'control-ui' });
  replace(panel, heading,
    h('p', { class: 'hint' }, 'Send the Agent a message through occ: it goes to the Agent\'s gateway, which asks its model. The reply appears as it is written.'),
    session,
    log,
    h('form', { id: 'chat-form', class: 'chat-form', onsubmit: onSubmit },
      input,
      h('div', { class: 'actions' }, send, fresh)),
    status,
    controlUi);
  renderControlUi(controlUi, ns, agent);
  return () => { if (controller) controller.abort(); };
}

const CONTROL_UI_NOTICES = {
  stopped: 'The Agent is stopped; deploy it to open its Control UI.',
  unavailable: 'The Agent has no serving revision yet; its Control UI opens once a deploy succeeds.',
  unsupported: 'This revision does not offer the Control UI through occ: set gateway.controlUi.enabled to true in its Configuration (without the dangerous switches or a basePath) and deploy.',
};

/**
 * The Agent's native OpenClaw Control UI (`GET …/native-admin`): a link to its own origin when
 * available, a notice otherwise; nothing when the installation does not offer it or the person
 * may not open it.
 */
async function renderControlUi(container, ns, agent) {
  let status;
  const heading = h('h3', {}, 'Native Control UI');
  try {
    status = (await api('GET', paths.nativeAdmin(ns, agent.id))).data;
  } catch (err) {
    if (err instanceof ApiError && err.status === 403) renderNoRuntimeRole(container, heading, ns, agent);
    return;
  }
  if (status.status === 'disabled') return;
  if (status.status !== 'available') {
    replace(container, heading, h('p', { class: 'notice', id: 'control-ui-status' }, CONTROL_UI_NOTICES[status.status] || status.status));
    return;
  }
  replace(container, heading,
    h('p', { class: 'hint' }, 'OpenClaw\'s own UI for this Agent, served by occ at the Agent\'s own origin after checking your session.'),
    h('a', { id: 'open-control-ui', class: 'button', href: status.url, target: '_blank', rel: 'noopener noreferrer' }, 'Open the Control UI'));
}

/** The runtime role occ's runtime enforces (see `GET …/runtime-roles`). */
const RUNTIME_ROLE = 'platform-administrator';

/**
 * The Control UI refused (403): it needs a runtime role assigned to the person on this Agent.
 * Installation administrators may assign themselves one here; others are told whom to ask.
 */
function renderNoRuntimeRole(container, heading, ns, agent) {
  const admin = ctx.permissions && ctx.permissions.installation.includes('administer');
  const principalId = ctx.user && ctx.user.principalId;
  const notice = h('p', { class: 'notice', id: 'control-ui-status' },
    'Opening this Agent\'s Control UI needs a runtime role assigned to you on it (and the use permission). '
    + (admin ? 'As an Installation administrator you can assign yourself one.' : 'Ask an Installation administrator to assign you one.'));
  if (!admin || !principalId) {
    replace(container, heading, notice);
    return;
  }
  const assign = h('button', {
    type: 'button', id: 'assign-runtime-role', class: 'secondary',
    onclick: async () => {
      assign.disabled = true;
      try {
        await assignRuntimeRole(ns, principalId, agent.id, RUNTIME_ROLE);
        await renderControlUi(container, ns, agent);
      } catch (err) {
        assign.disabled = false;
        showError(err);
      }
    },
  }, `Assign me the ${RUNTIME_ROLE} runtime role`);
  replace(container, heading, notice, assign);
}
