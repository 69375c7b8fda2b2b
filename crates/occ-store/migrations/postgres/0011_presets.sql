-- Presets: a Namespace's templates for new Agents (occ_core::preset). The template is stored
-- as admitted; seed_digest is set on the built-in Presets occ seeds into a new Namespace (the
-- SHA-256 of the name and template it wrote), so deleting the Namespace removes a built-in
-- nobody changed and refuses one somebody did, like any other Preset.
CREATE TABLE occ.presets (
  id text PRIMARY KEY CHECK (id ~ '^pre_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'),
  namespace_id text NOT NULL REFERENCES occ.namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  name text NOT NULL COLLATE "C" CHECK ((char_length(name) <= 200 AND name ~ '^[^[:space:][:cntrl:]]([^[:cntrl:]]*[^[:space:][:cntrl:]])?$')),
  template jsonb NOT NULL CHECK (jsonb_typeof(template) = 'object'),
  seed_digest text CHECK (seed_digest IS NULL OR seed_digest ~ '^[0-9a-f]{64}$'),
  created_at timestamptz NOT NULL,
  UNIQUE (namespace_id, id),
  UNIQUE (namespace_id, name)
);
CREATE TRIGGER preset_identity_is_immutable
  BEFORE UPDATE OF id, namespace_id, created_at ON occ.presets
  FOR EACH ROW EXECUTE FUNCTION occ.reject_row_mutation('preset_identity_is_immutable');
