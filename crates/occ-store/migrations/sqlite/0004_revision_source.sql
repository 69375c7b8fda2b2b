-- A redeployed revision records the earlier revision of the same Agent whose frozen snapshot it
-- was made from (NULL for a deploy of the Configuration). SQLite cannot add a composite foreign
-- key to an existing table, so a trigger keeps it inside the Agent (it also refuses the row
-- itself, which does not exist yet when the trigger runs). Revisions go only all at once (the
-- cascade of deleting their Agent), so the reference never dangles.
ALTER TABLE agent_revisions ADD COLUMN source_revision_id TEXT;
CREATE TRIGGER agent_revisions_source_revision_fk BEFORE INSERT ON agent_revisions
  WHEN NEW.source_revision_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM agent_revisions
    WHERE namespace_id = NEW.namespace_id AND agent_id = NEW.agent_id AND id = NEW.source_revision_id)
BEGIN SELECT RAISE(ABORT, 'agent_revisions_source_revision_fk: the source revision is not an earlier revision of the same Agent'); END;
