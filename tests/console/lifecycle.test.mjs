// The console's lifecycle-state derivation (crates/occ-api/console/assets/lifecycle.js), which
// decides the state every Agent is shown in: each state from the Agent and its latest deployment;
// and which revisions the Deployment activity tab offers to roll back to.
import test from 'node:test';
import assert from 'node:assert/strict';
import { canRollBackTo, isTransitional, latestRevision, lifecycleState, runtimeSummary } from '../../crates/occ-api/console/assets/lifecycle.js';

const agent = (fields) => ({ status: 'active', desiredRuntimeState: 'stopped', ...fields });
const latest = (status) => ({ revision: { id: 'rev_2', revision: 2 }, deployment: { status } });

test('a new Agent is a draft', () => {
  assert.equal(lifecycleState(agent({}), null), 'draft');
});

test('a queued or running deployment is deploying', () => {
  for (const status of ['queued', 'running']) {
    assert.equal(lifecycleState(agent({ desiredRuntimeState: 'running' }), latest(status)), 'deploying');
    assert.equal(lifecycleState(agent({ desiredRuntimeState: 'running', activeRevisionId: 'rev_1' }), latest(status)), 'deploying');
  }
});

test('an active revision with desired running is running', () => {
  assert.equal(lifecycleState(agent({ desiredRuntimeState: 'running', activeRevisionId: 'rev_2' }), latest('succeeded')), 'running');
  // revisions the caller may not read: the Agent's own fields still tell
  assert.equal(lifecycleState(agent({ desiredRuntimeState: 'running', activeRevisionId: 'rev_2' }), null), 'running');
});

test('the latest deployment failed is failed, even with an older revision still active', () => {
  assert.equal(lifecycleState(agent({ desiredRuntimeState: 'running' }), latest('failed')), 'failed');
  assert.equal(lifecycleState(agent({ desiredRuntimeState: 'running', activeRevisionId: 'rev_1' }), latest('failed')), 'failed');
});

test('desired stopped is stopping until the active revision is cleared, then stopped', () => {
  assert.equal(lifecycleState(agent({ activeRevisionId: 'rev_2' }), latest('succeeded')), 'stopping');
  assert.equal(lifecycleState(agent({}), latest('succeeded')), 'stopped');
  // a deployment the stop overtook still reads stopped, not deploying
  assert.equal(lifecycleState(agent({}), latest('queued')), 'stopped');
});

test('a deleting Agent is deleting whatever else it says', () => {
  assert.equal(lifecycleState(agent({ status: 'deleting', activeRevisionId: 'rev_2' }), latest('running')), 'deleting');
});

test('transitional states are the ones worth polling', () => {
  assert.deepEqual(['draft', 'deploying', 'running', 'stopping', 'stopped', 'failed', 'deleting'].filter(isTransitional),
    ['deploying', 'stopping', 'deleting']);
});

test('the latest revision is the highest number', () => {
  assert.equal(latestRevision([]), null);
  assert.equal(latestRevision([{ revision: 1 }, { revision: 3 }, { revision: 2 }]).revision, 3);
});

test('rolling back is offered for every revision but the active one, to a caller who may deploy', () => {
  const running = agent({ desiredRuntimeState: 'running', activeRevisionId: 'rev_2' });
  assert.equal(canRollBackTo(running, { id: 'rev_1' }, true), true);
  assert.equal(canRollBackTo(running, { id: 'rev_3' }, true), true, 'a newer one too');
  assert.equal(canRollBackTo(running, { id: 'rev_2' }, true), false, 'the active one changes nothing');
  assert.equal(canRollBackTo(running, { id: 'rev_1' }, false), false, 'read-only callers');
  assert.equal(canRollBackTo(agent({}), { id: 'rev_1' }, true), true, 'a stopped Agent has none active');
  assert.equal(canRollBackTo(agent({ status: 'deleting' }), { id: 'rev_1' }, true), false);
});

test('the gateway line says its state, restarts and last exit', () => {
  const at = (t) => `at ${t}`;
  assert.equal(runtimeSummary(null, at), 'unavailable');
  assert.equal(runtimeSummary({ state: 'unknown', restarts: 0, lastExitAt: null, lastExitStatus: null }, at), 'Not observed yet');
  assert.equal(runtimeSummary({ state: 'running', restarts: 0, lastExitAt: null, lastExitStatus: null }, at), 'Running');
  assert.equal(
    runtimeSummary({ state: 'restarting', restarts: 0, lastExitAt: 'T1', lastExitStatus: 'signal: 9 (SIGKILL)' }, at),
    'Restarting · last exit at T1 (signal: 9 (SIGKILL))');
  assert.equal(runtimeSummary({ state: 'running', restarts: 2, lastExitAt: 'T2', lastExitStatus: null }, at),
    'Running · 2 restarts · last exit at T2');
  assert.equal(runtimeSummary({ state: 'running', restarts: 1, lastExitAt: 'T3', lastExitStatus: null }, at),
    'Running · 1 restart · last exit at T3');
});
