-- A person's runtime role on one Agent (the role they hold in its native Control UI): set only on
-- exact Agent bindings, at most one per person and Agent. It is the one column of a binding an
-- Installation administrator may change in place (PATCH …/runtime-role); everything else about a
-- binding stays immutable, and an assignment is never cleared by an update (deleting the binding
-- revokes it).
ALTER TABLE occ.iam_access_bindings ADD COLUMN runtime_role text
  CONSTRAINT iam_access_bindings_runtime_role CHECK (runtime_role IS NULL OR (
    char_length(runtime_role) BETWEEN 1 AND 128 AND runtime_role !~ '[[:cntrl:]]'
    AND runtime_role !~ '^[[:space:]]' AND runtime_role !~ '[[:space:]]$'
    AND resource_kind = 'agent' AND namespace_id IS NOT NULL));
CREATE UNIQUE INDEX iam_access_bindings_runtime_assignment
  ON occ.iam_access_bindings (namespace_id, subject_id, resource_id) WHERE runtime_role IS NOT NULL;
DROP TRIGGER iam_access_bindings_are_immutable ON occ.iam_access_bindings;
CREATE TRIGGER iam_access_bindings_are_immutable
  BEFORE UPDATE ON occ.iam_access_bindings
  FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id OR OLD.namespace_id IS DISTINCT FROM NEW.namespace_id
    OR OLD.subject_id IS DISTINCT FROM NEW.subject_id OR OLD.role_id IS DISTINCT FROM NEW.role_id
    OR OLD.resource_kind IS DISTINCT FROM NEW.resource_kind OR OLD.resource_id IS DISTINCT FROM NEW.resource_id
    OR OLD.created_at IS DISTINCT FROM NEW.created_at OR NEW.runtime_role IS NULL)
  EXECUTE FUNCTION occ.reject_row_mutation('iam_access_bindings_are_immutable',
    'rows of iam_access_bindings are immutable except a runtime role assignment');
