-- A redeployed revision records the earlier revision of the same Agent whose frozen snapshot it
-- was made from (NULL for a deploy of the Configuration). The composite key keeps it inside the
-- Agent: a revision of another Agent or Namespace cannot be named. Revisions go only all at once
-- (the cascade of deleting their Agent), so the reference never dangles.
ALTER TABLE occ.agent_revisions ADD COLUMN source_revision_id text;
ALTER TABLE occ.agent_revisions ADD CONSTRAINT agent_revisions_source_revision_not_self
  CHECK (source_revision_id <> id);
ALTER TABLE occ.agent_revisions ADD CONSTRAINT agent_revisions_source_revision_fk
  FOREIGN KEY (namespace_id, agent_id, source_revision_id)
  REFERENCES occ.agent_revisions (namespace_id, agent_id, id);
