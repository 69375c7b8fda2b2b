-- What the worker last observed of an Agent's gateway: whether it runs, how often occ restarted
-- the revision's gateway after it was found down, and its last exit. The API reads it without
-- asking the Compute Driver. One row per Agent, for the revision observed last; it goes with the
-- Agent (through its revisions).

CREATE TABLE agent_runtime (
  namespace_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  revision_id TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('running', 'restarting', 'stopped')),
  restarts INTEGER NOT NULL CHECK (restarts BETWEEN 0 AND 9007199254740991),
  last_exit_at TEXT CHECK (last_exit_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  last_exit_status TEXT CHECK (length(last_exit_status) BETWEEN 1 AND 200 AND last_exit_status NOT GLOB ('*[' || char(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,127) || ']*')),
  observed_at TEXT NOT NULL CHECK (observed_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  PRIMARY KEY (namespace_id, agent_id),
  CONSTRAINT agent_runtime_exit_status_has_time CHECK (last_exit_status IS NULL OR last_exit_at IS NOT NULL),
  FOREIGN KEY (namespace_id, agent_id, revision_id) REFERENCES agent_revisions (namespace_id, agent_id, id) ON UPDATE RESTRICT ON DELETE CASCADE
) STRICT;
