// The Agent page's Logs tab: one revision's runtime output (`GET …/runtime/logs`), redacted by
// occ. A revision picker (default: `logs.js`' `defaultRevision`), source, tail size, how far
// back, level chips (`minLevel`), a text filter over the rows shown, Follow (polls with the
// returned cursor every 2 s, appending only what each page returns), Download (`download=true`,
// saved as a .log file) and 429 handled by waiting `Retry-After`. Each new view is audited by
// occ, so a refusal (403) is remembered for the page session instead of being asked again.

import { api, apiText, paths } from './api.js';
import { h, replace, when } from './dom.js';
import {
  FOLLOW_INTERVAL_MS, LEVEL_CHIPS, MAX_RECORDS, SINCE_CHOICES, TAIL_SIZES,
  appendPage, defaultRevision, downloadName, lineParts, logsQuery, matchesFilter, recordText, retryDelay,
} from './logs.js';
import { canAgent, ctx, showError } from './shell.js';

/** Whether the caller may read an Agent's runtime logs (`read_logs`, `administer` standing in). */
export function canReadLogs(agentId) {
  return canAgent(agentId, 'read_logs') || canAgent(agentId, 'administer');
}

/** Agents whose logs occ refused to the signed-in user during this page session. */
const refused = new Set();
const refusalKey = (agentId) => `${ctx.user ? ctx.user.id || ctx.user.email : ''}/${agentId}`;

/** Whether the logs of `agentId` are worth asking for (allowed, and not refused already). */
export function mayAskForLogs(agentId) {
  return canReadLogs(agentId) && !refused.has(refusalKey(agentId));
}

/** Remembers a 403 for `agentId` (see `mayAskForLogs`). */
export function rememberRefusal(agentId) {
  refused.add(refusalKey(agentId));
}

/** The notice shown instead of output to a caller who may not read it. */
export function logsDeniedNotice(id) {
  return h('p', { class: 'notice', id },
    'You cannot read this Agent\'s runtime logs: that needs the Agent permission read_logs (or administer). Ask an administrator for it.');
}

/**
 * The revision shown first: the latest one when it is newer than the active one and has
 * workloads (the runtime route needs Agent `operate` and `read`; unreadable counts as none).
 */
async function initialRevision(ns, agent, revisions) {
  let latest = null;
  for (const r of revisions) if (!latest || r.revision > latest.revision) latest = r;
  let latestHasWorkloads = false;
  // Asked only of a caller it would not refuse: every refusal is an audited denial.
  const mayReadRuntime = canAgent(agent.id, 'operate') && canAgent(agent.id, 'read');
  if (mayReadRuntime && latest && agent.activeRevisionId && latest.id !== agent.activeRevisionId) {
    try {
      const runtime = (await api('GET', paths.deploymentRuntime(ns, agent.id, latest.id))).data;
      latestHasWorkloads = Array.isArray(runtime.pods) && runtime.pods.length > 0;
    } catch {
      latestHasWorkloads = false;
    }
  }
  return defaultRevision(agent.activeRevisionId, revisions, latestHasWorkloads);
}

/**
 * Renders the tab into `panel`. Resolves a function that stops it (no more polls, late answers
 * ignored): the page calls it when the tab is left; the page's scope calls it when the page is.
 * @param wanted a revision to show instead of the default (from the Diagnostics panel), or null
 */
