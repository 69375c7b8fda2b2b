-- What the worker last observed of an Agent's gateway: whether it runs, how often occ restarted
-- the revision's gateway after it was found down, and its last exit. The API reads it without
-- asking the Compute Driver. One row per Agent, for the revision observed last; it goes with the
-- Agent (through its revisions).

SET LOCAL search_path = occ, pg_catalog;

CREATE TABLE occ.agent_runtime (
  namespace_id text NOT NULL,
  agent_id text NOT NULL,
  revision_id text NOT NULL,
  state text NOT NULL CHECK (state IN ('running', 'restarting', 'stopped')),
  restarts bigint NOT NULL CHECK (restarts BETWEEN 0 AND 9007199254740991),
  last_exit_at timestamptz,
  last_exit_status text CHECK (last_exit_status IS NULL OR (char_length(last_exit_status) BETWEEN 1 AND 200
    AND last_exit_status !~ '[[:cntrl:]]')),
  observed_at timestamptz NOT NULL,
  PRIMARY KEY (namespace_id, agent_id),
  CONSTRAINT agent_runtime_exit_status_has_time CHECK (last_exit_status IS NULL OR last_exit_at IS NOT NULL),
  FOREIGN KEY (namespace_id, agent_id, revision_id) REFERENCES occ.agent_revisions (namespace_id, agent_id, id)
    ON UPDATE RESTRICT ON DELETE CASCADE
);
