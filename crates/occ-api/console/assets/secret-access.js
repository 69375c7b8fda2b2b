// Grants the console makes in one step. Letting an Agent's own identity use a Secret: the one grant a deploy needs for each Secret its
// revision consumes (a Role with exactly `operate` on Secrets, bound to the Agent's service
// principal on that Secret). An existing such Role and binding are reused, so it is idempotent;
// whether the caller may grant it is the API's to decide.

import { api, paths } from './api.js';

export async function letAgentUseSecret(ns, principalId, secretId) {
  const wanted = [{ action: 'operate', resourceKind: 'secret' }];
  const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  const roles = (await api('GET', paths.roles(ns))).data || [];
  let role = roles.find((r) => same(r.permissions, wanted));
  if (!role) role = (await api('POST', paths.roles(ns), { name: 'secret-user', permissions: wanted })).data;
  const binding = { subjectKind: 'identity', subjectId: principalId, roleId: role.id, resourceKind: 'secret', resourceId: secretId };
  const bindings = (await api('GET', paths.bindings(ns))).data || [];
  const exists = bindings.some((b) => ['subjectId', 'roleId', 'resourceKind', 'resourceId'].every((k) => b[k] === binding[k]));
  if (!exists) await api('POST', paths.bindings(ns), binding);
}

/**
 * Assigns a person a runtime role on one Agent (what opening its native Control UI needs): their
 * binding of a Role with exactly `use` on Agents on that Agent, carrying `runtimeRole`. An
 * existing such binding without a role gets it (PATCH …/runtime-role); otherwise one is created.
 */
export async function assignRuntimeRole(ns, principalId, agentId, runtimeRole) {
  const wanted = [{ action: 'use', resourceKind: 'agent' }];
  const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  const roles = (await api('GET', paths.roles(ns))).data || [];
  let role = roles.find((r) => same(r.permissions, wanted));
  if (!role) role = (await api('POST', paths.roles(ns), { name: 'agent-user', permissions: wanted })).data;
  const binding = { subjectKind: 'identity', subjectId: principalId, roleId: role.id, resourceKind: 'agent', resourceId: agentId };
  const bindings = (await api('GET', paths.bindings(ns))).data || [];
  const existing = bindings.find((b) => ['subjectId', 'roleId', 'resourceKind', 'resourceId'].every((k) => b[k] === binding[k]));
  if (existing) {
    await api('PATCH', paths.runtimeRole(ns, existing.id), { runtimeRole });
  } else {
    await api('POST', paths.bindings(ns), { ...binding, runtimeRole });
  }
}
