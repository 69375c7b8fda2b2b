// The Diagnostics panel's logic (crates/occ-api/console/assets/diagnosis.js): the failing step
// and its code from the checks and the deployment's error, the recorded output lines and the
// suggested actions.
import test from 'node:test';
import assert from 'node:assert/strict';
import { diagnosisSummary, failingCheck, outputLineText, outputLines, stepName, suggestedActions } from '../../crates/occ-api/console/assets/diagnosis.js';

const check = (component, name, state, code) => ({ component, check: name, state, checkedAt: '2026-12-02T03:00:00.000Z', ...(code ? { code } : {}) });
const failedStartup = {
  revisionId: 'rev_4',
  observedAt: '2026-12-02T03:00:01.000Z',
  checks: [
    check('deployment', 'reconcile', 'failed', 'RUNTIME_STARTUP_FAILED'),
    check('runtime', 'workload', 'failed', 'NO_WORKLOAD'),
    check('gateway', 'exits', 'succeeded'),
  ],
};
const failedDeployment = {
  status: 'failed',
  error: {
    code: 'RUNTIME_STARTUP_FAILED',
    message: 'The gateway did not start. Revision 3, which served before, was restored.',
    data: { rolledBack: true, previousRevisionId: 'rev_3', output: ['Error: ENOTDIR: not a directory, open \'/dev/null/x/cert.pem\'', 42] },
  },
};

test('the failing step is the first failed check, named in the console\'s words', () => {
  assert.equal(failingCheck(failedStartup.checks).code, 'RUNTIME_STARTUP_FAILED');
  assert.equal(stepName(failedStartup.checks[0]), 'Deployment: reconciliation');
  assert.equal(stepName(check('runtime', 'ready', 'failed')), 'Runtime: workload ready');
  assert.equal(stepName(check('cluster', 'events', 'unknown')), 'cluster: events');
  assert.equal(failingCheck([check('deployment', 'reconcile', 'succeeded'), check('runtime', 'ready', 'unknown')]), null);
});

test('the output lines are the ones recorded with the failure (strings only)', () => {
  assert.deepEqual(outputLines(failedDeployment), ['Error: ENOTDIR: not a directory, open \'/dev/null/x/cert.pem\'']);
  assert.deepEqual(outputLines({ status: 'failed', error: { code: 'X', message: 'y' } }), []);
  assert.deepEqual(outputLines(null), []);
});

test('structured OpenClaw lines read as time, level and message; other text stays as it is', () => {
  const structured = JSON.stringify({
    0: 'Gateway failed to start: gateway tls: cert/key missing.',
    _meta: { runtime: 'node', logLevelName: 'ERROR', name: 'openclaw' },
    time: '2026-12-02T03:02:22.563+00:00',
    message: 'Gateway failed to start: gateway tls: cert/key missing.',
  });
  assert.equal(outputLineText(structured), '2026-12-02T03:02:22.563+00:00 error Gateway failed to start: gateway tls: cert/key missing.');
  assert.equal(outputLineText('{"not": "openclaw"}'), '{"not": "openclaw"}');
  assert.equal(outputLineText('{broken'), '{broken');
  assert.equal(outputLineText('plain text'), 'plain text');
});

test('actions: one per distinct code, the restore noted, a fallback when no code has its own', () => {
  const actions = suggestedActions(failedStartup.checks, failedDeployment);
  assert.equal(actions.length, 3, actions.join('\n'));
  assert.match(actions[0], /gateway did not start/);
  assert.match(actions[1], /Nothing runs for this revision/);
  assert.match(actions[2], /restored the revision that served before/);
  const unknown = suggestedActions([check('runtime', 'running', 'failed', 'CrashLoopBackOff')], null);
  assert.equal(unknown.length, 1);
  assert.match(unknown[0], /Logs tab/);
});

test('the summary: step, code, message, checks, output and actions', () => {
  const summary = diagnosisSummary(failedStartup, failedDeployment);
  assert.equal(summary.failingStep, 'Deployment: reconciliation');
  assert.equal(summary.code, 'RUNTIME_STARTUP_FAILED');
  assert.match(summary.message, /Revision 3, which served before, was restored/);
  assert.deepEqual(summary.checks.map((c) => [c.step, c.state, c.code]), [
    ['Deployment: reconciliation', 'failed', 'RUNTIME_STARTUP_FAILED'],
    ['Runtime: workload exists', 'failed', 'NO_WORKLOAD'],
    ['Gateway: exits and restarts', 'succeeded', null],
  ]);
  assert.equal(summary.output.length, 1);
  // no check failed but the deployment did: its code is the reason
  const quiet = diagnosisSummary({ checks: [check('deployment', 'reconcile', 'unknown')] }, failedDeployment);
  assert.equal(quiet.failingStep, null);
  assert.equal(quiet.code, 'RUNTIME_STARTUP_FAILED');
});
