// One Agent: its state and actions (Stop Agent, Delete Agent and their refreshes), the gateway
// as the worker last observed it (state, restarts, last exit), the deploy progress, and five
// tabs — Configuration (view, Create new version, Deploy new version), Deployment activity
// (revisions, newest first, each with Roll back to this revision, and Diagnose on a failed one),
// Workspace files (one editor per file), Logs (`logs-tab.js`) and Try it (`chat-tab.js`).

import { api, paths } from './api.js';
import { confirmDialog, h, replace, when } from './dom.js';
import { FILES, fileKey, jsonEditor, lf, loadLatest } from './agents.js';
import { diagnosisPanel } from './diagnosis-panel.js';
import { renderLogs } from './logs-tab.js';
import { renderChat } from './chat-tab.js';
import { letAgentUseSecret } from './secret-access.js';
import { STATES, canRollBackTo, isPending, isTransitional, lifecycleState, runtimeSummary } from './lifecycle.js';
import {
  actionButton, badge, canAgent, canConfiguration, clearAlert, ctx, href, navigate, page, showError, showStatus,
} from './shell.js';

const TABS = [
  { id: 'configuration', label: 'Configuration' },
  { id: 'activity', label: 'Deployment activity' },
  { id: 'files', label: 'Workspace files' },
  { id: 'logs', label: 'Logs' },
  { id: 'chat', label: 'Try it' },
];

function describeDeployment(d) {
  if (!d) return 'status unknown';
  return { queued: 'Queued', running: 'Running', succeeded: 'Succeeded', failed: 'Failed' }[d.status] || d.status;
}

function attemptText(progress) {
  if (!progress) return null;
  const parts = [];
  if (progress.lastAttempt) {
    parts.push(`last attempt ${when(progress.lastAttempt.at)}: ${progress.lastAttempt.code} — ${progress.lastAttempt.message}`);
  }
  if (progress.nextAttemptAt) parts.push(`next attempt ${when(progress.nextAttemptAt)}`);
  return parts.length ? parts.join('; ') : null;
}

