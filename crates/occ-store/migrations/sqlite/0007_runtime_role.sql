-- A person's runtime role on one Agent (the role they hold in its native Control UI): set only on
-- exact Agent bindings, at most one per person and Agent. It is the one column of a binding an
-- Installation administrator may change in place (PATCH …/runtime-role); everything else about a
-- binding stays immutable, and an assignment is never cleared by an update (deleting the binding
-- revokes it).
ALTER TABLE iam_access_bindings ADD COLUMN runtime_role TEXT
  CONSTRAINT iam_access_bindings_runtime_role CHECK (runtime_role IS NULL OR (
    length(runtime_role) BETWEEN 1 AND 128
    AND runtime_role NOT GLOB ('*[' || char(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,127) || ']*')
    AND runtime_role NOT GLOB ('[' || char(32,9,10,11,12,13) || ']*')
    AND runtime_role NOT GLOB ('*[' || char(32,9,10,11,12,13) || ']')
    AND resource_kind = 'agent' AND namespace_id IS NOT NULL));
CREATE UNIQUE INDEX iam_access_bindings_runtime_assignment
  ON iam_access_bindings (namespace_id, subject_id, resource_id) WHERE runtime_role IS NOT NULL;
DROP TRIGGER iam_access_bindings_are_immutable;
CREATE TRIGGER iam_access_bindings_are_immutable BEFORE UPDATE ON iam_access_bindings
  WHEN OLD.id IS NOT NEW.id OR OLD.namespace_id IS NOT NEW.namespace_id
    OR OLD.subject_id IS NOT NEW.subject_id OR OLD.role_id IS NOT NEW.role_id
    OR OLD.resource_kind IS NOT NEW.resource_kind OR OLD.resource_id IS NOT NEW.resource_id
    OR OLD.created_at IS NOT NEW.created_at OR NEW.runtime_role IS NULL
BEGIN SELECT RAISE(ABORT, 'iam_access_bindings_are_immutable: rows of iam_access_bindings are immutable except a runtime role assignment'); END;
