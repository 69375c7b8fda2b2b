-- occ platform state, PostgreSQL dialect. Everything lives in schema "occ".
-- The database enforces what must never be violated, whatever the application does:
-- supported kinds, generation bounds, id formats, composite (namespace_id, id) ownership,
-- revision immutability, the Namespace lifecycle, workspace setup completion, append-only
-- audit, and at most one live work claim per Agent or Namespace lane.

CREATE SCHEMA IF NOT EXISTS occ;
SET LOCAL search_path = occ, pg_catalog;

-- Any UPDATE or DELETE on a protected table fails.
CREATE FUNCTION occ.reject_row_mutation() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, occ AS $$
BEGIN
  RAISE EXCEPTION USING
    ERRCODE = 'check_violation',
    CONSTRAINT = TG_ARGV[0],
    MESSAGE = format('%s: rows of %s are immutable', TG_ARGV[0], TG_TABLE_NAME);
END $$;

CREATE FUNCTION occ.is_prefixed_uuid(value text, prefix text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT value ~ ('^' || prefix || '_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$')
$$;

CREATE FUNCTION occ.is_name(value text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT char_length(value) BETWEEN 1 AND 200
     AND value !~ '^[[:space:]]' AND value !~ '[[:space:]]$'
     AND value !~ '[[:cntrl:]]'
$$;

CREATE FUNCTION occ.has_proper_prefix(value text, prefix text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT char_length(value) > char_length(prefix) AND left(value, char_length(prefix)) = prefix
$$;

CREATE FUNCTION occ.is_iam_id(value text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT char_length(value) BETWEEN 1 AND 200 AND value !~ '[[:space:][:cntrl:]]'
$$;

-- The admitted snapshot: exactly the required keys, optionally the optional ones, right types.
CREATE FUNCTION occ.admitted_spec_is_valid(spec jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT COALESCE(jsonb_typeof(spec) = 'object'
     AND spec ?& ARRAY['configuration_id', 'configuration_kind', 'configuration_generation',
                       'configuration', 'harness', 'compute', 'service_principal_id', 'harness_auth']
     AND (spec - ARRAY['configuration_id', 'configuration_kind', 'configuration_generation',
                       'configuration', 'harness', 'compute', 'service_principal_id', 'harness_auth',
                       'secret_driver_id', 'secret_bindings']) = '{}'::jsonb
     AND jsonb_typeof(spec->'configuration_id') = 'string'
     AND occ.is_prefixed_uuid(spec->>'configuration_id', 'cfg')
     AND spec->>'configuration_kind' = 'agent'
     AND jsonb_typeof(spec->'configuration_generation') = 'number'
     AND (spec->>'configuration_generation')::numeric BETWEEN 1 AND 9007199254740991
     AND jsonb_typeof(spec->'configuration') = 'object'
     AND jsonb_typeof(spec->'harness') = 'object'
     AND jsonb_typeof(spec->'harness'->'id') = 'string'
     AND jsonb_typeof(spec->'harness'->'version') = 'string'
     AND spec->'harness'->>'mode' IN ('embedded', 'dedicated')
     AND jsonb_typeof(spec->'compute') = 'object'
     AND jsonb_typeof(spec->'compute'->'id') = 'string'
     AND jsonb_typeof(spec->'compute'->'implementation') = 'string'
     AND jsonb_typeof(spec->'service_principal_id') = 'string'
     AND jsonb_typeof(spec->'harness_auth') IN ('object', 'null')
     AND (NOT spec ? 'secret_driver_id' OR jsonb_typeof(spec->'secret_driver_id') = 'string')
     AND (NOT spec ? 'secret_bindings' OR jsonb_typeof(spec->'secret_bindings') = 'object'), false)
$$;

-- Staged workspace files: a non-empty object of the four names, each a string of at most 16 KiB.
CREATE FUNCTION occ.workspace_files_are_valid(files jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT COALESCE(jsonb_typeof(files) = 'object' AND files <> '{}'::jsonb
     AND (files - ARRAY['AGENTS.md', 'SOUL.md', 'IDENTITY.md', 'USER.md']) = '{}'::jsonb
     AND NOT EXISTS (SELECT 1 FROM jsonb_each(files) AS e
                     WHERE jsonb_typeof(e.value) <> 'string' OR octet_length(e.value #>> '{}') > 16384), false)
$$;

-- Installation: exactly one row.
CREATE TABLE occ.installation (
  id text PRIMARY KEY CHECK (occ.is_prefixed_uuid(id, 'ins')),
  name text NOT NULL COLLATE "C" CHECK (occ.is_name(name)),
  created_at timestamptz NOT NULL
);
CREATE UNIQUE INDEX installation_singleton ON occ.installation ((true));

-- Namespaces.
CREATE TABLE occ.namespaces (
  id text PRIMARY KEY CHECK (occ.is_prefixed_uuid(id, 'ns')),
  name text NOT NULL COLLATE "C" UNIQUE CHECK (occ.is_name(name)),
  existing_namespace text CHECK (existing_namespace ~ '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$'),
  status text NOT NULL DEFAULT 'provisioning'
    CHECK (status IN ('provisioning', 'ready', 'failed', 'deleting')),
  created_at timestamptz NOT NULL,
  deleted_at timestamptz,
  CONSTRAINT namespaces_tombstone_is_deleting
    CHECK (deleted_at IS NULL OR (status = 'deleting' AND deleted_at >= created_at))
);
CREATE UNIQUE INDEX namespaces_existing_namespace_live
  ON occ.namespaces (existing_namespace) WHERE existing_namespace IS NOT NULL AND deleted_at IS NULL;

CREATE FUNCTION occ.validate_namespace_lifecycle() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, occ AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'namespaces_are_tombstoned',
      MESSAGE = 'namespaces_are_tombstoned: a Namespace is tombstoned, never deleted';
  END IF;
  IF OLD.deleted_at IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'namespace_tombstone_is_final',
      MESSAGE = 'namespace_tombstone_is_final: a tombstoned Namespace is immutable';
  END IF;
  IF NEW.id <> OLD.id OR NEW.name <> OLD.name OR NEW.created_at <> OLD.created_at
     OR NEW.existing_namespace IS DISTINCT FROM OLD.existing_namespace THEN
    RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'namespace_identity_is_immutable',
      MESSAGE = 'namespace_identity_is_immutable: id, name, existing_namespace and created_at never change';
  END IF;
  IF NEW.status <> OLD.status AND NOT (
       (OLD.status = 'provisioning' AND NEW.status IN ('ready', 'failed', 'deleting'))
    OR (OLD.status IN ('ready', 'failed') AND NEW.status = 'deleting')) THEN
    RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'namespace_lifecycle',
      MESSAGE = format('namespace_lifecycle: %s -> %s is not an allowed transition', OLD.status, NEW.status);
  END IF;
  IF NEW.deleted_at IS NOT NULL AND (
       EXISTS (SELECT 1 FROM occ.agents WHERE namespace_id = NEW.id)
    OR EXISTS (SELECT 1 FROM occ.configurations WHERE namespace_id = NEW.id)
    OR EXISTS (SELECT 1 FROM occ.secrets WHERE namespace_id = NEW.id)
    OR EXISTS (SELECT 1 FROM occ.service_accounts WHERE namespace_id = NEW.id)) THEN
    RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'namespace_tombstone_requires_empty',
      MESSAGE = 'namespace_tombstone_requires_empty: the Namespace still holds resources';
  END IF;
  RETURN NEW;
END $$;

CREATE TRIGGER namespace_lifecycle
  BEFORE UPDATE OR DELETE ON occ.namespaces
  FOR EACH ROW EXECUTE FUNCTION occ.validate_namespace_lifecycle();

-- Configuration metadata. The document lives in the Configuration Driver.
CREATE TABLE occ.configurations (
  id text PRIMARY KEY CHECK (occ.is_prefixed_uuid(id, 'cfg')),
  namespace_id text NOT NULL REFERENCES occ.namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  kind text NOT NULL CHECK (kind = 'agent'),
  generation bigint NOT NULL CHECK (generation BETWEEN 1 AND 9007199254740991),
  secret_bindings jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(secret_bindings) = 'object'),
  created_at timestamptz NOT NULL,
  UNIQUE (namespace_id, id)
);
CREATE TRIGGER configuration_ownership_is_immutable
  BEFORE UPDATE OF id, namespace_id, kind, created_at ON occ.configurations
  FOR EACH ROW EXECUTE FUNCTION occ.reject_row_mutation('configuration_ownership_is_immutable');

-- Secret metadata. The value lives in the Secret Driver.
CREATE TABLE occ.secrets (
  id text PRIMARY KEY CHECK (occ.is_prefixed_uuid(id, 'sec')),
  namespace_id text NOT NULL REFERENCES occ.namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  name text NOT NULL COLLATE "C" CHECK (occ.is_name(name)),
  driver_id text NOT NULL CHECK (char_length(driver_id) BETWEEN 1 AND 200),
  locator text NOT NULL CHECK (char_length(locator) BETWEEN 1 AND 1024),
  created_at timestamptz NOT NULL,
  UNIQUE (namespace_id, id),
  UNIQUE (namespace_id, name)
);
CREATE TRIGGER secret_identity_is_immutable
  BEFORE UPDATE OF id, namespace_id, name, driver_id, created_at ON occ.secrets
  FOR EACH ROW EXECUTE FUNCTION occ.reject_row_mutation('secret_identity_is_immutable');

CREATE TABLE occ.service_accounts (
  id text PRIMARY KEY CHECK (occ.is_prefixed_uuid(id, 'sa')),
  namespace_id text NOT NULL REFERENCES occ.namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  name text NOT NULL COLLATE "C" CHECK (occ.is_name(name)),
  credential_kind text CHECK (credential_kind IN ('api_key', 'access_token', 'oauth_access_token')),
  created_at timestamptz NOT NULL,
  UNIQUE (namespace_id, id),
  UNIQUE (namespace_id, name)
);
CREATE TRIGGER service_account_identity_is_immutable
  BEFORE UPDATE OF id, namespace_id, created_at ON occ.service_accounts
  FOR EACH ROW EXECUTE FUNCTION occ.reject_row_mutation('service_account_identity_is_immutable');

-- IAM identities: humans (principal) and service principals (possibly Agent-owned).
CREATE TABLE occ.iam_identities (
  id text PRIMARY KEY CHECK (occ.is_iam_id(id)),
  kind text NOT NULL CHECK (kind IN ('principal', 'service_principal')),
  namespace_id text REFERENCES occ.namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  agent_id text,
  issuer text,
  subject text,
  created_at timestamptz NOT NULL,
  CONSTRAINT iam_identity_kind_shape CHECK (
    (kind = 'principal' AND namespace_id IS NULL AND agent_id IS NULL
       AND issuer IS NOT NULL AND subject IS NOT NULL)
    OR (kind = 'service_principal' AND (agent_id IS NULL OR
       (namespace_id IS NOT NULL AND id = 'service-agent-' || agent_id)))),
  UNIQUE (namespace_id, agent_id, id)
);
CREATE UNIQUE INDEX iam_principal_external_identity ON occ.iam_identities (issuer, subject)
  WHERE kind = 'principal';
CREATE UNIQUE INDEX iam_one_service_principal_per_agent ON occ.iam_identities (agent_id)
  WHERE agent_id IS NOT NULL;
CREATE TRIGGER iam_identity_is_immutable
  BEFORE UPDATE ON occ.iam_identities
  FOR EACH ROW EXECUTE FUNCTION occ.reject_row_mutation('iam_identity_is_immutable');

-- Agents (the editable draft).
CREATE TABLE occ.agents (
  id text PRIMARY KEY CHECK (occ.is_prefixed_uuid(id, 'agt')),
  namespace_id text NOT NULL REFERENCES occ.namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  name text NOT NULL COLLATE "C" CHECK (occ.is_name(name)),
  configuration_id text NOT NULL,
  backend_id text CHECK (backend_id IS NULL OR occ.is_name(backend_id)),
  execution_mode text NOT NULL DEFAULT 'embedded' CHECK (execution_mode IN ('embedded', 'dedicated')),
  service_principal_id text NOT NULL,
  harness_auth jsonb CHECK (harness_auth IS NULL OR COALESCE(jsonb_typeof(harness_auth) = 'object'
    AND harness_auth->>'method' IN ('runtime', 'api_key', 'chatgpt_service_account'), false)),
  harness_auth_secret_id text,
  harness_auth_service_account_id text,
  active_revision_id text,
  desired_runtime_state text NOT NULL DEFAULT 'stopped' CHECK (desired_runtime_state IN ('running', 'stopped')),
  status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'deleting')),
  created_at timestamptz NOT NULL,
  UNIQUE (namespace_id, id),
  UNIQUE (namespace_id, name),
  UNIQUE (namespace_id, id, service_principal_id),
  CONSTRAINT agents_deleting_is_stopped CHECK (status <> 'deleting' OR desired_runtime_state = 'stopped'),
  CONSTRAINT agents_service_principal_is_own CHECK (service_principal_id = 'service-agent-' || id),
  CONSTRAINT agents_harness_auth_references CHECK (
    harness_auth_secret_id IS NOT DISTINCT FROM (CASE WHEN harness_auth->>'method' = 'api_key'
      AND harness_auth->'source'->>'namespaceId' = namespace_id THEN harness_auth->'source'->>'id' END)
    AND harness_auth_service_account_id IS NOT DISTINCT FROM (CASE WHEN harness_auth->>'method' =
      'chatgpt_service_account' THEN harness_auth->>'serviceAccountId' END)
    AND (harness_auth->>'method' IS DISTINCT FROM 'api_key' OR harness_auth_secret_id IS NOT NULL)),
  FOREIGN KEY (namespace_id, configuration_id) REFERENCES occ.configurations (namespace_id, id)
    ON UPDATE RESTRICT ON DELETE RESTRICT,
  FOREIGN KEY (namespace_id, harness_auth_secret_id) REFERENCES occ.secrets (namespace_id, id)
    ON UPDATE RESTRICT ON DELETE RESTRICT,
  FOREIGN KEY (namespace_id, harness_auth_service_account_id) REFERENCES occ.service_accounts (namespace_id, id)
    ON UPDATE RESTRICT ON DELETE RESTRICT,
  FOREIGN KEY (namespace_id, id, service_principal_id)
    REFERENCES occ.iam_identities (namespace_id, agent_id, id)
    DEFERRABLE INITIALLY DEFERRED
);
ALTER TABLE occ.iam_identities ADD CONSTRAINT iam_identities_agent_fk
  FOREIGN KEY (namespace_id, agent_id) REFERENCES occ.agents (namespace_id, id)
  DEFERRABLE INITIALLY DEFERRED;

CREATE FUNCTION occ.validate_agent_change() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, occ AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    IF OLD.status <> 'deleting' THEN
      RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'agent_deletion_requires_deleting',
        MESSAGE = 'agent_deletion_requires_deleting: only a deleting Agent can be removed';
    END IF;
    RETURN OLD;
  END IF;
  IF NEW.id <> OLD.id OR NEW.namespace_id <> OLD.namespace_id
     OR NEW.service_principal_id <> OLD.service_principal_id OR NEW.created_at <> OLD.created_at THEN
    RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'agent_identity_is_immutable',
      MESSAGE = 'agent_identity_is_immutable: id, namespace, service principal and creation time never change';
  END IF;
  IF OLD.status = 'deleting' AND NEW.status <> 'deleting' THEN
    RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'agent_deletion_is_final',
      MESSAGE = 'agent_deletion_is_final: a deleting Agent cannot become active again';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER agent_changes_are_valid
  BEFORE UPDATE OR DELETE ON occ.agents
  FOR EACH ROW EXECUTE FUNCTION occ.validate_agent_change();

-- Immutable AgentRevisions.
CREATE TABLE occ.agent_revisions (
  id text PRIMARY KEY CHECK (occ.is_prefixed_uuid(id, 'rev')),
  namespace_id text NOT NULL,
  agent_id text NOT NULL,
  revision_number bigint NOT NULL CHECK (revision_number BETWEEN 1 AND 9007199254740991),
  backend_id text CHECK (backend_id IS NULL OR occ.is_name(backend_id)),
  admitted_spec jsonb NOT NULL CONSTRAINT agent_revisions_admitted_spec_shape
    CHECK (occ.admitted_spec_is_valid(admitted_spec)),
  admitted_at timestamptz NOT NULL,
  UNIQUE (namespace_id, agent_id, id),
  UNIQUE (namespace_id, agent_id, revision_number),
  FOREIGN KEY (namespace_id, agent_id) REFERENCES occ.agents (namespace_id, id)
    ON UPDATE RESTRICT ON DELETE CASCADE
);
CREATE TRIGGER agent_revisions_are_immutable
  BEFORE UPDATE ON occ.agent_revisions
  FOR EACH ROW EXECUTE FUNCTION occ.reject_row_mutation('agent_revisions_are_immutable');

-- A revision disappears only through the cascade of deleting its (deleting) Agent: by then the
-- Agent row is gone. A direct DELETE while the Agent exists is refused.
CREATE FUNCTION occ.guard_revision_deletion() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, occ AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM occ.agents WHERE namespace_id = OLD.namespace_id AND id = OLD.agent_id) THEN
    RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'agent_revisions_are_immutable',
      MESSAGE = 'agent_revisions_are_immutable: revisions are deleted only with their Agent';
  END IF;
  RETURN OLD;
END $$;
CREATE TRIGGER agent_revisions_are_deleted_with_agent
  BEFORE DELETE ON occ.agent_revisions
  FOR EACH ROW EXECUTE FUNCTION occ.guard_revision_deletion();

ALTER TABLE occ.agents ADD CONSTRAINT agents_active_revision_fk
  FOREIGN KEY (namespace_id, id, active_revision_id)
  REFERENCES occ.agent_revisions (namespace_id, agent_id, id)
  DEFERRABLE INITIALLY DEFERRED;

-- Private staging of initial workspace files.
CREATE TABLE occ.workspace_setups (
  id text PRIMARY KEY CHECK (char_length(id) BETWEEN 1 AND 200),
  namespace_id text NOT NULL,
  agent_id text NOT NULL,
  defaults_id text CHECK (defaults_id ~ '^[0-9a-f]{64}$'),
  files jsonb,
  completed boolean NOT NULL DEFAULT false,
  UNIQUE (namespace_id, agent_id),
  FOREIGN KEY (namespace_id, agent_id) REFERENCES occ.agents (namespace_id, id)
    ON UPDATE RESTRICT ON DELETE CASCADE,
  CONSTRAINT workspace_setups_completion CHECK (
    (completed AND files IS NULL)
    OR (NOT completed AND files IS NOT NULL AND occ.workspace_files_are_valid(files)))
);
CREATE TRIGGER workspace_setup_identity_is_immutable
  BEFORE UPDATE OF id, namespace_id, agent_id, defaults_id ON occ.workspace_setups
  FOR EACH ROW EXECUTE FUNCTION occ.reject_row_mutation('workspace_setup_identity_is_immutable');

-- IAM policy.
CREATE TABLE occ.iam_roles (
  id text PRIMARY KEY CHECK (occ.is_iam_id(id)),
  namespace_id text REFERENCES occ.namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  name text CHECK (name IS NULL OR occ.is_name(name)),
  permissions jsonb NOT NULL CHECK (jsonb_typeof(permissions) = 'array'
    AND jsonb_array_length(permissions) BETWEEN 1 AND 64),
  created_at timestamptz NOT NULL
);
CREATE TRIGGER iam_roles_are_immutable
  BEFORE UPDATE ON occ.iam_roles
  FOR EACH ROW EXECUTE FUNCTION occ.reject_row_mutation('iam_roles_are_immutable');

CREATE TABLE occ.iam_access_bindings (
  id text PRIMARY KEY CHECK (occ.is_iam_id(id)),
  namespace_id text REFERENCES occ.namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  subject_id text NOT NULL REFERENCES occ.iam_identities (id) ON UPDATE RESTRICT ON DELETE CASCADE,
  role_id text NOT NULL REFERENCES occ.iam_roles (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  resource_kind text CHECK (resource_kind IN ('installation', 'namespace', 'configuration', 'preset',
    'service_account', 'secret', 'agent', 'agent_revision', 'credential_source')),
  resource_id text CHECK (resource_id IS NULL OR occ.is_iam_id(resource_id)),
  created_at timestamptz NOT NULL,
  CONSTRAINT iam_access_bindings_resource_pair CHECK ((resource_kind IS NULL) = (resource_id IS NULL))
);
CREATE INDEX iam_access_bindings_subject ON occ.iam_access_bindings (subject_id);
CREATE TRIGGER iam_access_bindings_are_immutable
  BEFORE UPDATE ON occ.iam_access_bindings
  FOR EACH ROW EXECUTE FUNCTION occ.reject_row_mutation('iam_access_bindings_are_immutable');

CREATE TABLE occ.iam_restrictions (
  id text PRIMARY KEY CHECK (occ.is_iam_id(id)),
  namespace_id text REFERENCES occ.namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  action text NOT NULL CHECK (action IN ('create', 'read', 'update', 'delete', 'deploy', 'operate',
    'administer', 'read_logs', 'use')),
  resource_kind text NOT NULL CHECK (resource_kind IN ('installation', 'namespace', 'configuration',
    'preset', 'service_account', 'secret', 'agent', 'agent_revision', 'credential_source')),
  resource_id text CHECK (resource_id IS NULL OR occ.is_iam_id(resource_id)),
  effect text NOT NULL DEFAULT 'deny' CHECK (effect = 'deny'),
  created_at timestamptz NOT NULL
);

-- Human accounts, sessions and service keys. Secrets are stored only as hashes.
CREATE TABLE occ.users (
  id text PRIMARY KEY CHECK (occ.is_iam_id(id)),
  email text NOT NULL UNIQUE CHECK (char_length(email) BETWEEN 3 AND 320 AND email = lower(email)),
  name text NOT NULL CHECK (occ.is_name(name)),
  password_hash text NOT NULL CHECK (password_hash LIKE '$argon2%'),
  principal_id text NOT NULL UNIQUE REFERENCES occ.iam_identities (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  created_at timestamptz NOT NULL
);

CREATE TABLE occ.sessions (
  id text PRIMARY KEY CHECK (char_length(id) BETWEEN 1 AND 200),
  token_hash text NOT NULL UNIQUE CHECK (token_hash ~ '^[0-9a-f]{64}$'),
  user_id text NOT NULL REFERENCES occ.users (id) ON UPDATE RESTRICT ON DELETE CASCADE,
  expires_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL
);

CREATE TABLE occ.service_keys (
  id text PRIMARY KEY CHECK (occ.is_iam_id(id)),
  service_principal_id text NOT NULL REFERENCES occ.iam_identities (id) ON UPDATE RESTRICT ON DELETE CASCADE,
  namespace_id text REFERENCES occ.namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 32 AND btrim(name) <> ''),
  key_hash text NOT NULL UNIQUE CHECK (key_hash ~ '^[0-9a-f]{64}$'),
  expires_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL,
  CHECK (expires_at > created_at)
);
CREATE TRIGGER service_keys_are_immutable
  BEFORE UPDATE ON occ.service_keys
  FOR EACH ROW EXECUTE FUNCTION occ.reject_row_mutation('service_keys_are_immutable');

-- The durable work queue.
CREATE TABLE occ.controller_work (
  idempotency_key text PRIMARY KEY CHECK (char_length(idempotency_key) BETWEEN 1 AND 512),
  seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  work_kind text NOT NULL DEFAULT 'lifecycle' CHECK (work_kind = 'lifecycle'),
  namespace_id text NOT NULL REFERENCES occ.namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  agent_id text,
  revision_id text,
  actor_id text NOT NULL CHECK (occ.is_iam_id(actor_id)),
  namespace_target text CHECK (namespace_target IN ('ready', 'deleted')),
  agent_target text CHECK (agent_target IN ('stopped', 'deleted')),
  state text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'claimed', 'succeeded', 'failed_permanent')),
  available_at timestamptz NOT NULL,
  attempt_count bigint NOT NULL DEFAULT 0 CHECK (attempt_count >= 0),
  claim_token text CHECK (claim_token ~ '^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'),
  lease_expires_at timestamptz,
  completed_at timestamptz,
  reason_code text CHECK (reason_code ~ '^[A-Z0-9_]{1,64}$'),
  result_data jsonb CHECK (result_data IS NULL OR jsonb_typeof(result_data) = 'object'),
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  CONSTRAINT controller_work_shape CHECK (
    (agent_id IS NULL AND revision_id IS NULL AND namespace_target IS NOT NULL AND agent_target IS NULL
      AND idempotency_key = 'namespace:' || namespace_id || ':reconcile:' || namespace_target)
    OR (agent_id IS NOT NULL AND revision_id IS NULL AND namespace_target IS NULL AND agent_target IS NOT NULL
      AND ((agent_target = 'stopped' AND occ.has_proper_prefix(idempotency_key, 'agent:' || agent_id || ':reconcile:stopped:'))
        OR (agent_target = 'deleted' AND idempotency_key = 'agent:' || agent_id || ':reconcile:deleted')))
    OR (agent_id IS NOT NULL AND revision_id IS NOT NULL AND namespace_target IS NULL AND agent_target IS NULL
      AND (idempotency_key = 'agent_revision:' || revision_id || ':reconcile'
        OR occ.has_proper_prefix(idempotency_key, 'agent_revision:' || revision_id || ':maintenance:')))),
  CONSTRAINT controller_work_claim_state CHECK (
    (state = 'claimed') = (claim_token IS NOT NULL) AND (state = 'claimed') = (lease_expires_at IS NOT NULL)),
  CONSTRAINT controller_work_completion_state CHECK (
    (state IN ('succeeded', 'failed_permanent')) = (completed_at IS NOT NULL)
    AND (state IN ('succeeded', 'failed_permanent')) = (reason_code IS NOT NULL)
    AND (result_data IS NULL OR state IN ('succeeded', 'failed_permanent'))),
  FOREIGN KEY (namespace_id, agent_id) REFERENCES occ.agents (namespace_id, id)
    DEFERRABLE INITIALLY DEFERRED,
  FOREIGN KEY (namespace_id, agent_id, revision_id) REFERENCES occ.agent_revisions (namespace_id, agent_id, id)
    DEFERRABLE INITIALLY DEFERRED
);
CREATE INDEX controller_work_ready ON occ.controller_work (available_at, created_at, idempotency_key)
  WHERE state = 'queued';
CREATE INDEX controller_work_expired ON occ.controller_work (lease_expires_at, idempotency_key)
  WHERE state = 'claimed';
CREATE UNIQUE INDEX controller_work_one_claim_per_resource
  ON occ.controller_work ((COALESCE(agent_id, namespace_id))) WHERE state = 'claimed';
CREATE INDEX controller_work_agent ON occ.controller_work (agent_id) WHERE agent_id IS NOT NULL;

CREATE TRIGGER controller_work_identity_is_immutable
  BEFORE UPDATE OF idempotency_key, work_kind, namespace_id, agent_id, revision_id, actor_id,
    namespace_target, agent_target, created_at ON occ.controller_work
  FOR EACH ROW EXECUTE FUNCTION occ.reject_row_mutation('controller_work_identity_is_immutable');

-- Wake idle workers when work becomes available.
CREATE FUNCTION occ.notify_controller_work() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, occ AS $$
BEGIN
  PERFORM pg_notify('occ_controller_work', '');
  RETURN NULL;
END $$;
CREATE TRIGGER controller_work_notify
  AFTER INSERT OR UPDATE OF state ON occ.controller_work
  FOR EACH STATEMENT EXECUTE FUNCTION occ.notify_controller_work();

-- Append-only audit ledger.
CREATE TABLE occ.audit_events (
  id text PRIMARY KEY CHECK (occ.is_prefixed_uuid(id, 'aud')),
  occurred_at timestamptz NOT NULL,
  kind text NOT NULL CHECK (kind IN ('bootstrap', 'mutation', 'access', 'authorization_denial')),
  actor_id text NOT NULL CHECK (char_length(actor_id) BETWEEN 1 AND 200),
  action text NOT NULL CHECK (char_length(action) BETWEEN 1 AND 128),
  namespace_id text,
  resource_kind text NOT NULL CHECK (resource_kind IN ('installation', 'namespace', 'configuration',
    'preset', 'service_account', 'secret', 'agent', 'agent_revision', 'credential_source')),
  resource_id text NOT NULL CHECK (char_length(resource_id) BETWEEN 1 AND 512),
  outcome text NOT NULL CHECK (outcome IN ('success', 'denied', 'failure')),
  details jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(details) = 'object')
);
CREATE INDEX audit_events_work ON occ.audit_events ((details->>'workId'), occurred_at DESC, id DESC)
  WHERE (details->>'workId') IS NOT NULL;
CREATE INDEX audit_events_time ON occ.audit_events (occurred_at, id);
CREATE TRIGGER audit_events_are_append_only
  BEFORE UPDATE OR DELETE ON occ.audit_events
  FOR EACH ROW EXECUTE FUNCTION occ.reject_row_mutation('audit_events_are_append_only');
CREATE TRIGGER audit_events_are_never_truncated
  BEFORE TRUNCATE ON occ.audit_events
  FOR EACH STATEMENT EXECUTE FUNCTION occ.reject_row_mutation('audit_events_are_append_only');

-- The database clock, one expression for every statement that compares leases.
CREATE VIEW occ.clock AS SELECT clock_timestamp() AS now;
