-- Credential sources (occ_core::credential_source): a Namespace's saved provider connections.
-- The row holds the type and its non-secret settings; credential_source_secrets names the
-- Secrets that hold its key, so a Secret a source uses cannot be deleted (RESTRICT) and a
-- source goes with its Secret references (CASCADE). No value is stored here.
CREATE TABLE credential_sources (
  id TEXT PRIMARY KEY NOT NULL CHECK (id GLOB 'cs_[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-4[0-9a-f][0-9a-f][0-9a-f]-[89ab][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
  namespace_id TEXT NOT NULL REFERENCES namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 200 AND name NOT GLOB ('*[' || char(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,127) || ']*') AND name NOT GLOB ('[' || char(32,9,10,11,12,13) || ']*') AND name NOT GLOB ('*[' || char(32,9,10,11,12,13) || ']')),
  source_type TEXT NOT NULL CHECK (length(source_type) BETWEEN 1 AND 64 AND source_type GLOB '[a-z]*' AND source_type NOT GLOB '*[^a-z0-9-]*'),
  config TEXT NOT NULL CHECK (json_valid(config) AND json_type(config) = 'object' AND length(config) <= 1048576),
  created_at TEXT NOT NULL CHECK (created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  updated_at TEXT NOT NULL CHECK (updated_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  UNIQUE (namespace_id, id),
  UNIQUE (namespace_id, name)
) STRICT;
CREATE TRIGGER credential_source_identity_is_immutable BEFORE UPDATE OF id, namespace_id, source_type, created_at ON credential_sources WHEN NEW.id IS NOT OLD.id OR NEW.namespace_id IS NOT OLD.namespace_id OR NEW.source_type IS NOT OLD.source_type OR NEW.created_at IS NOT OLD.created_at
BEGIN SELECT RAISE(ABORT, 'credential_source_identity_is_immutable: id, namespace_id, source_type, created_at never change'); END;

CREATE TABLE credential_source_secrets (
  namespace_id TEXT NOT NULL,
  source_id TEXT NOT NULL,
  field TEXT NOT NULL CHECK (length(field) BETWEEN 1 AND 64 AND field GLOB '[a-z]*' AND field NOT GLOB '*[^a-z0-9_]*'),
  secret_id TEXT NOT NULL,
  PRIMARY KEY (source_id, field),
  FOREIGN KEY (namespace_id, source_id) REFERENCES credential_sources (namespace_id, id)
    ON UPDATE RESTRICT ON DELETE CASCADE,
  FOREIGN KEY (namespace_id, secret_id) REFERENCES secrets (namespace_id, id)
    ON UPDATE RESTRICT ON DELETE RESTRICT
) STRICT;
CREATE INDEX credential_source_secrets_by_secret ON credential_source_secrets (namespace_id, secret_id);