export async function agentPage({ scope, params: [agentId] }) {
  const ns = ctx.ns;
  let agent;
  try {
    agent = (await api('GET', paths.agent(ns, agentId))).data;
  } catch (e) {
    if (e.status === 404) {
      page('Agent not found', h('p', {}, 'There is no such Agent in this Namespace (it may have been deleted). ',
        h('a', { href: href('/console/agents'), 'data-link': true }, 'Back to the Agents.')));
      return;
    }
    throw e;
  }
  let revisions = [];
  let latest = null;
  let runtime = null;
  let state = 'draft';
  let deleteRequested = agent.status === 'deleting';

  // ---- header: summary and actions -----------------------------------------------------------

  const stateBadge = h('span', { id: 'agent-state' });
  const summary = h('dl', { class: 'summary', id: 'agent-summary' });
  const progress = h('section', { id: 'deploy-progress', class: 'progress-panel', 'aria-live': 'polite', 'aria-label': 'Deployment progress', hidden: true });
  const stopButton = actionButton('Stop Agent', { id: 'stop-agent', kind: 'danger-outline', onclick: () => stop() });
  const deleteButton = actionButton('Delete Agent', { id: 'delete-agent', kind: 'danger', onclick: () => remove() });
  const refreshStopButton = h('button', { type: 'button', class: 'secondary', id: 'refresh-stop', onclick: () => refreshStop() }, 'Refresh stop status');
  const refreshDeleteButton = h('button', { type: 'button', class: 'secondary', id: 'refresh-delete', hidden: true, onclick: () => refreshAgent().catch((e) => showError(e, 'Refreshing')) }, 'Refresh deletion status');

  function renderSummary() {
    replace(stateBadge, badge(state, STATES[state]));
    const active = agent.activeRevisionId ? revisions.find((r) => r.id === agent.activeRevisionId) : null;
    const row = (term, ...value) => [h('dt', {}, term), h('dd', {}, ...value)];
    replace(summary,
      row('State', stateBadge),
      row('Desired state', h('span', { id: 'desired-state' }, agent.desiredRuntimeState)),
      row('Gateway', h('span', { id: 'gateway-runtime', dataset: { state: runtime ? runtime.state : 'unavailable' } },
        runtimeSummary(runtime, when))),
      row('Selected revision', h('span', { id: 'selected-revision' },
        agent.activeRevisionId ? (active ? `#${active.revision} (generation ${active.configurationGeneration})` : agent.activeRevisionId) : 'none')),
      row('Configuration', h('code', {}, agent.configurationId)),
      row('Execution mode', agent.executionMode),
      row('Id', h('code', {}, agent.id)),
      row('Created', when(agent.createdAt)));
    const operable = canAgent(agent.id, 'operate');
    stopButton.disabled = !operable || !['running', 'deploying', 'failed', 'stopping'].includes(state);
    deleteButton.disabled = !canAgent(agent.id, 'delete') || state === 'deleting';
    refreshDeleteButton.hidden = state !== 'deleting';
    renderProgress();
  }

  function renderProgress() {
    if (!latest) {
      progress.hidden = true;
      return;
    }
    const { revision, deployment } = latest;
    const pending = deployment && isPending(deployment.status);
    const status = describeDeployment(deployment);
    const bar = h('progress', { id: 'deploy-progress-bar', 'aria-label': `Deployment of revision ${revision.revision}` });
    if (!pending) {
      bar.max = 1;
      bar.value = 1;
    }
    const attempt = deployment ? attemptText(deployment.progress) : null;
    const error = deployment && deployment.error;
    replace(progress,
      h('h2', {}, `Revision #${revision.revision} — generation ${revision.configurationGeneration}`),
      h('p', { class: 'deploy-status', dataset: { status: deployment ? deployment.status : 'unknown' } },
        'Deployment: ', h('strong', { id: 'deploy-status' }, status),
        pending ? ' (updating by itself)' : ''),
      bar,
      attempt ? h('p', { class: 'hint' }, attempt) : null,
      error ? h('p', { class: 'field-error' }, h('strong', {}, error.code), ` — ${error.message}`) : null);
    progress.hidden = false;
    progress.classList.toggle('failed', Boolean(deployment && deployment.status === 'failed'));
  }

  // ---- loading and updating ------------------------------------------------------------------

  let polling = false;
  let tabOnUpdate = null;
  /** Stops what the tab on screen runs by itself (the Logs tab's follow), when it is left. */
  let tabOnLeave = null;
  /** The revision the Logs tab opens on next (set from the Diagnostics panel), or null. */
  let logsRevision = null;
  let announcedState = state;

  async function refreshAgent() {
    const previousActive = agent.activeRevisionId;
    try {
      agent = (await api('GET', paths.agent(ns, agentId))).data;
    } catch (e) {
      if (e.status === 404 && deleteRequested) {
        await navigate(href('/console/agents'));
        showStatus(`Agent ${agent.name} was deleted.`);
        return false;
      }
      throw e;
    }
    ({ revisions, latest } = await loadLatest(ns, agentId));
    runtime = await loadRuntime();
    if (scope.disposed) return false;
    state = lifecycleState(agent, latest);
    renderSummary();
    if (state !== announcedState) {
      announcedState = state;
      announce();
    }
    if (tabOnUpdate) await tabOnUpdate(previousActive);
    const busy = () => isTransitional(state) || deleteRequested || (runtime && runtime.state === 'restarting');
    if (busy() && !polling) {
      polling = true;
      scope.poll(1000, async () => {
        polling = (await refreshAgent()) !== false && busy();
        return polling;
      });
    }
    return true;
  }

  /** The gateway as the worker last observed it; null when it cannot be read (the rest of the
   * page does not depend on it). */
  async function loadRuntime() {
    try {
      return (await api('GET', paths.runtime(ns, agentId))).data;
    } catch {
      return null;
    }
  }

  /** Says what the Agent is doing now (the status region is read by screen readers). */
  function announce() {
    const r = latest ? latest.revision : null;
    const d = latest ? latest.deployment : null;
    const messages = {
      deploying: r ? `Deploying revision #${r.revision} (generation ${r.configurationGeneration})…` : 'Deploying…',
      running: r ? `${agent.name} is running revision #${r.revision}.` : `${agent.name} is running.`,
      failed: r && d && d.error ? `Revision #${r.revision} failed: ${d.error.code} — ${d.error.message}` : 'The latest deployment failed.',
      stopping: `Stopping ${agent.name}…`,
      stopped: `${agent.name} is stopped. Resume it with Create new version → Deploy new version.`,
      deleting: `Deleting ${agent.name}…`,
      draft: `${agent.name} has not been deployed yet.`,
    };
    showStatus(messages[state]);
  }

  async function refreshStop() {
    clearAlert();
    try {
      await refreshAgent();
      const selected = agent.activeRevisionId ? revisions.find((r) => r.id === agent.activeRevisionId) : null;
      showStatus(`Desired state: ${agent.desiredRuntimeState}; selected revision: ${selected ? `#${selected.revision}` : (agent.activeRevisionId || 'none')}. The Agent is ${STATES[state].toLowerCase()}.`);
    } catch (e) {
      showError(e, 'Refreshing the stop status');
    }
  }

  async function stop() {
    const confirmed = await confirmDialog({
      title: `Stop Agent ${agent.name}?`,
      body: 'Its gateway stops; the workspace is kept. To resume, use Create new version → Deploy new version.',
      confirmLabel: 'Stop Agent',
      danger: true,
    });
    if (!confirmed) return;
    clearAlert();
    try {
      agent = (await api('POST', paths.stop(ns, agentId))).data;
      showStatus(`Stop requested for ${agent.name}. Its state updates by itself; “Refresh stop status” rereads it.`);
      await refreshAgent();
    } catch (e) {
      showError(e, 'Stopping the Agent');
    }
  }

  async function remove() {
    const confirmed = await confirmDialog({
      title: `Permanently delete Agent ${agent.name}?`,
      body: 'Its gateway stops, and its workspace, workspace files and revisions are deleted. This cannot be undone.',
      confirmLabel: 'Permanently delete Agent',
      danger: true,
    });
    if (!confirmed) return;
    clearAlert();
    try {
      agent = (await api('DELETE', paths.agent(ns, agentId))).data;
      deleteRequested = true;
      showStatus(`Deleting ${agent.name}…`);
      await refreshAgent();
    } catch (e) {
      showError(e, 'Deleting the Agent');
    }
  }

  /** Admits a new revision of the current draft and Configuration generation. */
  async function deploy() {
    clearAlert();
    try {
      const rev = (await api('POST', paths.deploy(ns, agentId))).data;
      showStatus(`Revision #${rev.revision} (generation ${rev.configurationGeneration}) admitted; deploying.`);
      announcedState = null; // whatever it becomes next is announced
      await refreshAgent();
      return true;
    } catch (e) {
      showError(e, 'Deploying a new version');
      offerSecretGrant(e);
      return false;
    }
  }

  /**
   * A deploy refused because the Agent's own principal may not use a Secret its revision
   * consumes: offer the one grant that allows it (a Role with exactly `operate` on Secrets,
   * bound to that principal on that Secret; an existing such Role and binding are reused), then
   * deploy again. Whether the user may grant it is the API's to decide.
   */
  function offerSecretGrant(e) {
    const denied = e.status === 403 && /is not allowed to operate secret (sec_[0-9a-f-]+)/.exec(e.message || '');
    if (!denied) return;
    const secretId = denied[1];
    const alertBody = document.querySelector('#alert .alert-body');
    if (!alertBody) return;
    const button = h('button', { type: 'button', id: 'grant-secret', onclick: async () => {
      button.disabled = true;
      try {
        await grantSecret(secretId);
        showStatus(`${agent.name} may now use Secret ${secretId}; deploying again.`);
        await deploy();
      } catch (err) {
        showError(err, `Letting ${agent.name} use Secret ${secretId}`);
      }
    } }, `Let ${agent.name} use this Secret and deploy`);
    alertBody.append(h('p', { class: 'grant-offer' },
      `The Agent's own identity needs the operate permission on Secret ${secretId}. `, button));
  }

  async function grantSecret(secretId) {
    await letAgentUseSecret(ns, agent.servicePrincipalId, secretId);
  }

  /** Admits a new revision from `revision`'s frozen document and identities, once confirmed. */
  async function rollBack(revision) {
    const confirmed = await confirmDialog({
      title: `Roll ${agent.name} back to revision #${revision.revision}?`,
      body: `A new revision is admitted with revision #${revision.revision}'s frozen configuration (generation ${revision.configurationGeneration}) and deployed in place of what runs now. The Configuration itself is not changed.`,
      confirmLabel: 'Roll back',
    });
    if (!confirmed) return;
    clearAlert();
    try {
      const rev = (await api('POST', paths.redeploy(ns, agentId, revision.id))).data;
      showStatus(`Revision #${rev.revision} admitted from revision #${revision.revision} (generation ${rev.configurationGeneration}); deploying.`);
      announcedState = null; // whatever it becomes next is announced
      await refreshAgent();
    } catch (e) {
      showError(e, `Rolling back to revision #${revision.revision}`);
    }
  }

  // ---- tabs ----------------------------------------------------------------------------------

  const tabButtons = TABS.map((t) => h('button', {
    type: 'button', role: 'tab', id: `tab-${t.id}`, 'aria-controls': `panel-${t.id}`, dataset: { tab: t.id },
  }, t.label));
  const panels = TABS.map((t) => h('div', { role: 'tabpanel', id: `panel-${t.id}`, 'aria-labelledby': `tab-${t.id}`, tabindex: '0', hidden: true }));
  const tablist = h('div', { role: 'tablist', 'aria-label': 'Agent details', class: 'tabs' }, tabButtons);

  async function select(tabId, { focus = false } = {}) {
    const index = Math.max(0, TABS.findIndex((t) => t.id === tabId));
    tabButtons.forEach((b, i) => {
      const selected = i === index;
      b.setAttribute('aria-selected', String(selected));
      b.tabIndex = selected ? 0 : -1;
      panels[i].hidden = !selected;
    });
    if (focus) tabButtons[index].focus();
    const params = new URLSearchParams(location.search);
    params.set('tab', TABS[index].id);
    history.replaceState(null, '', `${location.pathname}?${params}`);
    tabOnUpdate = null;
    if (tabOnLeave) tabOnLeave();
    tabOnLeave = null;
    const renderers = { configuration: renderConfiguration, activity: renderActivity, files: renderFiles, logs: renderLogsTab, chat: renderChatTab };
    try {
      await renderers[TABS[index].id](panels[index]);
    } catch (e) {
      showError(e, `Loading ${TABS[index].label}`);
    }
  }
  tabButtons.forEach((b, i) => {
    b.addEventListener('click', () => select(TABS[i].id));
    b.addEventListener('keydown', (event) => {
      const last = TABS.length - 1;
      const next = { ArrowRight: i === last ? 0 : i + 1, ArrowLeft: i === 0 ? last : i - 1, Home: 0, End: last }[event.key];
      if (next === undefined) return;
      event.preventDefault();
      select(TABS[next].id, { focus: true });
    });
  });

  // -- Configuration

  async function renderConfiguration(panel) {
    replace(panel, h('p', { class: 'loading' }, 'Loading the Configuration…'));
    const cfgId = agent.configurationId;
    if (!canConfiguration(cfgId, 'read')) {
      replace(panel, h('p', { class: 'notice' }, `You cannot read this Agent's Configuration (${cfgId}).`),
        deployButton());
      return;
    }
    let cfg = (await api('GET', paths.configuration(ns, cfgId))).data;
    let editor = null;
    let original = '';

    function deployedLine() {
      const active = agent.activeRevisionId ? revisions.find((r) => r.id === agent.activeRevisionId) : null;
      if (active) return `Running generation ${active.configurationGeneration} (revision #${active.revision}).`;
      if (latest) return `Last deployed: generation ${latest.revision.configurationGeneration} (revision #${latest.revision.revision}); nothing runs now.`;
      return 'Not deployed yet.';
    }

    async function saveVersion() {
      const values = editor.parse();
      if (!values) return null;
      try {
        cfg = (await api('PATCH', paths.configuration(ns, cfgId), { values })).data;
      } catch (e) {
        if (editor.showApiDetails(e)) editor.textarea.focus();
        showError(e, 'Saving the new version');
        return null;
      }
      showStatus(`Generation ${cfg.generation} of the Configuration saved.`);
      return cfg;
    }

    const draw = () => {
      const canUpdate = canConfiguration(cfgId, 'update');
      const heading = h('div', { class: 'panel-head' },
        h('h2', {}, 'Configuration ', h('code', {}, cfgId)),
        h('p', {}, 'Generation ', h('strong', { id: 'configuration-generation' }, String(cfg.generation)), '. ',
          h('span', { id: 'deployed-generation' }, deployedLine())));
      if (!editor) {
        replace(panel, heading,
          h('pre', { class: 'code', id: 'configuration-document', tabindex: '0', 'aria-label': `Configuration document, generation ${cfg.generation}` },
            JSON.stringify(cfg.values, null, 2)),
          h('div', { class: 'actions' },
            actionButton('Create new version', {
              id: 'create-version',
              allowed: canUpdate && agent.status !== 'deleting',
              kind: 'secondary',
              onclick: () => {
                original = JSON.stringify(cfg.values, null, 2);
                editor = jsonEditor({
                  id: 'configuration-editor',
                  label: `Next version (generation ${cfg.generation + 1})`,
                  value: original,
                  hint: 'Edit the document, then save it as a new generation or deploy it directly.',
                });
                draw();
                editor.textarea.focus();
              },
            }),
            deployButton()));
      } else {
        replace(panel, heading, editor.wrapper,
          h('div', { class: 'actions' },
            actionButton('Save new version', {
              id: 'save-version',
              allowed: canUpdate,
              kind: 'secondary',
              onclick: async () => {
                clearAlert();
                if (await saveVersion()) {
                  editor = null;
                  draw();
                }
              },
            }),
            deployButton(async () => {
              // "Deploy new version" from the editor saves the edits first (a new generation)
              if (lf(editor.textarea.value) !== original) {
                if (!(await saveVersion())) return false;
              }
              editor = null;
              draw();
              return true;
            }),
            h('button', { type: 'button', class: 'secondary', id: 'cancel-version', onclick: () => { editor = null; draw(); } }, 'Cancel')));
      }
    };
    draw();
    tabOnUpdate = async () => {
      const line = panel.querySelector('#deployed-generation');
      if (line) line.textContent = deployedLine();
      const button = panel.querySelector('#deploy');
      if (button) button.disabled = !canAgent(agent.id, 'deploy') || agent.status === 'deleting';
    };
  }

  function deployButton(before) {
    return actionButton('Deploy new version', {
      id: 'deploy',
      allowed: canAgent(agent.id, 'deploy') && agent.status !== 'deleting',
      onclick: async (event) => {
        const button = event.currentTarget;
        button.disabled = true;
        try {
          if (before && !(await before())) return;
          await deploy();
        } finally {
          if (button.isConnected) button.disabled = !canAgent(agent.id, 'deploy') || agent.status === 'deleting';
        }
      },
    });
  }

  // -- Deployment activity

  async function renderActivity(panel) {
    const body = h('div', { class: 'table-wrap' }, h('p', { class: 'loading' }, 'Loading deployments…'));
    const diagnosis = diagnosisPanel({
      ns,
      agentId,
      openLogs: (revisionId) => {
        logsRevision = revisionId;
        select('logs', { focus: true });
      },
    });
    replace(panel, h('h2', {}, 'Deployment activity'), body, diagnosis.section);
    // Diagnostics read the workload (Agent operate and read, as the runtime route).
    const mayDiagnose = canAgent(agent.id, 'operate');
    const draw = async () => {
      const list = [...(await api('GET', paths.revisions(ns, agentId))).data].sort((a, b) => b.revision - a.revision);
      const deployments = await Promise.all(list.map((r) => api('GET', paths.deployment(ns, agentId, r.id)).then((x) => x.data)));
      if (scope.disposed || panel.hidden) return;
      if (!list.length) {
        replace(body, h('p', { class: 'empty' }, 'No revision yet: Deploy new version admits the first one.'));
        return;
      }
      replace(body, h('table', { class: 'list', id: 'activity-table' },
        h('caption', { class: 'visually-hidden' }, 'Revisions, newest first'),
        h('thead', {}, h('tr', {},
          h('th', { scope: 'col' }, 'Revision'), h('th', { scope: 'col' }, 'Generation'),
          h('th', { scope: 'col' }, 'Status'), h('th', { scope: 'col' }, 'Progress or error'),
          h('th', { scope: 'col' }, 'Admitted'), h('th', { scope: 'col' }, 'Actions'))),
        h('tbody', {}, list.map((r, i) => {
          const d = deployments[i];
          const note = d.error ? [h('strong', {}, d.error.code), ` — ${d.error.message}`] : (attemptText(d.progress) || (r.id === agent.activeRevisionId ? 'active' : '—'));
          const source = r.redeployedFromRevisionId ? list.find((x) => x.id === r.redeployedFromRevisionId) : null;
          const rollback = actionButton('Roll back to this revision', {
            id: `rollback-${r.revision}`,
            kind: 'secondary',
            allowed: canRollBackTo(agent, r, canAgent(agent.id, 'deploy')),
            onclick: () => rollBack(r),
          });
          rollback.setAttribute('aria-label', `Roll back to revision #${r.revision}`);
          const diagnose = d.status === 'failed'
            ? h('button', {
              type: 'button', class: 'secondary', id: `diagnose-${r.revision}`, disabled: !mayDiagnose,
              'aria-label': `Diagnose revision #${r.revision}`, onclick: () => diagnosis.diagnose(r, d),
            }, 'Diagnose')
            : null;
          return h('tr', { dataset: { revision: String(r.revision), status: d.status } },
            h('td', { 'data-label': 'Revision' }, `#${r.revision} `, h('code', { class: 'small' }, r.id),
              r.redeployedFromRevisionId ? h('span', { class: 'hint' }, ` rolled back to ${source ? `#${source.revision}` : r.redeployedFromRevisionId}`) : null),
            h('td', { 'data-label': 'Generation' }, String(r.configurationGeneration)),
            h('td', { 'data-label': 'Status' }, h('span', { class: `badge deploy-${d.status}` }, describeDeployment(d))),
            h('td', { 'data-label': 'Progress or error' }, note),
            h('td', { 'data-label': 'Admitted' }, when(r.createdAt)),
            h('td', { 'data-label': 'Actions' }, h('div', { class: 'row-actions' }, rollback, diagnose)));
        }))));
    };
    await draw();
    tabOnUpdate = () => draw();
  }

  // -- Logs

  async function renderLogsTab(panel) {
    const wanted = logsRevision;
    logsRevision = null;
    tabOnLeave = await renderLogs(panel, { ns, agent, revisions, scope, wanted });
  }

  // -- Try it

  function renderChatTab(panel) {
    const canChat = canAgent(agent.id, 'use') || canAgent(agent.id, 'administer');
    tabOnLeave = renderChat(panel, { ns, agent, canChat });
    tabOnUpdate = async (previousActive) => {
      if (Boolean(previousActive) !== Boolean(agent.activeRevisionId)) renderChatTab(panel);
    };
  }

  // -- Workspace files

  async function renderFiles(panel) {
    const canWrite = canAgent(agent.id, 'operate');
    if (!agent.activeRevisionId) {
      replace(panel, h('h2', {}, 'Workspace files'),
        h('p', { class: 'notice', id: 'files-unavailable' },
          'Workspace files are read and written through the Agent\'s running gateway, and this Agent has no active revision. Deploy it to edit its files.'));
      tabOnUpdate = async (previousActive) => {
        if (!previousActive && agent.activeRevisionId) await renderFiles(panel);
      };
      return;
    }
    tabOnUpdate = null;
    const editors = FILES.map((name) => fileEditor(name, canWrite));
    replace(panel, h('h2', {}, 'Workspace files'),
      h('p', { class: 'hint' }, 'The live files of the Agent\'s workspace. Each Save writes one file at once; nothing is retried by itself.'),
      canWrite ? null : h('p', { class: 'notice' }, 'You can read these files but not change them.'),
      h('div', { class: 'files-grid' }, editors.map((e) => e.section)));
    await Promise.all(editors.map((e) => e.load()));
  }

  function fileEditor(name, canWrite) {
    const key = fileKey(name);
    const textarea = h('textarea', { id: `ws-${key}`, rows: 12, class: 'code', spellcheck: 'false', readOnly: !canWrite, dataset: { file: name } });
    const status = h('p', { class: 'file-status', id: `ws-${key}-status`, 'aria-live': 'polite' });
    textarea.setAttribute('aria-describedby', status.id);
    let original = null;
    let blocked = false; // after UNKNOWN_OUTCOME, until reloaded
    let busy = true;
    const save = actionButton('Save', { id: `save-${key}`, allowed: false, onclick: () => doSave() });
    save.setAttribute('aria-label', `Save ${name}`);
    const reload = h('button', { type: 'button', class: 'secondary', id: `reload-${key}`, 'aria-label': `Reload ${name}`, onclick: () => load() }, 'Reload');
    const sync = () => {
      save.disabled = !canWrite || blocked || busy || original === null;
      reload.disabled = busy;
    };
    textarea.addEventListener('input', () => {
      if (!blocked && original !== null) status.textContent = lf(textarea.value) === original ? '' : 'Unsaved changes.';
    });

    async function load() {
      busy = true;
      sync();
      status.textContent = 'Loading…';
      try {
        const { data } = await api('GET', paths.file(ns, agentId, name));
        textarea.value = data.content;
        original = data.content;
        blocked = false;
        status.textContent = `Loaded ${when(new Date().toISOString())}.`;
        delete status.dataset.state;
      } catch (e) {
        status.textContent = `Could not load: ${e.code} — ${e.message}${e.requestId ? ` (request ${e.requestId})` : ''}`;
        showError(e, `Loading ${name}`);
      } finally {
        busy = false;
        sync();
      }
    }

    async function doSave() {
      clearAlert();
      busy = true;
      sync();
      const content = lf(textarea.value);
      status.textContent = 'Saving…';
      try {
        const { data } = await api('PUT', paths.file(ns, agentId, name), { content });
        original = content;
        status.textContent = `Saved (${data.size} bytes).`;
        status.dataset.state = 'saved';
      } catch (e) {
        if (e.code === 'UNKNOWN_OUTCOME') {
          blocked = true;
          status.dataset.state = 'unknown';
          status.textContent = `The outcome of this save is unknown (request ${e.requestId || 'unknown'}): the file may or may not have changed, and nothing was retried. Reload the file to see what it contains; Save stays disabled until then.`;
        } else {
          status.textContent = `Not saved: ${e.code} — ${e.message}`;
          status.dataset.state = 'error';
        }
        showError(e, `Saving ${name}`);
      } finally {
        busy = false;
        sync();
      }
    }

    const section = h('section', { class: 'file-editor', 'aria-labelledby': `ws-${key}-label`, dataset: { file: name } },
      h('label', { for: textarea.id, id: `ws-${key}-label`, class: 'file-name' }, name),
      textarea,
      status,
      h('div', { class: 'actions' }, save, reload));
    sync();
    return { section, load };
  }

  // ---- page ----------------------------------------------------------------------------------

  const wanted = new URLSearchParams(location.search).get('tab') || 'configuration';
  ({ revisions, latest } = await loadLatest(ns, agentId));
  runtime = await loadRuntime();
  state = lifecycleState(agent, latest);
  announcedState = state;
  const viewOnly = !['update', 'delete', 'deploy', 'operate'].some((a) => canAgent(agent.id, a));
  const { heading } = page(agent.name,
    h('p', { class: 'breadcrumbs' }, h('a', { href: href('/console/agents'), 'data-link': true }, 'Agents'), ' / ', agent.name),
    viewOnly ? h('p', { class: 'notice', id: 'view-only' }, 'You can view this Agent but not change it.') : null,
    h('div', { class: 'agent-head' }, summary,
      h('div', { class: 'actions agent-actions' }, stopButton, refreshStopButton, deleteButton, refreshDeleteButton)),
    progress,
    tablist,
    ...panels);
  heading.classList.add('agent-title');
  renderSummary();
  await select(wanted);
  if (isTransitional(state) || deleteRequested || (runtime && runtime.state === 'restarting')) await refreshAgent();
  scope.onDispose(() => { tabOnUpdate = null; tabOnLeave = null; });
}
