-- Credential sources (occ_core::credential_source): a Namespace's saved provider connections.
-- The row holds the type and its non-secret settings; credential_source_secrets names the
-- Secrets that hold its key, so a Secret a source uses cannot be deleted (RESTRICT) and a
-- source goes with its Secret references (CASCADE). No value is stored here.
CREATE TABLE occ.credential_sources (
  id text PRIMARY KEY CHECK (id ~ '^cs_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'),
  namespace_id text NOT NULL REFERENCES occ.namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  name text NOT NULL COLLATE "C" CHECK ((char_length(name) <= 200 AND name ~ '^[^[:space:][:cntrl:]]([^[:cntrl:]]*[^[:space:][:cntrl:]])?$')),
  source_type text NOT NULL CHECK (source_type ~ '^[a-z][a-z0-9-]{0,63}$'),
  config jsonb NOT NULL CHECK (jsonb_typeof(config) = 'object'),
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  UNIQUE (namespace_id, id),
  UNIQUE (namespace_id, name)
);
CREATE TRIGGER credential_source_identity_is_immutable
  BEFORE UPDATE OF id, namespace_id, source_type, created_at ON occ.credential_sources
  FOR EACH ROW EXECUTE FUNCTION occ.reject_row_mutation('credential_source_identity_is_immutable');

CREATE TABLE occ.credential_source_secrets (
  namespace_id text NOT NULL,
  source_id text NOT NULL,
  field text NOT NULL CHECK (field ~ '^[a-z][a-z0-9_]{0,63}$'),
  secret_id text NOT NULL,
  PRIMARY KEY (source_id, field),
  FOREIGN KEY (namespace_id, source_id) REFERENCES occ.credential_sources (namespace_id, id)
    ON UPDATE RESTRICT ON DELETE CASCADE,
  FOREIGN KEY (namespace_id, secret_id) REFERENCES occ.secrets (namespace_id, id)
    ON UPDATE RESTRICT ON DELETE RESTRICT
);
CREATE INDEX credential_source_secrets_by_secret ON occ.credential_source_secrets (namespace_id, secret_id);
