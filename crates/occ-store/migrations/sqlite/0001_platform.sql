-- occ platform state, SQLite dialect (the embedded default). Same tables, columns and
-- invariants as the PostgreSQL schema; SQLite has no schemas, functions or regular expressions,
-- so id and name rules are GLOB patterns and guards are triggers. Tables are STRICT.
-- Timestamps are TEXT in the canonical form YYYY-MM-DDTHH:MM:SS.mmmZ, so text order is time order.

CREATE TABLE installation (
  id TEXT PRIMARY KEY NOT NULL CHECK (id GLOB 'ins_[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-4[0-9a-f][0-9a-f][0-9a-f]-[89ab][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
  name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 200 AND name NOT GLOB ('*[' || char(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,127) || ']*') AND name NOT GLOB ('[' || char(32,9,10,11,12,13) || ']*') AND name NOT GLOB ('*[' || char(32,9,10,11,12,13) || ']')),
  created_at TEXT NOT NULL CHECK (created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  singleton INTEGER NOT NULL DEFAULT 1 UNIQUE CHECK (singleton = 1)
) STRICT;

CREATE TABLE namespaces (
  id TEXT PRIMARY KEY NOT NULL CHECK (id GLOB 'ns_[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-4[0-9a-f][0-9a-f][0-9a-f]-[89ab][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
  name TEXT NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 200 AND name NOT GLOB ('*[' || char(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,127) || ']*') AND name NOT GLOB ('[' || char(32,9,10,11,12,13) || ']*') AND name NOT GLOB ('*[' || char(32,9,10,11,12,13) || ']')),
  existing_namespace TEXT CHECK (length(existing_namespace) BETWEEN 1 AND 63
    AND existing_namespace GLOB '[a-z0-9]*' AND existing_namespace GLOB '*[a-z0-9]'
    AND existing_namespace NOT GLOB '*[^-a-z0-9]*'),
  status TEXT NOT NULL DEFAULT 'provisioning' CHECK (status IN ('provisioning', 'ready', 'failed', 'deleting')),
  created_at TEXT NOT NULL CHECK (created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  deleted_at TEXT CHECK (deleted_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  CONSTRAINT namespaces_tombstone_is_deleting
    CHECK (deleted_at IS NULL OR (status = 'deleting' AND deleted_at >= created_at))
) STRICT;
CREATE UNIQUE INDEX namespaces_existing_namespace_live
  ON namespaces (existing_namespace) WHERE existing_namespace IS NOT NULL AND deleted_at IS NULL;

CREATE TRIGGER namespaces_are_tombstoned BEFORE DELETE ON namespaces
BEGIN SELECT RAISE(ABORT, 'namespaces_are_tombstoned: a Namespace is tombstoned, never deleted'); END;

CREATE TRIGGER namespace_lifecycle BEFORE UPDATE ON namespaces
BEGIN
  SELECT RAISE(ABORT, 'namespace_tombstone_is_final: a tombstoned Namespace is immutable') WHERE OLD.deleted_at IS NOT NULL;
  SELECT RAISE(ABORT, 'namespace_identity_is_immutable: id, name, existing_namespace and created_at never change')
    WHERE NEW.id IS NOT OLD.id OR NEW.name IS NOT OLD.name OR NEW.created_at IS NOT OLD.created_at
       OR NEW.existing_namespace IS NOT OLD.existing_namespace;
  SELECT RAISE(ABORT, 'namespace_lifecycle: not an allowed transition')
    WHERE NEW.status IS NOT OLD.status AND NOT (
         (OLD.status = 'provisioning' AND NEW.status IN ('ready', 'failed', 'deleting'))
      OR (OLD.status IN ('ready', 'failed') AND NEW.status = 'deleting'));
  SELECT RAISE(ABORT, 'namespace_tombstone_requires_empty: the Namespace still holds resources')
    WHERE NEW.deleted_at IS NOT NULL AND (
         EXISTS (SELECT 1 FROM agents WHERE namespace_id = NEW.id)
      OR EXISTS (SELECT 1 FROM configurations WHERE namespace_id = NEW.id)
      OR EXISTS (SELECT 1 FROM secrets WHERE namespace_id = NEW.id)
      OR EXISTS (SELECT 1 FROM service_accounts WHERE namespace_id = NEW.id));
END;

CREATE TABLE configurations (
  id TEXT PRIMARY KEY NOT NULL CHECK (id GLOB 'cfg_[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-4[0-9a-f][0-9a-f][0-9a-f]-[89ab][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
  namespace_id TEXT NOT NULL REFERENCES namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  kind TEXT NOT NULL CHECK (kind = 'agent'),
  generation INTEGER NOT NULL CHECK (generation BETWEEN 1 AND 9007199254740991),
  secret_bindings TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(secret_bindings) AND json_type(secret_bindings) = 'object'),
  created_at TEXT NOT NULL CHECK (created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  UNIQUE (namespace_id, id)
) STRICT;
CREATE TRIGGER configuration_ownership_is_immutable BEFORE UPDATE OF id, namespace_id, kind, created_at ON configurations WHEN NEW.id IS NOT OLD.id OR NEW.namespace_id IS NOT OLD.namespace_id OR NEW.kind IS NOT OLD.kind OR NEW.created_at IS NOT OLD.created_at
BEGIN SELECT RAISE(ABORT, 'configuration_ownership_is_immutable: id, namespace_id, kind, created_at never change'); END;

CREATE TABLE secrets (
  id TEXT PRIMARY KEY NOT NULL CHECK (id GLOB 'sec_[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-4[0-9a-f][0-9a-f][0-9a-f]-[89ab][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
  namespace_id TEXT NOT NULL REFERENCES namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 200 AND name NOT GLOB ('*[' || char(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,127) || ']*') AND name NOT GLOB ('[' || char(32,9,10,11,12,13) || ']*') AND name NOT GLOB ('*[' || char(32,9,10,11,12,13) || ']')),
  driver_id TEXT NOT NULL CHECK (length(driver_id) BETWEEN 1 AND 200),
  locator TEXT NOT NULL CHECK (length(locator) BETWEEN 1 AND 1024),
  created_at TEXT NOT NULL CHECK (created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  UNIQUE (namespace_id, id),
  UNIQUE (namespace_id, name)
) STRICT;
CREATE TRIGGER secret_identity_is_immutable BEFORE UPDATE OF id, namespace_id, name, driver_id, created_at ON secrets WHEN NEW.id IS NOT OLD.id OR NEW.namespace_id IS NOT OLD.namespace_id OR NEW.name IS NOT OLD.name OR NEW.driver_id IS NOT OLD.driver_id OR NEW.created_at IS NOT OLD.created_at
BEGIN SELECT RAISE(ABORT, 'secret_identity_is_immutable: id, namespace_id, name, driver_id, created_at never change'); END;

CREATE TABLE service_accounts (
  id TEXT PRIMARY KEY NOT NULL CHECK (id GLOB 'sa_[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-4[0-9a-f][0-9a-f][0-9a-f]-[89ab][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
  namespace_id TEXT NOT NULL REFERENCES namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 200 AND name NOT GLOB ('*[' || char(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,127) || ']*') AND name NOT GLOB ('[' || char(32,9,10,11,12,13) || ']*') AND name NOT GLOB ('*[' || char(32,9,10,11,12,13) || ']')),
  credential_kind TEXT CHECK (credential_kind IN ('api_key', 'access_token', 'oauth_access_token')),
  created_at TEXT NOT NULL CHECK (created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  UNIQUE (namespace_id, id),
  UNIQUE (namespace_id, name)
) STRICT;
CREATE TRIGGER service_account_identity_is_immutable BEFORE UPDATE OF id, namespace_id, created_at ON service_accounts WHEN NEW.id IS NOT OLD.id OR NEW.namespace_id IS NOT OLD.namespace_id OR NEW.created_at IS NOT OLD.created_at
BEGIN SELECT RAISE(ABORT, 'service_account_identity_is_immutable: id, namespace_id, created_at never change'); END;

CREATE TABLE iam_identities (
  id TEXT PRIMARY KEY NOT NULL CHECK (length(id) BETWEEN 1 AND 200 AND id NOT GLOB ('*[' || char(32,9,10,11,12,13) || char(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,127) || ']*')),
  kind TEXT NOT NULL CHECK (kind IN ('principal', 'service_principal')),
  namespace_id TEXT REFERENCES namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  agent_id TEXT,
  issuer TEXT,
  subject TEXT,
  created_at TEXT NOT NULL CHECK (created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  CONSTRAINT iam_identity_kind_shape CHECK (
    (kind = 'principal' AND namespace_id IS NULL AND agent_id IS NULL
       AND issuer IS NOT NULL AND subject IS NOT NULL)
    OR (kind = 'service_principal' AND (agent_id IS NULL OR
       (namespace_id IS NOT NULL AND id = 'service-agent-' || agent_id)))),
  UNIQUE (namespace_id, agent_id, id),
  FOREIGN KEY (namespace_id, agent_id) REFERENCES agents (namespace_id, id) DEFERRABLE INITIALLY DEFERRED
) STRICT;
CREATE UNIQUE INDEX iam_principal_external_identity ON iam_identities (issuer, subject) WHERE kind = 'principal';
CREATE UNIQUE INDEX iam_one_service_principal_per_agent ON iam_identities (agent_id) WHERE agent_id IS NOT NULL;
CREATE TRIGGER iam_identity_is_immutable BEFORE UPDATE ON iam_identities
BEGIN SELECT RAISE(ABORT, 'iam_identity_is_immutable: rows of iam_identities are immutable'); END;

CREATE TABLE agents (
  id TEXT PRIMARY KEY NOT NULL CHECK (id GLOB 'agt_[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-4[0-9a-f][0-9a-f][0-9a-f]-[89ab][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
  namespace_id TEXT NOT NULL REFERENCES namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 200 AND name NOT GLOB ('*[' || char(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,127) || ']*') AND name NOT GLOB ('[' || char(32,9,10,11,12,13) || ']*') AND name NOT GLOB ('*[' || char(32,9,10,11,12,13) || ']')),
  configuration_id TEXT NOT NULL,
  backend_id TEXT CHECK (length(backend_id) BETWEEN 1 AND 200 AND backend_id NOT GLOB ('*[' || char(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,127) || ']*') AND backend_id NOT GLOB ('[' || char(32,9,10,11,12,13) || ']*') AND backend_id NOT GLOB ('*[' || char(32,9,10,11,12,13) || ']')),
  execution_mode TEXT NOT NULL DEFAULT 'embedded' CHECK (execution_mode IN ('embedded', 'dedicated')),
  service_principal_id TEXT NOT NULL,
  harness_auth TEXT CHECK (harness_auth IS NULL OR COALESCE(json_valid(harness_auth) AND json_type(harness_auth) = 'object'
    AND json_extract(harness_auth, '$.method') IN ('runtime', 'api_key', 'chatgpt_service_account'), 0)),
  harness_auth_secret_id TEXT,
  harness_auth_service_account_id TEXT,
  active_revision_id TEXT,
  desired_runtime_state TEXT NOT NULL DEFAULT 'stopped' CHECK (desired_runtime_state IN ('running', 'stopped')),
  status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'deleting')),
  created_at TEXT NOT NULL CHECK (created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  UNIQUE (namespace_id, id),
  UNIQUE (namespace_id, name),
  UNIQUE (namespace_id, id, service_principal_id),
  CONSTRAINT agents_deleting_is_stopped CHECK (status <> 'deleting' OR desired_runtime_state = 'stopped'),
  CONSTRAINT agents_service_principal_is_own CHECK (service_principal_id = 'service-agent-' || id),
  CONSTRAINT agents_harness_auth_references CHECK (
    harness_auth_secret_id IS (CASE WHEN json_extract(harness_auth, '$.method') = 'api_key'
      AND json_extract(harness_auth, '$.source.namespaceId') = namespace_id
      THEN json_extract(harness_auth, '$.source.id') END)
    AND harness_auth_service_account_id IS (CASE WHEN json_extract(harness_auth, '$.method') =
      'chatgpt_service_account' THEN json_extract(harness_auth, '$.serviceAccountId') END)
    AND (json_extract(harness_auth, '$.method') IS NOT 'api_key' OR harness_auth_secret_id IS NOT NULL)),
  FOREIGN KEY (namespace_id, configuration_id) REFERENCES configurations (namespace_id, id)
    ON UPDATE RESTRICT ON DELETE RESTRICT,
  FOREIGN KEY (namespace_id, harness_auth_secret_id) REFERENCES secrets (namespace_id, id)
    ON UPDATE RESTRICT ON DELETE RESTRICT,
  FOREIGN KEY (namespace_id, harness_auth_service_account_id) REFERENCES service_accounts (namespace_id, id)
    ON UPDATE RESTRICT ON DELETE RESTRICT,
  FOREIGN KEY (namespace_id, id, service_principal_id) REFERENCES iam_identities (namespace_id, agent_id, id)
    DEFERRABLE INITIALLY DEFERRED,
  CONSTRAINT agents_active_revision_fk FOREIGN KEY (namespace_id, id, active_revision_id)
    REFERENCES agent_revisions (namespace_id, agent_id, id) DEFERRABLE INITIALLY DEFERRED
) STRICT;
CREATE TRIGGER agent_deletion_requires_deleting BEFORE DELETE ON agents WHEN OLD.status <> 'deleting'
BEGIN SELECT RAISE(ABORT, 'agent_deletion_requires_deleting: only a deleting Agent can be removed'); END;
CREATE TRIGGER agent_identity_is_immutable BEFORE UPDATE ON agents
  WHEN NEW.id IS NOT OLD.id OR NEW.namespace_id IS NOT OLD.namespace_id
    OR NEW.service_principal_id IS NOT OLD.service_principal_id OR NEW.created_at IS NOT OLD.created_at
BEGIN SELECT RAISE(ABORT, 'agent_identity_is_immutable: id, namespace, service principal and creation time never change'); END;
CREATE TRIGGER agent_deletion_is_final BEFORE UPDATE OF status ON agents
  WHEN OLD.status = 'deleting' AND NEW.status <> 'deleting'
BEGIN SELECT RAISE(ABORT, 'agent_deletion_is_final: a deleting Agent cannot become active again'); END;

CREATE TABLE agent_revisions (
  id TEXT PRIMARY KEY NOT NULL CHECK (id GLOB 'rev_[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-4[0-9a-f][0-9a-f][0-9a-f]-[89ab][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
  namespace_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  revision_number INTEGER NOT NULL CHECK (revision_number BETWEEN 1 AND 9007199254740991),
  backend_id TEXT CHECK (length(backend_id) BETWEEN 1 AND 200 AND backend_id NOT GLOB ('*[' || char(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,127) || ']*') AND backend_id NOT GLOB ('[' || char(32,9,10,11,12,13) || ']*') AND backend_id NOT GLOB ('*[' || char(32,9,10,11,12,13) || ']')),
  admitted_spec TEXT NOT NULL CONSTRAINT agent_revisions_admitted_spec_shape CHECK (COALESCE((json_valid(admitted_spec) AND json_type(admitted_spec) = 'object' AND json_remove(admitted_spec, '$.configuration_id', '$.configuration_kind', '$.configuration_generation', '$.configuration', '$.harness', '$.compute', '$.service_principal_id', '$.harness_auth', '$.secret_driver_id', '$.secret_bindings') = '{}' AND json_type(admitted_spec, '$.configuration_id') = 'text' AND json_extract(admitted_spec, '$.configuration_id') GLOB 'cfg_[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-4[0-9a-f][0-9a-f][0-9a-f]-[89ab][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]' AND json_extract(admitted_spec, '$.configuration_kind') = 'agent' AND json_type(admitted_spec, '$.configuration_kind') = 'text' AND json_type(admitted_spec, '$.configuration_generation') = 'integer' AND json_extract(admitted_spec, '$.configuration_generation') BETWEEN 1 AND 9007199254740991 AND json_type(admitted_spec, '$.configuration') = 'object' AND json_type(admitted_spec, '$.harness') = 'object' AND json_type(admitted_spec, '$.harness.id') = 'text' AND json_type(admitted_spec, '$.harness.version') = 'text' AND json_extract(admitted_spec, '$.harness.mode') IN ('embedded', 'dedicated') AND json_type(admitted_spec, '$.compute') = 'object' AND json_type(admitted_spec, '$.compute.id') = 'text' AND json_type(admitted_spec, '$.compute.implementation') = 'text' AND json_type(admitted_spec, '$.service_principal_id') = 'text' AND json_type(admitted_spec, '$.harness_auth') IN ('object', 'null') AND (json_type(admitted_spec, '$.secret_driver_id') IS NULL OR json_type(admitted_spec, '$.secret_driver_id') = 'text') AND (json_type(admitted_spec, '$.secret_bindings') IS NULL OR json_type(admitted_spec, '$.secret_bindings') = 'object')), 0)),
  admitted_at TEXT NOT NULL CHECK (admitted_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  UNIQUE (namespace_id, agent_id, id),
  UNIQUE (namespace_id, agent_id, revision_number),
  FOREIGN KEY (namespace_id, agent_id) REFERENCES agents (namespace_id, id) ON UPDATE RESTRICT ON DELETE CASCADE
) STRICT;
CREATE TRIGGER agent_revisions_are_immutable BEFORE UPDATE ON agent_revisions
BEGIN SELECT RAISE(ABORT, 'agent_revisions_are_immutable: rows of agent_revisions are immutable'); END;

CREATE TRIGGER agent_revisions_are_deleted_with_agent BEFORE DELETE ON agent_revisions
  WHEN EXISTS (SELECT 1 FROM agents WHERE namespace_id = OLD.namespace_id AND id = OLD.agent_id)
BEGIN SELECT RAISE(ABORT, 'agent_revisions_are_immutable: revisions are deleted only with their Agent'); END;

CREATE TABLE workspace_setups (
  id TEXT PRIMARY KEY NOT NULL CHECK (length(id) BETWEEN 1 AND 200),
  namespace_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  defaults_id TEXT CHECK (length(defaults_id) = 64 AND defaults_id NOT GLOB '*[^0-9a-f]*'),
  files TEXT,
  completed INTEGER NOT NULL DEFAULT 0 CHECK (completed IN (0, 1)),
  UNIQUE (namespace_id, agent_id),
  FOREIGN KEY (namespace_id, agent_id) REFERENCES agents (namespace_id, id) ON UPDATE RESTRICT ON DELETE CASCADE,
  CONSTRAINT workspace_setups_completion CHECK (
    (completed = 1 AND files IS NULL)
    OR (completed = 0 AND files IS NOT NULL AND json_valid(files) AND json_type(files) = 'object'
        AND files <> '{}'
        AND json_remove(files, '$."AGENTS.md"', '$."SOUL.md"', '$."IDENTITY.md"', '$."USER.md"') = '{}'))
) STRICT;
CREATE TRIGGER workspace_setup_files_are_valid_on_insert BEFORE INSERT ON workspace_setups
  WHEN NEW.files IS NOT NULL AND json_valid(NEW.files) AND EXISTS (SELECT 1 FROM json_each(NEW.files)
    WHERE type <> 'text' OR length(CAST(value AS BLOB)) > 16384)
BEGIN SELECT RAISE(ABORT, 'workspace_setups_completion: staged files must be strings of at most 16 KiB'); END;
CREATE TRIGGER workspace_setup_files_are_valid_on_update BEFORE UPDATE OF files ON workspace_setups
  WHEN NEW.files IS NOT NULL AND json_valid(NEW.files) AND EXISTS (SELECT 1 FROM json_each(NEW.files)
    WHERE type <> 'text' OR length(CAST(value AS BLOB)) > 16384)
BEGIN SELECT RAISE(ABORT, 'workspace_setups_completion: staged files must be strings of at most 16 KiB'); END;
CREATE TRIGGER workspace_setup_identity_is_immutable BEFORE UPDATE OF id, namespace_id, agent_id, defaults_id ON workspace_setups WHEN NEW.id IS NOT OLD.id OR NEW.namespace_id IS NOT OLD.namespace_id OR NEW.agent_id IS NOT OLD.agent_id OR NEW.defaults_id IS NOT OLD.defaults_id
BEGIN SELECT RAISE(ABORT, 'workspace_setup_identity_is_immutable: id, namespace_id, agent_id, defaults_id never change'); END;

CREATE TABLE iam_roles (
  id TEXT PRIMARY KEY NOT NULL CHECK (length(id) BETWEEN 1 AND 200 AND id NOT GLOB ('*[' || char(32,9,10,11,12,13) || char(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,127) || ']*')),
  namespace_id TEXT REFERENCES namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  name TEXT CHECK (length(name) BETWEEN 1 AND 200 AND name NOT GLOB ('*[' || char(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,127) || ']*') AND name NOT GLOB ('[' || char(32,9,10,11,12,13) || ']*') AND name NOT GLOB ('*[' || char(32,9,10,11,12,13) || ']')),
  permissions TEXT NOT NULL CHECK (json_valid(permissions) AND json_type(permissions) = 'array'
    AND json_array_length(permissions) BETWEEN 1 AND 64),
  created_at TEXT NOT NULL CHECK (created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z')
) STRICT;
CREATE TRIGGER iam_roles_are_immutable BEFORE UPDATE ON iam_roles
BEGIN SELECT RAISE(ABORT, 'iam_roles_are_immutable: rows of iam_roles are immutable'); END;

CREATE TABLE iam_access_bindings (
  id TEXT PRIMARY KEY NOT NULL CHECK (length(id) BETWEEN 1 AND 200 AND id NOT GLOB ('*[' || char(32,9,10,11,12,13) || char(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,127) || ']*')),
  namespace_id TEXT REFERENCES namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  subject_id TEXT NOT NULL REFERENCES iam_identities (id) ON UPDATE RESTRICT ON DELETE CASCADE,
  role_id TEXT NOT NULL REFERENCES iam_roles (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  resource_kind TEXT CHECK (resource_kind IN ('installation', 'namespace', 'configuration', 'preset', 'service_account', 'secret', 'agent', 'agent_revision', 'credential_source')),
  resource_id TEXT CHECK (length(resource_id) BETWEEN 1 AND 200 AND resource_id NOT GLOB ('*[' || char(32,9,10,11,12,13) || char(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,127) || ']*')),
  created_at TEXT NOT NULL CHECK (created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  CONSTRAINT iam_access_bindings_resource_pair CHECK ((resource_kind IS NULL) = (resource_id IS NULL))
) STRICT;
CREATE INDEX iam_access_bindings_subject ON iam_access_bindings (subject_id);
CREATE TRIGGER iam_access_bindings_are_immutable BEFORE UPDATE ON iam_access_bindings
BEGIN SELECT RAISE(ABORT, 'iam_access_bindings_are_immutable: rows of iam_access_bindings are immutable'); END;

CREATE TABLE iam_restrictions (
  id TEXT PRIMARY KEY NOT NULL CHECK (length(id) BETWEEN 1 AND 200 AND id NOT GLOB ('*[' || char(32,9,10,11,12,13) || char(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,127) || ']*')),
  namespace_id TEXT REFERENCES namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  action TEXT NOT NULL CHECK (action IN ('create', 'read', 'update', 'delete', 'deploy', 'operate',
    'administer', 'read_logs', 'use')),
  resource_kind TEXT NOT NULL CHECK (resource_kind IN ('installation', 'namespace', 'configuration', 'preset', 'service_account', 'secret', 'agent', 'agent_revision', 'credential_source')),
  resource_id TEXT CHECK (length(resource_id) BETWEEN 1 AND 200 AND resource_id NOT GLOB ('*[' || char(32,9,10,11,12,13) || char(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,127) || ']*')),
  effect TEXT NOT NULL DEFAULT 'deny' CHECK (effect = 'deny'),
  created_at TEXT NOT NULL CHECK (created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z')
) STRICT;

CREATE TABLE users (
  id TEXT PRIMARY KEY NOT NULL CHECK (length(id) BETWEEN 1 AND 200 AND id NOT GLOB ('*[' || char(32,9,10,11,12,13) || char(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,127) || ']*')),
  email TEXT NOT NULL UNIQUE CHECK (length(email) BETWEEN 3 AND 320 AND email = lower(email)),
  name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 200 AND name NOT GLOB ('*[' || char(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,127) || ']*') AND name NOT GLOB ('[' || char(32,9,10,11,12,13) || ']*') AND name NOT GLOB ('*[' || char(32,9,10,11,12,13) || ']')),
  password_hash TEXT NOT NULL CHECK (substr(password_hash, 1, 7) = '$argon2'),
  principal_id TEXT NOT NULL UNIQUE REFERENCES iam_identities (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  created_at TEXT NOT NULL CHECK (created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z')
) STRICT;

CREATE TABLE sessions (
  id TEXT PRIMARY KEY NOT NULL CHECK (length(id) BETWEEN 1 AND 200),
  token_hash TEXT NOT NULL UNIQUE CHECK (length(token_hash) = 64 AND token_hash NOT GLOB '*[^0-9a-f]*'),
  user_id TEXT NOT NULL REFERENCES users (id) ON UPDATE RESTRICT ON DELETE CASCADE,
  expires_at TEXT NOT NULL CHECK (expires_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  created_at TEXT NOT NULL CHECK (created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z')
) STRICT;

CREATE TABLE service_keys (
  id TEXT PRIMARY KEY NOT NULL CHECK (length(id) BETWEEN 1 AND 200 AND id NOT GLOB ('*[' || char(32,9,10,11,12,13) || char(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,127) || ']*')),
  service_principal_id TEXT NOT NULL REFERENCES iam_identities (id) ON UPDATE RESTRICT ON DELETE CASCADE,
  namespace_id TEXT REFERENCES namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 32 AND trim(name) <> ''),
  key_hash TEXT NOT NULL UNIQUE CHECK (length(key_hash) = 64 AND key_hash NOT GLOB '*[^0-9a-f]*'),
  expires_at TEXT NOT NULL CHECK (expires_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  created_at TEXT NOT NULL CHECK (created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  CHECK (expires_at > created_at)
) STRICT;
CREATE TRIGGER service_keys_are_immutable BEFORE UPDATE ON service_keys
BEGIN SELECT RAISE(ABORT, 'service_keys_are_immutable: rows of service_keys are immutable'); END;

CREATE TABLE controller_work (
  idempotency_key TEXT PRIMARY KEY NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 512),
  work_kind TEXT NOT NULL DEFAULT 'lifecycle' CHECK (work_kind = 'lifecycle'),
  namespace_id TEXT NOT NULL REFERENCES namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  agent_id TEXT,
  revision_id TEXT,
  actor_id TEXT NOT NULL CHECK (length(actor_id) BETWEEN 1 AND 200 AND actor_id NOT GLOB ('*[' || char(32,9,10,11,12,13) || char(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,127) || ']*')),
  namespace_target TEXT CHECK (namespace_target IN ('ready', 'deleted')),
  agent_target TEXT CHECK (agent_target IN ('stopped', 'deleted')),
  state TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'claimed', 'succeeded', 'failed_permanent')),
  available_at TEXT NOT NULL CHECK (available_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  attempt_count INTEGER NOT NULL DEFAULT 0 CHECK (attempt_count >= 0),
  claim_token TEXT CHECK (claim_token GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-4[0-9a-f][0-9a-f][0-9a-f]-[89ab][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
  lease_expires_at TEXT CHECK (lease_expires_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  completed_at TEXT CHECK (completed_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  reason_code TEXT CHECK (length(reason_code) BETWEEN 1 AND 64 AND reason_code NOT GLOB '*[^A-Z0-9_]*'),
  result_data TEXT CHECK (result_data IS NULL OR (json_valid(result_data) AND json_type(result_data) = 'object')),
  created_at TEXT NOT NULL CHECK (created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  updated_at TEXT NOT NULL CHECK (updated_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  CONSTRAINT controller_work_shape CHECK (
    (agent_id IS NULL AND revision_id IS NULL AND namespace_target IS NOT NULL AND agent_target IS NULL
      AND idempotency_key = 'namespace:' || namespace_id || ':reconcile:' || namespace_target)
    OR (agent_id IS NOT NULL AND revision_id IS NULL AND namespace_target IS NULL AND agent_target IS NOT NULL
      AND ((agent_target = 'stopped' AND (length(idempotency_key) > length(('agent:' || agent_id || ':reconcile:stopped:')) AND substr(idempotency_key, 1, length(('agent:' || agent_id || ':reconcile:stopped:'))) = ('agent:' || agent_id || ':reconcile:stopped:')))
        OR (agent_target = 'deleted' AND idempotency_key = 'agent:' || agent_id || ':reconcile:deleted')))
    OR (agent_id IS NOT NULL AND revision_id IS NOT NULL AND namespace_target IS NULL AND agent_target IS NULL
      AND (idempotency_key = 'agent_revision:' || revision_id || ':reconcile'
        OR (length(idempotency_key) > length(('agent_revision:' || revision_id || ':maintenance:')) AND substr(idempotency_key, 1, length(('agent_revision:' || revision_id || ':maintenance:'))) = ('agent_revision:' || revision_id || ':maintenance:'))))),
  CONSTRAINT controller_work_claim_state CHECK (
    (state = 'claimed') = (claim_token IS NOT NULL) AND (state = 'claimed') = (lease_expires_at IS NOT NULL)),
  CONSTRAINT controller_work_completion_state CHECK (
    (state IN ('succeeded', 'failed_permanent')) = (completed_at IS NOT NULL)
    AND (state IN ('succeeded', 'failed_permanent')) = (reason_code IS NOT NULL)
    AND (result_data IS NULL OR state IN ('succeeded', 'failed_permanent'))),
  FOREIGN KEY (namespace_id, agent_id) REFERENCES agents (namespace_id, id),
  FOREIGN KEY (namespace_id, agent_id, revision_id) REFERENCES agent_revisions (namespace_id, agent_id, id)
) STRICT;
CREATE INDEX controller_work_ready ON controller_work (available_at, created_at, idempotency_key) WHERE state = 'queued';
CREATE INDEX controller_work_expired ON controller_work (lease_expires_at, idempotency_key) WHERE state = 'claimed';
CREATE UNIQUE INDEX controller_work_one_claim_per_resource
  ON controller_work (coalesce(agent_id, namespace_id)) WHERE state = 'claimed';
CREATE INDEX controller_work_agent ON controller_work (agent_id) WHERE agent_id IS NOT NULL;
CREATE TRIGGER controller_work_identity_is_immutable BEFORE UPDATE OF idempotency_key, work_kind, namespace_id, agent_id, revision_id, actor_id, namespace_target, agent_target, created_at ON controller_work WHEN NEW.idempotency_key IS NOT OLD.idempotency_key OR NEW.work_kind IS NOT OLD.work_kind OR NEW.namespace_id IS NOT OLD.namespace_id OR NEW.agent_id IS NOT OLD.agent_id OR NEW.revision_id IS NOT OLD.revision_id OR NEW.actor_id IS NOT OLD.actor_id OR NEW.namespace_target IS NOT OLD.namespace_target OR NEW.agent_target IS NOT OLD.agent_target OR NEW.created_at IS NOT OLD.created_at
BEGIN SELECT RAISE(ABORT, 'controller_work_identity_is_immutable: idempotency_key, work_kind, namespace_id, agent_id, revision_id, actor_id, namespace_target, agent_target, created_at never change'); END;

CREATE TABLE audit_events (
  id TEXT PRIMARY KEY NOT NULL CHECK (id GLOB 'aud_[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-4[0-9a-f][0-9a-f][0-9a-f]-[89ab][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
  occurred_at TEXT NOT NULL CHECK (occurred_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  kind TEXT NOT NULL CHECK (kind IN ('bootstrap', 'mutation', 'access', 'authorization_denial')),
  actor_id TEXT NOT NULL CHECK (length(actor_id) BETWEEN 1 AND 200),
  action TEXT NOT NULL CHECK (length(action) BETWEEN 1 AND 128),
  namespace_id TEXT,
  resource_kind TEXT NOT NULL CHECK (resource_kind IN ('installation', 'namespace', 'configuration', 'preset', 'service_account', 'secret', 'agent', 'agent_revision', 'credential_source')),
  resource_id TEXT NOT NULL CHECK (length(resource_id) BETWEEN 1 AND 512),
  outcome TEXT NOT NULL CHECK (outcome IN ('success', 'denied', 'failure')),
  details TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(details) AND json_type(details) = 'object')
) STRICT;
CREATE INDEX audit_events_work ON audit_events (json_extract(details, '$.workId'), occurred_at DESC, id DESC)
  WHERE json_extract(details, '$.workId') IS NOT NULL;
CREATE INDEX audit_events_time ON audit_events (occurred_at, id);
CREATE TRIGGER audit_events_are_append_only BEFORE UPDATE ON audit_events
BEGIN SELECT RAISE(ABORT, 'audit_events_are_append_only: rows of audit_events are immutable'); END;
CREATE TRIGGER audit_events_are_never_deleted BEFORE DELETE ON audit_events
BEGIN SELECT RAISE(ABORT, 'audit_events_are_append_only: rows of audit_events are immutable'); END;

CREATE VIEW clock AS SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now') AS now;
