-- Agent provisioning jobs (occ_core::provisioning): the accepted request, the ids planned for
-- what the job creates, and its progress. The job runs as controller work of a second kind,
-- 'provisioning', keyed 'agent_provisioning:<job>:attempt:<n>' (one per admission or retry);
-- SQLite cannot alter a CHECK constraint, so controller_work is rebuilt with the wider one.
CREATE TABLE controller_work_next (
  idempotency_key TEXT PRIMARY KEY NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 512),
  work_kind TEXT NOT NULL DEFAULT 'lifecycle' CHECK (work_kind IN ('lifecycle', 'provisioning')),
  namespace_id TEXT NOT NULL REFERENCES namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  agent_id TEXT,
  revision_id TEXT,
  actor_id TEXT NOT NULL CHECK (length(actor_id) BETWEEN 1 AND 200 AND actor_id NOT GLOB ('*[' || char(32,9,10,11,12,13) || char(1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,127) || ']*')),
  namespace_target TEXT CHECK (namespace_target IN ('ready', 'deleted')),
  agent_target TEXT CHECK (agent_target IN ('stopped', 'deleted')),
  state TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'claimed', 'succeeded', 'failed_permanent')),
  available_at TEXT NOT NULL CHECK (available_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  attempt_count INTEGER NOT NULL DEFAULT 0 CHECK (attempt_count >= 0),
  claim_token TEXT CHECK (claim_token GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-4[0-9a-f][0-9a-f][0-9a-f]-[89ab][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
  lease_expires_at TEXT CHECK (lease_expires_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  completed_at TEXT CHECK (completed_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  reason_code TEXT CHECK (length(reason_code) BETWEEN 1 AND 64 AND reason_code NOT GLOB '*[^A-Z0-9_]*'),
  result_data TEXT CHECK (result_data IS NULL OR (json_valid(result_data) AND json_type(result_data) = 'object')),
  created_at TEXT NOT NULL CHECK (created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  updated_at TEXT NOT NULL CHECK (updated_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  CONSTRAINT controller_work_shape CHECK (
    (work_kind = 'lifecycle' AND (
    (agent_id IS NULL AND revision_id IS NULL AND namespace_target IS NOT NULL AND agent_target IS NULL
      AND idempotency_key = 'namespace:' || namespace_id || ':reconcile:' || namespace_target)
    OR (agent_id IS NOT NULL AND revision_id IS NULL AND namespace_target IS NULL AND agent_target IS NOT NULL
      AND ((agent_target = 'stopped' AND (length(idempotency_key) > length(('agent:' || agent_id || ':reconcile:stopped:')) AND substr(idempotency_key, 1, length(('agent:' || agent_id || ':reconcile:stopped:'))) = ('agent:' || agent_id || ':reconcile:stopped:')))
        OR (agent_target = 'deleted' AND idempotency_key = 'agent:' || agent_id || ':reconcile:deleted')))
    OR (agent_id IS NOT NULL AND revision_id IS NOT NULL AND namespace_target IS NULL AND agent_target IS NULL
      AND (idempotency_key = 'agent_revision:' || revision_id || ':reconcile'
        OR (length(idempotency_key) > length(('agent_revision:' || revision_id || ':maintenance:')) AND substr(idempotency_key, 1, length(('agent_revision:' || revision_id || ':maintenance:'))) = ('agent_revision:' || revision_id || ':maintenance:'))))))
    OR (work_kind = 'provisioning' AND agent_id IS NULL AND revision_id IS NULL
      AND namespace_target IS NULL AND agent_target IS NULL
      AND length(idempotency_key) BETWEEN 69 AND 77 AND idempotency_key GLOB 'agent_provisioning:prv_[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-4[0-9a-f][0-9a-f][0-9a-f]-[89ab][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]:attempt:[1-9]*'
      AND substr(idempotency_key, 69) NOT GLOB '*[^0-9]*')),
  CONSTRAINT controller_work_claim_state CHECK (
    (state = 'claimed') = (claim_token IS NOT NULL) AND (state = 'claimed') = (lease_expires_at IS NOT NULL)),
  CONSTRAINT controller_work_completion_state CHECK (
    (state IN ('succeeded', 'failed_permanent')) = (completed_at IS NOT NULL)
    AND (state IN ('succeeded', 'failed_permanent')) = (reason_code IS NOT NULL)
    AND (result_data IS NULL OR state IN ('succeeded', 'failed_permanent'))),
  FOREIGN KEY (namespace_id, agent_id) REFERENCES agents (namespace_id, id),
  FOREIGN KEY (namespace_id, agent_id, revision_id) REFERENCES agent_revisions (namespace_id, agent_id, id)
) STRICT;
INSERT INTO controller_work_next (idempotency_key, work_kind, namespace_id, agent_id, revision_id, actor_id, namespace_target, agent_target, state, available_at, attempt_count, claim_token, lease_expires_at, completed_at, reason_code, result_data, created_at, updated_at)
  SELECT idempotency_key, work_kind, namespace_id, agent_id, revision_id, actor_id, namespace_target, agent_target, state, available_at, attempt_count, claim_token, lease_expires_at, completed_at, reason_code, result_data, created_at, updated_at FROM controller_work ORDER BY rowid;
DROP TABLE controller_work;
ALTER TABLE controller_work_next RENAME TO controller_work;
CREATE INDEX controller_work_ready ON controller_work (available_at, created_at, idempotency_key) WHERE state = 'queued';
CREATE INDEX controller_work_expired ON controller_work (lease_expires_at, idempotency_key) WHERE state = 'claimed';
CREATE UNIQUE INDEX controller_work_one_claim_per_resource
  ON controller_work (coalesce(agent_id, namespace_id)) WHERE state = 'claimed';
CREATE INDEX controller_work_agent ON controller_work (agent_id) WHERE agent_id IS NOT NULL;
CREATE TRIGGER controller_work_identity_is_immutable BEFORE UPDATE OF idempotency_key, work_kind, namespace_id, agent_id, revision_id, actor_id, namespace_target, agent_target, created_at ON controller_work WHEN NEW.idempotency_key IS NOT OLD.idempotency_key OR NEW.work_kind IS NOT OLD.work_kind OR NEW.namespace_id IS NOT OLD.namespace_id OR NEW.agent_id IS NOT OLD.agent_id OR NEW.revision_id IS NOT OLD.revision_id OR NEW.actor_id IS NOT OLD.actor_id OR NEW.namespace_target IS NOT OLD.namespace_target OR NEW.agent_target IS NOT OLD.agent_target OR NEW.created_at IS NOT OLD.created_at
BEGIN SELECT RAISE(ABORT, 'controller_work_identity_is_immutable: idempotency_key, work_kind, namespace_id, agent_id, revision_id, actor_id, namespace_target, agent_target, created_at never change'); END;

CREATE TABLE agent_provisioning (
  id TEXT PRIMARY KEY NOT NULL CHECK (id GLOB 'prv_[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-4[0-9a-f][0-9a-f][0-9a-f]-[89ab][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
  namespace_id TEXT NOT NULL REFERENCES namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  actor_id TEXT NOT NULL CHECK (length(actor_id) BETWEEN 1 AND 200),
  request_id TEXT NOT NULL CHECK (request_id GLOB 'req_[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-4[0-9a-f][0-9a-f][0-9a-f]-[89ab][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
  fingerprint TEXT NOT NULL CHECK (length(fingerprint) = 64 AND fingerprint NOT GLOB '*[^0-9a-f]*'),
  spec TEXT NOT NULL CHECK (json_valid(spec) AND json_type(spec) = 'object'),
  status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed')),
  phase TEXT NOT NULL CHECK (phase IN ('admitted', 'configuration', 'transport', 'handoff')),
  attempt_count INTEGER NOT NULL CHECK (attempt_count >= 0),
  run INTEGER NOT NULL CHECK (run >= 1),
  planned_configuration_id TEXT NOT NULL CHECK (planned_configuration_id GLOB 'cfg_[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-4[0-9a-f][0-9a-f][0-9a-f]-[89ab][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
  planned_agent_id TEXT NOT NULL CHECK (planned_agent_id GLOB 'agt_[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-4[0-9a-f][0-9a-f][0-9a-f]-[89ab][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
  configuration_id TEXT CHECK (configuration_id IS NULL OR configuration_id = planned_configuration_id),
  agent_id TEXT CHECK (agent_id IS NULL OR agent_id = planned_agent_id),
  revision_id TEXT CHECK (revision_id IS NULL OR revision_id GLOB 'rev_[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-4[0-9a-f][0-9a-f][0-9a-f]-[89ab][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'),
  error_code TEXT CHECK (length(error_code) BETWEEN 1 AND 64 AND error_code NOT GLOB '*[^A-Z0-9_]*'),
  error_message TEXT CHECK (length(error_message) BETWEEN 1 AND 256),
  created_at TEXT NOT NULL CHECK (created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  updated_at TEXT NOT NULL CHECK (updated_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z'),
  CONSTRAINT agent_provisioning_error_when_failed CHECK (
    (status = 'failed') = (error_code IS NOT NULL) AND (error_code IS NULL) = (error_message IS NULL)),
  CONSTRAINT agent_provisioning_succeeded_with_revision CHECK (
    status <> 'succeeded' OR (configuration_id IS NOT NULL AND agent_id IS NOT NULL AND revision_id IS NOT NULL)),
  UNIQUE (namespace_id, actor_id, request_id)
) STRICT;
CREATE TRIGGER agent_provisioning_identity_is_immutable BEFORE UPDATE OF id, namespace_id, actor_id, request_id, fingerprint, spec, planned_configuration_id, planned_agent_id, created_at ON agent_provisioning WHEN NEW.id IS NOT OLD.id OR NEW.namespace_id IS NOT OLD.namespace_id OR NEW.actor_id IS NOT OLD.actor_id OR NEW.request_id IS NOT OLD.request_id OR NEW.fingerprint IS NOT OLD.fingerprint OR NEW.spec IS NOT OLD.spec OR NEW.planned_configuration_id IS NOT OLD.planned_configuration_id OR NEW.planned_agent_id IS NOT OLD.planned_agent_id OR NEW.created_at IS NOT OLD.created_at
BEGIN SELECT RAISE(ABORT, 'agent_provisioning_identity_is_immutable: only the progress of a provisioning job changes'); END;
