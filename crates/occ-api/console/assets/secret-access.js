// Grants the console makes in one step, each reusing an existing Role with exactly the wanted
// permissions and an existing identical binding, so they are idempotent; whether the caller may
// grant them is the API's to decide.

import { api, paths } from './api.js';

/** The Namespace Role with exactly `permissions` (created as `name` when there is none). */
async function roleWith(ns, permissions, name) {
  const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  const roles = (await api('GET', paths.roles(ns))).data || [];
  return roles.find((r) => same(r.permissions, permissions))
    || (await api('POST', paths.roles(ns), { name, permissions })).data;
}

/** `principalId`'s binding of `role` on the exact resource, if there is one, and its body. */
async function bindingOf(ns, principalId, role, resourceKind, resourceId) {
  const binding = { subjectKind: 'identity', subjectId: principalId, roleId: role.id, resourceKind, resourceId };
  const bindings = (await api('GET', paths.bindings(ns))).data || [];
  const existing = bindings.find((b) => ['subjectId', 'roleId', 'resourceKind', 'resourceId'].every((k) => b[k] === binding[k]));
  return { binding, existing };
}

/**
 * Lets an Agent's own identity use a Secret: the one grant a deploy needs for each Secret its
 * revision consumes (a Role with exactly `operate` on Secrets, bound to the Agent's service
 * principal on that Secret).
 */
export async function letAgentUseSecret(ns, principalId, secretId) {
  const role = await roleWith(ns, [{ action: 'operate', resourceKind: 'secret' }], 'secret-user');
  const { binding, existing } = await bindingOf(ns, principalId, role, 'secret', secretId);
  if (!existing) await api('POST', paths.bindings(ns), binding);
}

/**
 * Assigns a person a runtime role on one Agent (what opening its native Control UI needs): their
 * binding of a Role with exactly `use` on Agents on that Agent, carrying `runtimeRole`. An
 * existing such binding gets the role (PATCH …/runtime-role); otherwise one is created with it.
 */
export async function assignRuntimeRole(ns, principalId, agentId, runtimeRole) {
  const role = await roleWith(ns, [{ action: 'use', resourceKind: 'agent' }], 'agent-user');
  const { binding, existing } = await bindingOf(ns, principalId, role, 'agent', agentId);
  if (existing) {
    await api('PATCH', paths.runtimeRole(ns, existing.id), { runtimeRole });
  } else {
    await api('POST', paths.bindings(ns), { ...binding, runtimeRole });
  }
}
