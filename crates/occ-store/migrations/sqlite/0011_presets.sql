-- Presets: a Namespace's templates for new Agents (occ_core::preset). The template is stored
-- as admitted; seed_digest is set on the built-in Presets occ seeds into a new Namespace (the
-- SHA-256 of the name and template it wrote), so deleting the Namespace removes a built-in
-- nobody changed and refuses one somebody did, like any other Preset.
CREATE TABLE presets (
  id TEXT PRIMARY KEY NOT NULL CHECK (id GLOB 'pre_[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-4[0-9a-f][0-9a-f][0-9a-f]-[89ab][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
  namespace_id TEXT NOT NULL REFERENCES namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  name TEXT NOT NULL CHECK (length(name) BETWEEN 1 AND 200 AND name NOT GLOB ('*[' || char(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,127) || ']*') AND name NOT GLOB ('[' || char(32,9,10,11,12,13) || ']*') AND name NOT GLOB ('*[' || char(32,9,10,11,12,13) || ']')),
  template TEXT NOT NULL CHECK (json_valid(template) AND json_type(template) = 'object' AND length(template) <= 1048576),
  seed_digest TEXT CHECK (seed_digest IS NULL OR (length(seed_digest) = 64 AND seed_digest NOT GLOB '*[^0-9a-f]*')),
  created_at TEXT NOT NULL CHECK (created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  UNIQUE (namespace_id, id),
  UNIQUE (namespace_id, name)
) STRICT;
CREATE TRIGGER preset_identity_is_immutable BEFORE UPDATE OF id, namespace_id, created_at ON presets WHEN NEW.id IS NOT OLD.id OR NEW.namespace_id IS NOT OLD.namespace_id OR NEW.created_at IS NOT OLD.created_at
BEGIN SELECT RAISE(ABORT, 'preset_identity_is_immutable: id, namespace_id, created_at never change'); END;
