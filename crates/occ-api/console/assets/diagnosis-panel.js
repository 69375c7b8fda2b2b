// The Diagnostics panel of the Deployment activity tab: for a failed deployment, `POST
// …/deployments/{rev}/diagnostics` read together with the deployment's error (`diagnosis.js`)
// into the failing step, its reason code, the gateway's last output lines (recorded with the
// failure; else the revision's last log lines when the caller may read logs) and what to do.

import { api, paths } from './api.js';
import { h, replace, when } from './dom.js';
import { diagnosisSummary } from './diagnosis.js';
import { logsQuery, recordText } from './logs.js';
import { mayAskForLogs, rememberRefusal } from './logs-tab.js';
import { showError } from './shell.js';

/** Lines of output the panel shows at most. */
const OUTPUT_LINES = 20;

const CHECK_STATES = { succeeded: 'Passed', failed: 'Failed', unknown: 'Unknown' };

/**
 * The panel (a section, hidden until a diagnosis is shown) and `diagnose(revision, deployment)`.
 * @param openLogs shows the Logs tab on a revision (the panel's "Open its logs")
 */
export function diagnosisPanel({ ns, agentId, openLogs }) {
  const section = h('section', { id: 'diagnosis', class: 'diagnosis-panel', 'aria-live': 'polite', 'aria-labelledby': 'diagnosis-title', hidden: true });

  /** The last lines of the revision's output through the logs route, or a reason there are none. */
  async function lastLogLines(revisionId) {
    if (!mayAskForLogs(agentId)) return { lines: [], why: 'No output was recorded with the failure, and you may not read the runtime logs.' };
    try {
      const query = logsQuery({ source: 'gateway', tailLines: OUTPUT_LINES });
      const page = (await api('GET', paths.runtimeLogs(ns, agentId, revisionId, query))).data;
      return { lines: page.records.map(recordText), why: 'No output was recorded for this revision.' };
    } catch (e) {
      if (e.status === 403) rememberRefusal(agentId);
      return { lines: [], why: `No output was recorded with the failure, and the runtime logs could not be read (${e.code}).` };
    }
  }

  async function diagnose(revision, deployment) {
    const titleText = `Diagnosis of revision #${revision.revision}`;
    replace(section, h('h3', { id: 'diagnosis-title' }, titleText), h('p', { class: 'loading' }, 'Running the checks…'));
    section.hidden = false;
    let diagnostics;
    try {
      diagnostics = (await api('POST', paths.diagnostics(ns, agentId, revision.id))).data;
    } catch (e) {
      replace(section, h('h3', { id: 'diagnosis-title' }, titleText),
        h('p', { class: 'field-error' }, `The checks could not be run: ${e.code} — ${e.message}`));
      showError(e, `Diagnosing revision #${revision.revision}`);
      return;
    }
    const summary = diagnosisSummary(diagnostics, deployment);
    let lines = summary.output;
    let why = '';
    if (!lines.length) ({ lines, why } = await lastLogLines(revision.id));
    const row = (term, value, id) => [h('dt', {}, term), h('dd', { id }, value)];
    replace(section,
      h('h3', { id: 'diagnosis-title', tabindex: '-1' }, titleText),
      h('p', { class: 'hint' }, `Checked ${when(diagnostics.observedAt)}.`),
      h('dl', { class: 'summary' },
        row('Failing step', summary.failingStep || 'none of the checks failed', 'diagnosis-step'),
        row('Reason code', summary.code ? h('code', {}, summary.code) : '—', 'diagnosis-code'),
        summary.message ? row('Message', summary.message, 'diagnosis-message') : null),
      h('h4', {}, 'Checks'),
      h('ul', { class: 'checks', id: 'diagnosis-checks' }, summary.checks.map((c) => h('li', { dataset: { state: c.state } },
        h('span', { class: `badge check-${c.state}` }, CHECK_STATES[c.state] || c.state), ` ${c.step}`,
        c.code ? [' — ', h('code', {}, c.code)] : null))),
      h('h4', {}, 'Last output lines'),
      lines.length
        ? h('pre', { class: 'code', id: 'diagnosis-output', tabindex: '0', 'aria-label': 'Last output lines of the gateway' }, lines.slice(-OUTPUT_LINES).join('\n'))
        : h('p', { class: 'empty', id: 'diagnosis-output' }, why),
      h('h4', {}, 'What to do'),
      h('ul', { id: 'diagnosis-actions' }, summary.actions.map((a) => h('li', {}, a))),
      h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'secondary', id: 'diagnosis-logs', onclick: () => openLogs(revision.id) }, `Open the logs of revision #${revision.revision}`),
        h('button', { type: 'button', class: 'secondary', id: 'diagnosis-close', onclick: () => { section.hidden = true; } }, 'Close')));
    section.querySelector('h3').focus();
  }

  return { section, diagnose };
}
