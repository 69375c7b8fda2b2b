// An Agent's lifecycle state as the console shows it, derived from the Agent (`status`,
// `desiredRuntimeState`, `activeRevisionId`) and the status of its latest deployment, and which
// revisions it can be rolled back to. Pure: no DOM, no fetch (unit-tested with node:test in
// tests/console).

/** The states, in the words the console uses. */
export const STATES = {
  draft: 'Draft',
  deploying: 'Deploying',
  running: 'Running',
  stopping: 'Stopping',
  stopped: 'Stopped',
  failed: 'Failed',
  deleting: 'Deleting',
};

/** Whether a deployment status will still change. */
export function isPending(deploymentStatus) {
  return deploymentStatus === 'queued' || deploymentStatus === 'running';
}

/** The newest of a list of revisions (highest `revision` number), or null. */
export function latestRevision(revisions) {
  let latest = null;
  for (const r of revisions || []) if (!latest || r.revision > latest.revision) latest = r;
  return latest;
}

/**
 * The lifecycle state of `agent`.
 * @param agent the Agent resource
 * @param latest `{revision, deployment}` of its newest readable revision (deployment may be
 *   null when it could not be read), or null when it has none the caller can read
 */
export function lifecycleState(agent, latest) {
  if (agent.status === 'deleting') return 'deleting';
  const deployment = latest ? latest.deployment : null;
  if (agent.desiredRuntimeState === 'stopped') {
    if (agent.activeRevisionId) return 'stopping';
    return latest ? 'stopped' : 'draft';
  }
  // desired running
  if (deployment && isPending(deployment.status)) return 'deploying';
  if (deployment && deployment.status === 'failed') return 'failed';
  if (agent.activeRevisionId) return 'running';
  return 'deploying';
}

/** Whether the state will change without anyone doing anything (worth polling). */
export function isTransitional(state) {
  return state === 'deploying' || state === 'stopping' || state === 'deleting';
}

/**
 * Whether “Roll back to this revision” is offered for `revision`: the caller may deploy the
 * Agent, the Agent is not being deleted, and the revision is not the one already active
 * (redeploying that would change nothing). Any other revision of the Agent qualifies, newer ones
 * included: rolling back a rollback is allowed.
 */
export function canRollBackTo(agent, revision, mayDeploy) {
  return Boolean(mayDeploy) && agent.status !== 'deleting' && revision.id !== agent.activeRevisionId;
}

/** The gateway's observed state (occ's `…/runtime` route), in the console's words. */
export const RUNTIME_STATES = {
  running: 'Running',
  restarting: 'Restarting',
  stopped: 'Stopped',
  unknown: 'Not observed yet',
};

/**
 * One line about the gateway as the worker last observed it: its state, how often occ
 * restarted the revision's gateway, and the last exit (`formatTime` renders its time).
 * @param runtime the `…/runtime` resource, or null when it could not be read
 */
export function runtimeSummary(runtime, formatTime) {
  if (!runtime) return 'unavailable';
  const parts = [RUNTIME_STATES[runtime.state] || runtime.state];
  if (runtime.restarts > 0) parts.push(runtime.restarts === 1 ? '1 restart' : `${runtime.restarts} restarts`);
  if (runtime.lastExitAt) {
    const how = runtime.lastExitStatus ? ` (${runtime.lastExitStatus})` : '';
    parts.push(`last exit ${formatTime(runtime.lastExitAt)}${how}`);
  }
  return parts.join(' · ');
}
