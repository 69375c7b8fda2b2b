-- occ platform state, PostgreSQL dialect. Everything lives in schema "occ".
-- The database enforces what must never be violated, whatever the application does:
-- supported kinds, generation bounds, id formats, composite (namespace_id, id) ownership,
-- revision immutability, the Namespace lifecycle, workspace setup completion, append-only
-- audit, and at most one live work claim per Agent or Namespace lane.

CREATE SCHEMA IF NOT EXISTS occ;
SET LOCAL search_path = occ, pg_catalog;

-- Constraints are written inline rather than through SQL helper functions: PostgreSQL re-parses
-- an SQL function used in a CHECK on every statement, which dominated write cost.

-- Any UPDATE or DELETE on a protected table fails.
CREATE FUNCTION occ.reject_row_mutation() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, occ AS $$
BEGIN
  RAISE EXCEPTION USING
    ERRCODE = 'check_violation',
    CONSTRAINT = TG_ARGV[0],
    MESSAGE = format('%s: %s', TG_ARGV[0],
      COALESCE(TG_ARGV[1], format('rows of %s are immutable', TG_TABLE_NAME)));
END $$;

-- The admitted snapshot: exactly the required keys, optionally the optional ones, right types.

-- Staged workspace files: a non-empty object of the four names, each a string of at most 16 KiB.
-- (plpgsql: compiled once per session, unlike an SQL function, which a CHECK re-parses per statement)
CREATE FUNCTION occ.workspace_files_are_valid(files jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  RETURN COALESCE(jsonb_typeof(files) = 'object' AND files <> '{}'::jsonb
     AND (files - ARRAY['AGENTS.md', 'SOUL.md', 'IDENTITY.md', 'USER.md']) = '{}'::jsonb
     AND NOT EXISTS (SELECT 1 FROM jsonb_each(files) AS e
                     WHERE jsonb_typeof(e.value) <> 'string' OR octet_length(e.value #>> '{}') > 16384), false);
END $$;

-- Installation: exactly one row.
CREATE TABLE occ.installation (
  id text PRIMARY KEY CHECK (id ~ '^ins_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'),
  name text NOT NULL COLLATE "C" CHECK ((char_length(name) <= 200 AND name ~ '^[^[:space:][:cntrl:]]([^[:cntrl:]]*[^[:space:][:cntrl:]])?$')),
  created_at timestamptz NOT NULL
);
CREATE UNIQUE INDEX installation_singleton ON occ.installation ((true));

-- Namespaces.
CREATE TABLE occ.namespaces (
  id text PRIMARY KEY CHECK (id ~ '^ns_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'),
  name text NOT NULL COLLATE "C" UNIQUE CHECK ((char_length(name) <= 200 AND name ~ '^[^[:space:][:cntrl:]]([^[:cntrl:]]*[^[:space:][:cntrl:]])?$')),
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
  id text PRIMARY KEY CHECK (id ~ '^cfg_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'),
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
  id text PRIMARY KEY CHECK (id ~ '^sec_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'),
  namespace_id text NOT NULL REFERENCES occ.namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  name text NOT NULL COLLATE "C" CHECK ((char_length(name) <= 200 AND name ~ '^[^[:space:][:cntrl:]]([^[:cntrl:]]*[^[:space:][:cntrl:]])?$')),
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
  id text PRIMARY KEY CHECK (id ~ '^sa_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'),
  namespace_id text NOT NULL REFERENCES occ.namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  name text NOT NULL COLLATE "C" CHECK ((char_length(name) <= 200 AND name ~ '^[^[:space:][:cntrl:]]([^[:cntrl:]]*[^[:space:][:cntrl:]])?$')),
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
  id text PRIMARY KEY CHECK ((char_length(id) BETWEEN 1 AND 200 AND id !~ '[[:space:][:cntrl:]]')),
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
  id text PRIMARY KEY CHECK (id ~ '^agt_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'),
  namespace_id text NOT NULL REFERENCES occ.namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  name text NOT NULL COLLATE "C" CHECK ((char_length(name) <= 200 AND name ~ '^[^[:space:][:cntrl:]]([^[:cntrl:]]*[^[:space:][:cntrl:]])?$')),
  configuration_id text NOT NULL,
  backend_id text CHECK (backend_id IS NULL OR (char_length(backend_id) <= 200 AND backend_id ~ '^[^[:space:][:cntrl:]]([^[:cntrl:]]*[^[:space:][:cntrl:]])?$')),
  execution_mode text NOT NULL DEFAULT 'embedded' CHECK (execution_mode IN ('embedded', 'dedicated')),
  service_principal_id text NOT NULL,
  harness_auth jsonb,
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

-- Harness auth: a known method, and the generated-style reference columns (which carry the
-- foreign keys to Secrets and ServiceAccounts) agree with the JSON.
CREATE FUNCTION occ.check_agent_harness_auth() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, occ AS $$
BEGIN
  IF NOT (NEW.harness_auth IS NULL OR COALESCE(jsonb_typeof(NEW.harness_auth) = 'object'
    AND NEW.harness_auth->>'method' IN ('runtime', 'api_key', 'chatgpt_service_account'), false)) THEN
    RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'agents_harness_auth_check',
      MESSAGE = 'agents_harness_auth_check: unknown harness auth method';
  END IF;
  IF NOT COALESCE(
    NEW.harness_auth_secret_id IS NOT DISTINCT FROM (CASE WHEN NEW.harness_auth->>'method' = 'api_key'
      AND NEW.harness_auth->'source'->>'namespaceId' = NEW.namespace_id THEN NEW.harness_auth->'source'->>'id' END)
    AND NEW.harness_auth_service_account_id IS NOT DISTINCT FROM (CASE WHEN NEW.harness_auth->>'method' =
      'chatgpt_service_account' THEN NEW.harness_auth->>'serviceAccountId' END)
    AND (NEW.harness_auth->>'method' IS DISTINCT FROM 'api_key' OR NEW.harness_auth_secret_id IS NOT NULL), false) THEN
    RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'agents_harness_auth_references',
      MESSAGE = 'agents_harness_auth_references: reference columns disagree with harness_auth';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER agents_harness_auth_references
  BEFORE INSERT OR UPDATE OF harness_auth, harness_auth_secret_id, harness_auth_service_account_id, namespace_id
  ON occ.agents FOR EACH ROW EXECUTE FUNCTION occ.check_agent_harness_auth();

-- Guards on Agents; WHEN clauses keep the common UPDATE free of trigger calls.
CREATE TRIGGER agent_identity_is_immutable
  BEFORE UPDATE ON occ.agents FOR EACH ROW
  WHEN (NEW.id IS DISTINCT FROM OLD.id OR NEW.namespace_id IS DISTINCT FROM OLD.namespace_id
     OR NEW.service_principal_id IS DISTINCT FROM OLD.service_principal_id
     OR NEW.created_at IS DISTINCT FROM OLD.created_at)
  EXECUTE FUNCTION occ.reject_row_mutation('agent_identity_is_immutable',
    'id, namespace, service principal and creation time never change');
CREATE TRIGGER agent_deletion_is_final
  BEFORE UPDATE OF status ON occ.agents FOR EACH ROW
  WHEN (OLD.status = 'deleting' AND NEW.status <> 'deleting')
  EXECUTE FUNCTION occ.reject_row_mutation('agent_deletion_is_final',
    'a deleting Agent cannot become active again');
CREATE TRIGGER agent_deletion_requires_deleting
  BEFORE DELETE ON occ.agents FOR EACH ROW
  WHEN (OLD.status <> 'deleting')
  EXECUTE FUNCTION occ.reject_row_mutation('agent_deletion_requires_deleting',
    'only a deleting Agent can be removed');

-- Immutable AgentRevisions.
CREATE TABLE occ.agent_revisions (
  id text PRIMARY KEY CHECK (id ~ '^rev_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'),
  namespace_id text NOT NULL,
  agent_id text NOT NULL,
  revision_number bigint NOT NULL CHECK (revision_number BETWEEN 1 AND 9007199254740991),
  backend_id text CHECK (backend_id IS NULL OR (char_length(backend_id) <= 200 AND backend_id ~ '^[^[:space:][:cntrl:]]([^[:cntrl:]]*[^[:space:][:cntrl:]])?$')),
  admitted_spec jsonb NOT NULL,
  admitted_at timestamptz NOT NULL,
  UNIQUE (namespace_id, agent_id, id),
  UNIQUE (namespace_id, agent_id, revision_number),
  FOREIGN KEY (namespace_id, agent_id) REFERENCES occ.agents (namespace_id, id)
    ON UPDATE RESTRICT ON DELETE CASCADE
);
-- The admitted snapshot: exactly the required keys, optionally the optional ones, right types.
-- A plpgsql trigger rather than a CHECK: PostgreSQL re-reads a CHECK expression tree on every
-- statement, which for an expression this size dominated the cost of an admission.
CREATE FUNCTION occ.check_admitted_spec() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, occ AS $$
BEGIN
  IF NOT COALESCE(jsonb_typeof(NEW.admitted_spec) = 'object'
     AND NEW.admitted_spec ?& ARRAY['configuration_id', 'configuration_kind', 'configuration_generation',
                       'configuration', 'harness', 'compute', 'service_principal_id', 'harness_auth']
     AND (NEW.admitted_spec - ARRAY['configuration_id', 'configuration_kind', 'configuration_generation',
                       'configuration', 'harness', 'compute', 'service_principal_id', 'harness_auth',
                       'secret_driver_id', 'secret_bindings']) = '{}'::jsonb
     AND jsonb_typeof(NEW.admitted_spec->'configuration_id') = 'string'
     AND NEW.admitted_spec->>'configuration_id' ~ '^cfg_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'
     AND NEW.admitted_spec->>'configuration_kind' = 'agent'
     AND jsonb_typeof(NEW.admitted_spec->'configuration_generation') = 'number'
     AND (NEW.admitted_spec->>'configuration_generation')::numeric BETWEEN 1 AND 9007199254740991
     AND jsonb_typeof(NEW.admitted_spec->'configuration') = 'object'
     AND jsonb_typeof(NEW.admitted_spec->'harness') = 'object'
     AND jsonb_typeof(NEW.admitted_spec->'harness'->'id') = 'string'
     AND jsonb_typeof(NEW.admitted_spec->'harness'->'version') = 'string'
     AND NEW.admitted_spec->'harness'->>'mode' IN ('embedded', 'dedicated')
     AND jsonb_typeof(NEW.admitted_spec->'compute') = 'object'
     AND jsonb_typeof(NEW.admitted_spec->'compute'->'id') = 'string'
     AND jsonb_typeof(NEW.admitted_spec->'compute'->'implementation') = 'string'
     AND jsonb_typeof(NEW.admitted_spec->'service_principal_id') = 'string'
     AND jsonb_typeof(NEW.admitted_spec->'harness_auth') IN ('object', 'null')
     AND (NOT NEW.admitted_spec ? 'secret_driver_id' OR jsonb_typeof(NEW.admitted_spec->'secret_driver_id') = 'string')
     AND (NOT NEW.admitted_spec ? 'secret_bindings' OR jsonb_typeof(NEW.admitted_spec->'secret_bindings') = 'object'), false) THEN
    RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'agent_revisions_admitted_spec_shape',
      MESSAGE = 'agent_revisions_admitted_spec_shape: the admitted snapshot has the wrong shape';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER agent_revisions_admitted_spec_shape
  BEFORE INSERT ON occ.agent_revisions
  FOR EACH ROW EXECUTE FUNCTION occ.check_admitted_spec();

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
  id text PRIMARY KEY CHECK ((char_length(id) BETWEEN 1 AND 200 AND id !~ '[[:space:][:cntrl:]]')),
  namespace_id text REFERENCES occ.namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  name text CHECK (name IS NULL OR (char_length(name) <= 200 AND name ~ '^[^[:space:][:cntrl:]]([^[:cntrl:]]*[^[:space:][:cntrl:]])?$')),
  permissions jsonb NOT NULL CHECK (jsonb_typeof(permissions) = 'array'
    AND jsonb_array_length(permissions) BETWEEN 1 AND 64),
  created_at timestamptz NOT NULL
);
CREATE TRIGGER iam_roles_are_immutable
  BEFORE UPDATE ON occ.iam_roles
  FOR EACH ROW EXECUTE FUNCTION occ.reject_row_mutation('iam_roles_are_immutable');

CREATE TABLE occ.iam_access_bindings (
  id text PRIMARY KEY CHECK ((char_length(id) BETWEEN 1 AND 200 AND id !~ '[[:space:][:cntrl:]]')),
  namespace_id text REFERENCES occ.namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  subject_id text NOT NULL REFERENCES occ.iam_identities (id) ON UPDATE RESTRICT ON DELETE CASCADE,
  role_id text NOT NULL REFERENCES occ.iam_roles (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  resource_kind text CHECK (resource_kind IN ('installation', 'namespace', 'configuration', 'preset',
    'service_account', 'secret', 'agent', 'agent_revision', 'credential_source')),
  resource_id text CHECK (resource_id IS NULL OR (char_length(resource_id) BETWEEN 1 AND 200 AND resource_id !~ '[[:space:][:cntrl:]]')),
  created_at timestamptz NOT NULL,
  CONSTRAINT iam_access_bindings_resource_pair CHECK ((resource_kind IS NULL) = (resource_id IS NULL))
);
CREATE INDEX iam_access_bindings_subject ON occ.iam_access_bindings (subject_id);
CREATE TRIGGER iam_access_bindings_are_immutable
  BEFORE UPDATE ON occ.iam_access_bindings
  FOR EACH ROW EXECUTE FUNCTION occ.reject_row_mutation('iam_access_bindings_are_immutable');

CREATE TABLE occ.iam_restrictions (
  id text PRIMARY KEY CHECK ((char_length(id) BETWEEN 1 AND 200 AND id !~ '[[:space:][:cntrl:]]')),
  namespace_id text REFERENCES occ.namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  action text NOT NULL CHECK (action IN ('create', 'read', 'update', 'delete', 'deploy', 'operate',
    'administer', 'read_logs', 'use')),
  resource_kind text NOT NULL CHECK (resource_kind IN ('installation', 'namespace', 'configuration',
    'preset', 'service_account', 'secret', 'agent', 'agent_revision', 'credential_source')),
  resource_id text CHECK (resource_id IS NULL OR (char_length(resource_id) BETWEEN 1 AND 200 AND resource_id !~ '[[:space:][:cntrl:]]')),
  effect text NOT NULL DEFAULT 'deny' CHECK (effect = 'deny'),
  created_at timestamptz NOT NULL
);

-- Human accounts, sessions and service keys. Secrets are stored only as hashes.
CREATE TABLE occ.users (
  id text PRIMARY KEY CHECK ((char_length(id) BETWEEN 1 AND 200 AND id !~ '[[:space:][:cntrl:]]')),
  email text NOT NULL UNIQUE CHECK (char_length(email) BETWEEN 3 AND 320 AND email = lower(email)),
  name text NOT NULL CHECK ((char_length(name) <= 200 AND name ~ '^[^[:space:][:cntrl:]]([^[:cntrl:]]*[^[:space:][:cntrl:]])?$')),
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
  id text PRIMARY KEY CHECK ((char_length(id) BETWEEN 1 AND 200 AND id !~ '[[:space:][:cntrl:]]')),
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
  actor_id text NOT NULL CHECK ((char_length(actor_id) BETWEEN 1 AND 200 AND actor_id !~ '[[:space:][:cntrl:]]')),
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
  CONSTRAINT controller_work_claim_state CHECK (
    (state = 'claimed') = (claim_token IS NOT NULL) AND (state = 'claimed') = (lease_expires_at IS NOT NULL)),
  CONSTRAINT controller_work_completion_state CHECK (
    (state IN ('succeeded', 'failed_permanent')) = (completed_at IS NOT NULL)
    AND (state IN ('succeeded', 'failed_permanent')) = (reason_code IS NOT NULL)
    AND (result_data IS NULL OR state IN ('succeeded', 'failed_permanent'))),
  FOREIGN KEY (namespace_id, agent_id) REFERENCES occ.agents (namespace_id, id),
  FOREIGN KEY (namespace_id, agent_id, revision_id) REFERENCES occ.agent_revisions (namespace_id, agent_id, id)
);
CREATE INDEX controller_work_ready ON occ.controller_work (available_at, created_at, idempotency_key)
  WHERE state = 'queued';
CREATE INDEX controller_work_expired ON occ.controller_work (lease_expires_at, idempotency_key)
  WHERE state = 'claimed';
CREATE UNIQUE INDEX controller_work_one_claim_per_resource
  ON occ.controller_work ((COALESCE(agent_id, namespace_id))) WHERE state = 'claimed';
CREATE INDEX controller_work_agent ON occ.controller_work (agent_id) WHERE agent_id IS NOT NULL;

-- The work shapes and their exact idempotency-key formats (checked once at insert; the identity
-- columns never change afterwards).
CREATE FUNCTION occ.check_controller_work_shape() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, occ AS $$
BEGIN
  IF NOT COALESCE(
    (NEW.agent_id IS NULL AND NEW.revision_id IS NULL AND NEW.namespace_target IS NOT NULL AND NEW.agent_target IS NULL
      AND NEW.idempotency_key = 'namespace:' || NEW.namespace_id || ':reconcile:' || NEW.namespace_target)
    OR (NEW.agent_id IS NOT NULL AND NEW.revision_id IS NULL AND NEW.namespace_target IS NULL AND NEW.agent_target IS NOT NULL
      AND ((NEW.agent_target = 'stopped' AND (char_length(NEW.idempotency_key) > char_length('agent:' || NEW.agent_id || ':reconcile:stopped:') AND left(NEW.idempotency_key, char_length('agent:' || NEW.agent_id || ':reconcile:stopped:')) = 'agent:' || NEW.agent_id || ':reconcile:stopped:'))
        OR (NEW.agent_target = 'deleted' AND NEW.idempotency_key = 'agent:' || NEW.agent_id || ':reconcile:deleted')))
    OR (NEW.agent_id IS NOT NULL AND NEW.revision_id IS NOT NULL AND NEW.namespace_target IS NULL AND NEW.agent_target IS NULL
      AND (NEW.idempotency_key = 'agent_revision:' || NEW.revision_id || ':reconcile'
        OR (char_length(NEW.idempotency_key) > char_length('agent_revision:' || NEW.revision_id || ':maintenance:') AND left(NEW.idempotency_key, char_length('agent_revision:' || NEW.revision_id || ':maintenance:')) = 'agent_revision:' || NEW.revision_id || ':maintenance:'))), false) THEN
    RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'controller_work_shape',
      MESSAGE = 'controller_work_shape: the work item shape or idempotency key is invalid';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER controller_work_shape
  BEFORE INSERT ON occ.controller_work
  FOR EACH ROW EXECUTE FUNCTION occ.check_controller_work_shape();

CREATE TRIGGER controller_work_identity_is_immutable
  BEFORE UPDATE OF idempotency_key, work_kind, namespace_id, agent_id, revision_id, actor_id,
    namespace_target, agent_target, created_at ON occ.controller_work
  FOR EACH ROW EXECUTE FUNCTION occ.reject_row_mutation('controller_work_identity_is_immutable');

-- Append-only audit ledger.
CREATE TABLE occ.audit_events (
  id text PRIMARY KEY CHECK (id ~ '^aud_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'),
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
