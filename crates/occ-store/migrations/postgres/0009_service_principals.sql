-- Non-Agent service principals as automation manages them (an occ extension; the reference leaves
-- creating them to its IAM authority): a name for people to find them by, unique in the
-- Installation, and whether an administrator disabled them. A disabled principal's keys stop
-- authenticating and its queued work stops being authorized at once; deleting its identity
-- deletes this row, its keys and its bindings. Rows of principals made before this table (an
-- older bootstrap's administrator) have no name.
CREATE TABLE occ.service_principals (
  id text PRIMARY KEY REFERENCES occ.iam_identities (id) ON UPDATE RESTRICT ON DELETE CASCADE,
  name text UNIQUE CHECK (name IS NULL OR (char_length(name) BETWEEN 1 AND 64
    AND name ~ '^[^[:space:][:cntrl:]]([^[:cntrl:]]*[^[:space:][:cntrl:]])?$')),
  disabled_at timestamptz,
  created_at timestamptz NOT NULL
);
INSERT INTO occ.service_principals (id, name, disabled_at, created_at)
  SELECT id, NULL, NULL, created_at FROM occ.iam_identities
  WHERE kind = 'service_principal' AND agent_id IS NULL;

-- Every Namespace comes with three built-in Roles (viewer, operator, admin) with fixed ids
-- `role_<name>_<namespace uuid>`, which people bind on the whole Namespace to give access in
-- one step; Namespaces created from now on get them in the same transaction. The permissions
-- match occ_core::iam::BuiltinRole (a test in occ-store compares them).
INSERT INTO occ.iam_roles (id, namespace_id, name, permissions, created_at)
  SELECT 'role_viewer_' || substr(id, 4), id, 'viewer',
    '[{"action":"read","resourceKind":"namespace"},{"action":"read","resourceKind":"agent"},{"action":"read","resourceKind":"agent_revision"},{"action":"read","resourceKind":"configuration"},{"action":"read","resourceKind":"secret"},{"action":"read","resourceKind":"service_account"},{"action":"read","resourceKind":"preset"},{"action":"read","resourceKind":"credential_source"}]'::jsonb,
    date_trunc('milliseconds', clock_timestamp())
  FROM occ.namespaces WHERE deleted_at IS NULL
  ON CONFLICT (id) DO NOTHING;
INSERT INTO occ.iam_roles (id, namespace_id, name, permissions, created_at)
  SELECT 'role_operator_' || substr(id, 4), id, 'operator',
    '[{"action":"read","resourceKind":"namespace"},{"action":"read","resourceKind":"agent"},{"action":"read","resourceKind":"agent_revision"},{"action":"read","resourceKind":"configuration"},{"action":"read","resourceKind":"secret"},{"action":"read","resourceKind":"service_account"},{"action":"read","resourceKind":"preset"},{"action":"read","resourceKind":"credential_source"},{"action":"deploy","resourceKind":"agent"},{"action":"operate","resourceKind":"agent"},{"action":"read_logs","resourceKind":"agent"},{"action":"operate","resourceKind":"secret"},{"action":"operate","resourceKind":"credential_source"}]'::jsonb,
    date_trunc('milliseconds', clock_timestamp())
  FROM occ.namespaces WHERE deleted_at IS NULL
  ON CONFLICT (id) DO NOTHING;
INSERT INTO occ.iam_roles (id, namespace_id, name, permissions, created_at)
  SELECT 'role_admin_' || substr(id, 4), id, 'admin',
    '[{"action":"read","resourceKind":"namespace"},{"action":"read","resourceKind":"agent"},{"action":"read","resourceKind":"agent_revision"},{"action":"read","resourceKind":"configuration"},{"action":"read","resourceKind":"secret"},{"action":"read","resourceKind":"service_account"},{"action":"read","resourceKind":"preset"},{"action":"read","resourceKind":"credential_source"},{"action":"deploy","resourceKind":"agent"},{"action":"operate","resourceKind":"agent"},{"action":"read_logs","resourceKind":"agent"},{"action":"operate","resourceKind":"secret"},{"action":"operate","resourceKind":"credential_source"},{"action":"administer","resourceKind":"agent"},{"action":"create","resourceKind":"agent"},{"action":"update","resourceKind":"agent"},{"action":"delete","resourceKind":"agent"},{"action":"create","resourceKind":"configuration"},{"action":"update","resourceKind":"configuration"},{"action":"delete","resourceKind":"configuration"},{"action":"create","resourceKind":"secret"},{"action":"update","resourceKind":"secret"},{"action":"delete","resourceKind":"secret"},{"action":"create","resourceKind":"service_account"},{"action":"update","resourceKind":"service_account"},{"action":"delete","resourceKind":"service_account"},{"action":"create","resourceKind":"preset"},{"action":"update","resourceKind":"preset"},{"action":"delete","resourceKind":"preset"},{"action":"create","resourceKind":"credential_source"},{"action":"update","resourceKind":"credential_source"},{"action":"delete","resourceKind":"credential_source"}]'::jsonb,
    date_trunc('milliseconds', clock_timestamp())
  FROM occ.namespaces WHERE deleted_at IS NULL
  ON CONFLICT (id) DO NOTHING;
