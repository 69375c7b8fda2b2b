// The Access page's pure parts (crates/occ-api/console/assets/access.js): which bindings it
// shows as Roles on the whole Namespace, and the order it offers Roles in.
import test from 'node:test';
import assert from 'node:assert/strict';
import { namespaceWide, orderRoles } from '../../crates/occ-api/console/assets/access.js';

test('only bindings naming no resource are on the whole Namespace', () => {
  const bindings = [
    { id: 'b1', subjectId: 'spn_1', roleId: 'r1' },
    { id: 'b2', subjectId: 'spn_1', roleId: 'r1', resourceKind: 'agent', resourceId: 'agt_1' },
  ];
  assert.deepEqual(namespaceWide(bindings).map((b) => b.id), ['b1']);
});

test('the built-in Roles come first, least powerful first, then the others by name', () => {
  const roles = [
    { id: 'r_z', name: 'zeta' }, { id: 'r_admin', name: 'admin' }, { id: 'r_x' },
    { id: 'r_viewer', name: 'viewer' }, { id: 'r_a', name: 'alpha' }, { id: 'r_op', name: 'operator' },
  ];
  assert.deepEqual(orderRoles(roles).map((r) => r.id), ['r_viewer', 'r_op', 'r_admin', 'r_a', 'r_x', 'r_z']);
});
