// The console's only way to talk to occ: same-origin fetches of the public API with the session
// cookie the browser keeps (HttpOnly; the console never sees it). Browsers send `Origin` on
// same-origin POST/PUT/PATCH/DELETE, which is what the API's CSRF rule checks. Nothing is stored
// in the browser, and nothing is retried: a failed or uncertain write is reported as it is.

/** An error answered by the API (or a network failure, status 0). */
export class ApiError extends Error {
  constructor({ status, code, message, requestId, details, retryAfter }) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.requestId = requestId || null;
    this.details = Array.isArray(details) ? details : [];
    /** Seconds to wait before asking again (429's `Retry-After`), or null. */
    this.retryAfter = retryAfter || null;
  }
}

let onUnauthenticated = () => {};

/** What to do when the session is gone (401 on a protected route). */
export function setUnauthenticatedHandler(handler) {
  onUnauthenticated = handler;
}

/**
 * Sends a request; resolves the Response when it succeeded, rejects with an ApiError carrying
 * the envelope's code, message, details and request id (also read from `x-request-id`).
 */
async function send(method, path, body, accept) {
  const init = { method, credentials: 'same-origin', headers: { accept } };
  if (body !== undefined) {
    init.headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (e) {
    throw new ApiError({
      status: 0,
      code: 'NETWORK_ERROR',
      message: `occ could not be reached (${e.message}). Nothing was retried; check the current state before trying again.`,
    });
  }
  if (response.ok) return response;
  const doc = parse(await response.text());
  const error = (doc && doc.error) || {};
  const retryAfter = Number.parseInt(response.headers.get('retry-after') || '', 10);
  const err = new ApiError({
    status: response.status,
    code: error.code || `HTTP_${response.status}`,
    message: error.message || response.statusText || 'The request failed',
    requestId: (doc && doc.meta && doc.meta.requestId) || response.headers.get('x-request-id'),
    details: error.details,
    retryAfter: Number.isFinite(retryAfter) ? retryAfter : null,
  });
  if (response.status === 401 && !path.startsWith('/api/auth/')) onUnauthenticated(err);
  throw err;
}

function parse(text) {
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/**
 * Calls the API. Resolves `{data, requestId, status}`; rejects with an ApiError (see `send`).
 */
export async function api(method, path, body) {
  const response = await send(method, path, body, 'application/json');
  const doc = parse(await response.text());
  const requestId = (doc && doc.meta && doc.meta.requestId) || response.headers.get('x-request-id');
  return { data: doc ? doc.data : null, requestId, status: response.status };
}

/**
 * Fetches a text attachment (a runtime log download). Resolves `{text, disposition}` with the
 * `Content-Disposition` header; errors are answered as JSON envelopes, rejected as by `api`.
 */
export async function apiText(path) {
  const response = await send('GET', path, undefined, 'text/plain, application/json');
  return { text: await response.text(), disposition: response.headers.get('content-disposition') };
}

const seg = encodeURIComponent;

/** Paths of the API routes the console uses. */
export const paths = {
  session: () => '/api/auth/session',
  signIn: () => '/api/auth/sign-in/email',
  signOut: () => '/api/auth/sign-out',
  installation: () => '/installation',
  namespaces: () => '/namespaces',
  namespace: (ns) => `/namespaces/${seg(ns)}`,
  permissions: (ns) => `/namespaces/${seg(ns)}/iam/permissions`,
  defaults: (ns) => `/namespaces/${seg(ns)}/workspace-defaults`,
  configurations: (ns) => `/namespaces/${seg(ns)}/configurations`,
  configuration: (ns, cfg) => `/namespaces/${seg(ns)}/configurations/${seg(cfg)}`,
  agents: (ns) => `/namespaces/${seg(ns)}/agents`,
  agent: (ns, agt) => `/namespaces/${seg(ns)}/agents/${seg(agt)}`,
  deploy: (ns, agt) => `/namespaces/${seg(ns)}/agents/${seg(agt)}/deploy`,
  stop: (ns, agt) => `/namespaces/${seg(ns)}/agents/${seg(agt)}/stop`,
  revisions: (ns, agt) => `/namespaces/${seg(ns)}/agents/${seg(agt)}/revisions`,
  redeploy: (ns, agt, rev) => `/namespaces/${seg(ns)}/agents/${seg(agt)}/revisions/${seg(rev)}/redeploy`,
  runtime: (ns, agt) => `/namespaces/${seg(ns)}/agents/${seg(agt)}/runtime`,
  deployment: (ns, agt, rev) => `/namespaces/${seg(ns)}/agents/${seg(agt)}/deployments/${seg(rev)}`,
  deploymentRuntime: (ns, agt, rev) => `/namespaces/${seg(ns)}/agents/${seg(agt)}/deployments/${seg(rev)}/runtime`,
  runtimeLogs: (ns, agt, rev, query) => `/namespaces/${seg(ns)}/agents/${seg(agt)}/deployments/${seg(rev)}/runtime/logs?${query}`,
  diagnostics: (ns, agt, rev) => `/namespaces/${seg(ns)}/agents/${seg(agt)}/deployments/${seg(rev)}/diagnostics`,
  presets: (ns) => `/namespaces/${seg(ns)}/presets`,
  provision: (ns) => `/namespaces/${seg(ns)}/agents/provision`,
  provisioning: (ns, work) => `/namespaces/${seg(ns)}/agents/provision/${seg(work)}`,
  secrets: (ns) => `/namespaces/${seg(ns)}/secrets`,
  secret: (ns, sec) => `/namespaces/${seg(ns)}/secrets/${seg(sec)}`,
  credentialSources: (ns) => `/namespaces/${seg(ns)}/credential-sources`,
  credentialSource: (ns, cs) => `/namespaces/${seg(ns)}/credential-sources/${seg(cs)}`,
  credentialSourceModels: (ns, cs) => `/namespaces/${seg(ns)}/credential-sources/${seg(cs)}/models`,
  roles: (ns) => `/namespaces/${seg(ns)}/iam/roles`,
  bindings: (ns) => `/namespaces/${seg(ns)}/iam/access-bindings`,
  namespaceBindings: (ns) => `/namespaces/${seg(ns)}/iam/namespace-bindings`,
  accounts: () => '/api/auth/accounts',
  account: (id) => `/api/auth/accounts/${seg(id)}`,
  servicePrincipals: () => '/api/auth/service-principals',
  servicePrincipal: (id) => `/api/auth/service-principals/${seg(id)}`,
  runtimeRole: (ns, id) => `/namespaces/${seg(ns)}/iam/access-bindings/${seg(id)}/runtime-role`,
  chat: (ns, agt) => `/namespaces/${seg(ns)}/agents/${seg(agt)}/chat`,
  nativeAdmin: (ns, agt) => `/namespaces/${seg(ns)}/agents/${seg(agt)}/native-admin`,
  file: (ns, agt, name) => `/namespaces/${seg(ns)}/agents/${seg(agt)}/workspace/files/${seg(name)}`,
};
