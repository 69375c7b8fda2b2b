// The Diagnostics panel's logic: reading `POST …/deployments/{rev}/diagnostics` (checks in the
// order a deployment goes through them) together with the deployment's own error into the
// failing step, its reason code, the gateway's last output lines and what the operator can do.
// Pure: no DOM, no fetch (unit-tested with node:test in tests/console).

/** What each check looks at, in the console's words. */
const STEPS = {
  'deployment/reconcile': 'Deployment: reconciliation',
  'runtime/workload': 'Runtime: workload exists',
  'runtime/running': 'Runtime: workload running',
  'runtime/ready': 'Runtime: workload ready',
  'gateway/exits': 'Gateway: exits and restarts',
};

/** A check's step name ("Runtime: workload ready"). */
export function stepName(check) {
  return STEPS[`${check.component}/${check.check}`] || `${check.component}: ${check.check}`;
}

/** The first failed check (the step the deployment stopped at), or null. */
export function failingCheck(checks) {
  return (checks || []).find((c) => c.state === 'failed') || null;
}

/** What to do about a reason code. */
const ACTIONS = {
  RUNTIME_CONFIGURATION_INVALID: 'The runtime refused the Configuration: correct the values its output names, save a new version and deploy it.',
  RUNTIME_STARTUP_FAILED: 'The gateway did not start: read its last output lines below (and the Logs tab) for the cause, fix the Configuration or the files it points to, then deploy a new version.',
  RUNTIME_NOT_INSTALLED: 'The OpenClaw runtime is missing on the worker: ask an operator to install the pinned runtime, then deploy again.',
  RUNTIME_MODEL_PROBE_FAILED: 'The model provider did not answer the probe: check the model, its provider settings and the bound credential.',
  GATEWAY_NOT_READY: 'The gateway started but never became ready: look for errors in its output (Logs tab) and check what it waits for.',
  GATEWAY_PORT_IN_USE: 'Another process holds the gateway port: deploy again; if it persists, ask an operator to free the worker\'s port range.',
  GATEWAY_PORTS_EXHAUSTED: 'The worker has no free gateway port: stop Agents that are not needed, or ask an operator to widen the port range.',
  GATEWAY_RESTARTING: 'The gateway keeps exiting and occ restarts it: read the output around each exit in the Logs tab.',
  GATEWAY_EXITED: 'The gateway exited since it started: read the output before the exit in the Logs tab.',
  NO_WORKLOAD: 'Nothing runs for this revision (it was never started, was stopped or was replaced): deploy a new version, or roll back to one that ran.',
  WORKLOAD_NOT_RUNNING: 'The workload is not running: read its last output lines and the Logs tab for why it stopped.',
  WORKLOAD_NOT_READY: 'The workload runs but is not ready yet: wait a little and diagnose again, or read the Logs tab.',
  SECRET_BINDING_UNAVAILABLE: 'A bound Secret could not be read: check that it exists and that its Secret Driver is reachable.',
  HARNESS_AUTH_SOURCE_UNAVAILABLE: 'The harness credential could not be read: check the Secret it names.',
  DEPENDENCY_UNAVAILABLE: 'A dependency of occ (its Compute Driver or database) did not answer: try again shortly.',
  CONVERGENCE_DEADLINE_EXCEEDED: 'The deployment did not converge in time: check the gateway output, then deploy again.',
  MAX_ATTEMPTS_EXHAUSTED: 'occ gave up after repeated attempts: read the last attempt\'s error and the gateway output, fix the cause, then deploy again.',
};

/** When no code has an action of its own. */
const FALLBACK_ACTION = 'Read the gateway\'s output in the Logs tab for the cause; after fixing it, deploy a new version or roll back to a revision that ran.';

/**
 * The suggested actions for a diagnosis: one per distinct reason code (failing checks first,
 * then the deployment's error), the fallback when none has its own, and a note when occ already
 * restored the revision that served before.
 */
export function suggestedActions(checks, deployment) {
  const codes = [];
  for (const c of checks || []) if (c.state === 'failed' && c.code) codes.push(c.code);
  const error = deployment && deployment.error;
  if (error && error.code) codes.push(error.code);
  const actions = [...new Set(codes)].map((code) => ACTIONS[code]).filter(Boolean);
  const unique = [...new Set(actions)];
  if (!unique.length) unique.push(FALLBACK_ACTION);
  if (error && error.data && error.data.rolledBack) {
    unique.push('Nothing is down meanwhile: occ restored the revision that served before, and it keeps serving.');
  }
  return unique;
}

/**
 * One recorded output line as people read it: OpenClaw's structured log lines (JSON with
 * `_meta`, as the logs route classifies them) as `time level message`, other text as it is.
 */
export function outputLineText(line) {
  if (!line.trimStart().startsWith('{')) return line;
  let value;
  try {
    value = JSON.parse(line);
  } catch {
    return line;
  }
  const meta = value && value._meta;
  if (!meta || typeof meta !== 'object' || typeof value.message !== 'string') return line;
  const level = typeof meta.logLevelName === 'string' ? meta.logLevelName.toLowerCase() : '';
  const time = typeof value.time === 'string' ? value.time : '';
  return [time, level, value.message].filter(Boolean).join(' ');
}

/** The gateway's last output lines the failed deployment recorded (redacted by occ). */
export function outputLines(deployment) {
  const output = deployment && deployment.error && deployment.error.data && deployment.error.data.output;
  return Array.isArray(output) ? output.filter((line) => typeof line === 'string').map(outputLineText) : [];
}

/**
 * The account the panel shows: the failing step and its code (the deployment's error code when
 * no check failed but the deployment did), the error message, the checks, the output lines and
 * the actions.
 */
export function diagnosisSummary(diagnostics, deployment) {
  const checks = (diagnostics && diagnostics.checks) || [];
  const failing = failingCheck(checks);
  const error = deployment && deployment.error;
  return {
    failingStep: failing ? stepName(failing) : null,
    code: (failing && failing.code) || (error && error.code) || null,
    message: error ? error.message : null,
    checks: checks.map((c) => ({ step: stepName(c), state: c.state, code: c.code || null })),
    output: outputLines(deployment),
    actions: suggestedActions(checks, deployment),
  };
}