export async function renderLogs(panel, { ns, agent, revisions, scope, wanted }) {
  const heading = h('h2', {}, 'Logs');
  if (!revisions.length) {
    replace(panel, heading, h('p', { class: 'empty', id: 'logs-unavailable' },
      'No revision yet: Deploy new version admits the first one, and its gateway\'s output shows here.'));
    return () => {};
  }
  const allowed = mayAskForLogs(agent.id);
  const sorted = [...revisions].sort((a, b) => b.revision - a.revision);
  const first = wanted && sorted.some((r) => r.id === wanted) ? wanted : await initialRevision(ns, agent, sorted);

  // ---- controls ----
  const revisionSelect = h('select', { id: 'logs-revision', disabled: !allowed },
    sorted.map((r) => h('option', { value: r.id, selected: r.id === first },
      `#${r.revision}${r.id === agent.activeRevisionId ? ' (active)' : ''}`)));
  const sources = agent.executionMode === 'dedicated' ? ['gateway', 'agent'] : ['gateway'];
  const sourceSelect = h('select', { id: 'logs-source', disabled: !allowed },
    sources.map((s) => h('option', { value: s }, s === 'gateway' ? 'Gateway' : 'Agent (harness)')));
  const tailSelect = h('select', { id: 'logs-tail', disabled: !allowed },
    TAIL_SIZES.map((n) => h('option', { value: String(n), selected: n === 200 }, `Last ${n} lines`)));
  const sinceSelect = h('select', { id: 'logs-since', disabled: !allowed },
    SINCE_CHOICES.map((c) => h('option', { value: c.seconds ? String(c.seconds) : '' }, c.label)));
  let chip = LEVEL_CHIPS[0];
  const chipButtons = LEVEL_CHIPS.map((c) => h('button', {
    type: 'button', class: 'chip', id: `logs-level-${c.id}`, 'aria-pressed': String(c === chip), disabled: !allowed,
    onclick: () => {
      chip = c;
      for (const b of chipButtons) b.setAttribute('aria-pressed', String(b.id === `logs-level-${c.id}`));
      startView();
    },
  }, c.label));
  const filterInput = h('input', {
    type: 'search', id: 'logs-filter', placeholder: 'Text in the lines shown', disabled: !allowed, autocomplete: 'off',
  });
  const followButton = h('button', {
    type: 'button', class: 'secondary', id: 'logs-follow', 'aria-pressed': 'false', disabled: !allowed,
    onclick: () => setFollow(!following),
  }, 'Follow');
  const reloadButton = h('button', { type: 'button', class: 'secondary', id: 'logs-reload', disabled: !allowed, onclick: () => startView() }, 'Reload');
  const downloadButton = h('button', { type: 'button', class: 'secondary', id: 'logs-download', disabled: !allowed, onclick: () => download() }, 'Download');
  const status = h('p', { class: 'hint', id: 'logs-status', 'aria-live': 'polite' });
  const output = h('div', { class: 'log-output', id: 'logs-output', role: 'log', tabindex: '0', 'aria-label': 'Runtime output, oldest first' });
  const labelled = (label, control) => h('div', { class: 'field inline-field' }, h('label', { for: control.id }, label), control);

  replace(panel, heading,
    h('p', { class: 'hint' }, 'The output of a revision\'s workload as its Compute Driver keeps it, redacted by occ. Opening a view or downloading is recorded in the audit log.'),
    allowed ? null : logsDeniedNotice('logs-denied'),
    h('div', { class: 'log-controls' },
      labelled('Revision', revisionSelect), labelled('Source', sourceSelect),
      labelled('Lines', tailSelect), labelled('Since', sinceSelect)),
    h('div', { class: 'log-controls' },
      h('div', { class: 'chips', role: 'group', 'aria-label': 'Least severe level shown' }, chipButtons),
      labelled('Filter', filterInput),
      h('div', { class: 'actions' }, followButton, reloadButton, downloadButton)),
    status,
    output);
  if (!allowed) return () => {};

  // ---- state ----
  let records = [];
  let cursor = null;
  let view = 0; // a new view makes the answers still pending for an older one stale
  let following = false;
  let timer = null;
  let stopped = false;
  let note = '';

  const selection = () => ({
    revision: revisionSelect.value,
    source: sourceSelect.value,
    tailLines: Number(tailSelect.value),
    sinceSeconds: sinceSelect.value ? Number(sinceSelect.value) : null,
    minLevel: chip.minLevel,
  });

  function renderStatus() {
    const shown = records.filter((r) => r.type === 'line').length;
    const filter = filterInput.value.trim();
    const matching = filter ? records.filter((r) => r.type === 'line' && matchesFilter(r, filter)).length : shown;
    const parts = [shown === 1 ? '1 line' : `${shown} lines`];
    if (filter) parts.push(`${matching} matching “${filter}”`);
    if (following) parts.push('following');
    if (note) parts.push(note);
    status.textContent = parts.join(' · ');
  }

  function row(record) {
    const attrs = {
      class: `log-row log-${record.type}${record.type === 'line' ? ` level-${record.level}` : ''}`,
      dataset: { type: record.type, level: record.level || '' },
      hidden: !matchesFilter(record, filterInput.value),
    };
    if (record.type !== 'line') return h('div', attrs, recordText(record));
    const { time, level, subsystem, message } = lineParts(record);
    const part = (cls, text) => (text ? [h('span', { class: cls }, text), ' '] : null);
    return h('div', attrs, part('log-time', time), part('log-level', level), part('log-subsystem', subsystem),
      h('span', { class: 'log-message' }, message));
  }

  /** Whether the newest row is in view (then it stays in view as rows come and go). */
  const atBottom = () => output.scrollHeight - output.scrollTop - output.clientHeight < 24;

  /** Appends a page's records (and drops the oldest beyond the bound), keeping the scroll. */
  function show(page) {
    const followNewest = atBottom();
    const { records: kept, dropped } = appendPage(records, page, MAX_RECORDS);
    const added = (page.records || []).slice(-MAX_RECORDS);
    records = kept;
    output.querySelector('.log-empty')?.remove();
    for (let i = 0; i < dropped && output.firstChild; i += 1) output.firstChild.remove();
    output.append(...added.map(row));
    if (!records.length) output.append(h('p', { class: 'empty log-empty' }, 'No output for this revision yet.'));
    if (followNewest) output.scrollTop = output.scrollHeight;
  }

  /** Asks for one page of `theView`; waits out 429s. Resolves the page, or null when stale. */
  async function fetchPage(theView, query) {
    const { revision } = selection();
    for (;;) {
      try {
        const { data } = await api('GET', paths.runtimeLogs(ns, agent.id, revision, query));
        return theView === view && !stopped ? data : null;
      } catch (e) {
        if (theView !== view || stopped) return null;
        if (e.status !== 429) throw e;
        const wait = retryDelay(e);
        note = `occ asked to wait ${Math.round(wait / 1000)} s before reading again`;
        renderStatus();
        await new Promise((resolve) => setTimeout(resolve, wait));
        if (theView !== view || stopped) return null;
        note = '';
      }
    }
  }

  function refuse(e) {
    rememberRefusal(agent.id);
    setFollow(false);
    for (const control of panel.querySelectorAll('select, input, button')) control.disabled = true;
    replace(output, logsDeniedNotice('logs-denied'));
    showError(e, 'Reading the runtime logs');
  }

  /** A new view: the current selection's tail, then (when following) polls with its cursor. */
  async function startView() {
    view += 1;
    const theView = view;
    clearTimeout(timer);
    records = [];
    cursor = null;
    note = '';
    replace(output, h('p', { class: 'loading' }, 'Loading the output…'));
    const { source, tailLines, sinceSeconds, minLevel } = selection();
    try {
      const page = await fetchPage(theView, logsQuery({ source, tailLines, sinceSeconds, minLevel }));
      if (!page) return;
      output.replaceChildren();
      cursor = page.cursor || null;
      received(page);
    } catch (e) {
      if (theView !== view) return;
      if (e.status === 403) return refuse(e);
      replace(output, h('p', { class: 'field-error' }, `Could not read the output: ${e.code} — ${e.message}`));
      showError(e, 'Reading the runtime logs');
    }
  }

  /** Shows a page and, when following, asks for the next one (at once after a page cut at its
   * byte bound: more is waiting). */
  function received(page) {
    show(page);
    note = `read ${when(page.observedAt)}`;
    renderStatus();
    if (following) schedule(page.truncated ? 0 : FOLLOW_INTERVAL_MS);
  }

  function schedule(ms) {
    clearTimeout(timer);
    timer = setTimeout(() => poll(view), ms);
  }

  /** One follow poll: the page after the cursor, appended as it is. */
  async function poll(theView) {
    if (!following || stopped || theView !== view) return;
    if (!cursor) {
      // Nothing was readable yet (no output, so no position): a new view is all there is.
      await startView();
      return;
    }
    const { source, minLevel } = selection();
    try {
      const page = await fetchPage(theView, logsQuery({ source, minLevel, cursor }));
      if (!page) return;
      cursor = page.cursor || cursor;
      received(page);
    } catch (e) {
      if (theView !== view) return;
      if (e.status === 403) return refuse(e);
      if (e.code === 'RUNTIME_LOGS_CURSOR_INVALID') {
        // The cursor outlived its view (a restarted occ with another secret, or altered):
        // start over, as the CLI does, rather than stop following.
        await startView();
        return;
      }
      setFollow(false);
      showError(e, 'Following the runtime logs');
    }
  }

  function setFollow(on) {
    following = on;
    followButton.setAttribute('aria-pressed', String(on));
    followButton.textContent = on ? 'Following' : 'Follow';
    if (on) schedule(FOLLOW_INTERVAL_MS);
    else clearTimeout(timer);
    renderStatus();
  }

  async function download() {
    const { revision, source, sinceSeconds, minLevel } = selection();
    downloadButton.disabled = true;
    try {
      const { text, disposition } = await apiText(
        paths.runtimeLogs(ns, agent.id, revision, logsQuery({ source, sinceSeconds, minLevel, download: true })));
      const name = downloadName(disposition, `${agent.id}-${revision}-${source}.log`);
      const url = URL.createObjectURL(new Blob([text], { type: 'text/plain;charset=utf-8' }));
      const link = h('a', { href: url, download: name, hidden: true });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
      note = `downloaded ${name}`;
      renderStatus();
    } catch (e) {
      if (e.status === 403) return refuse(e);
      showError(e, 'Downloading the runtime logs');
    } finally {
      if (!refused.has(refusalKey(agent.id))) downloadButton.disabled = false;
    }
  }

  filterInput.addEventListener('input', () => {
    const filter = filterInput.value;
    const followNewest = atBottom();
    records.forEach((record, i) => {
      const el = output.children[i];
      if (el) el.hidden = !matchesFilter(record, filter);
    });
    if (followNewest) output.scrollTop = output.scrollHeight;
    renderStatus();
  });
  for (const control of [revisionSelect, sourceSelect, tailSelect, sinceSelect]) {
    control.addEventListener('change', () => startView());
  }

  const stop = () => {
    stopped = true;
    following = false;
    view += 1;
    clearTimeout(timer);
  };
  scope.onDispose(stop);
  await startView();
  return stop;
}
