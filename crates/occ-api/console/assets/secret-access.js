// Letting an Agent's own identity use a Secret: the one grant a deploy needs for each Secret its
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
