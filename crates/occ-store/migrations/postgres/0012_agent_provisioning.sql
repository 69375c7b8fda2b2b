-- Agent provisioning jobs (occ_core::provisioning): the accepted request, the ids planned for
-- what the job creates, and its progress. The job runs as controller work of a second kind,
-- 'provisioning', keyed 'agent_provisioning:<job>:attempt:<n>' (one per admission or retry).
ALTER TABLE occ.controller_work DROP CONSTRAINT controller_work_work_kind_check;
ALTER TABLE occ.controller_work ADD CONSTRAINT controller_work_work_kind_check
  CHECK (work_kind IN ('lifecycle', 'provisioning'));

CREATE OR REPLACE FUNCTION occ.check_controller_work_shape() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, occ AS $$
BEGIN
  IF NOT COALESCE(
    (NEW.work_kind = 'lifecycle' AND (
    (NEW.agent_id IS NULL AND NEW.revision_id IS NULL AND NEW.namespace_target IS NOT NULL AND NEW.agent_target IS NULL
      AND NEW.idempotency_key = 'namespace:' || NEW.namespace_id || ':reconcile:' || NEW.namespace_target)
    OR (NEW.agent_id IS NOT NULL AND NEW.revision_id IS NULL AND NEW.namespace_target IS NULL AND NEW.agent_target IS NOT NULL
      AND ((NEW.agent_target = 'stopped' AND (char_length(NEW.idempotency_key) > char_length('agent:' || NEW.agent_id || ':reconcile:stopped:') AND left(NEW.idempotency_key, char_length('agent:' || NEW.agent_id || ':reconcile:stopped:')) = 'agent:' || NEW.agent_id || ':reconcile:stopped:'))
        OR (NEW.agent_target = 'deleted' AND NEW.idempotency_key = 'agent:' || NEW.agent_id || ':reconcile:deleted')))
    OR (NEW.agent_id IS NOT NULL AND NEW.revision_id IS NOT NULL AND NEW.namespace_target IS NULL AND NEW.agent_target IS NULL
      AND (NEW.idempotency_key = 'agent_revision:' || NEW.revision_id || ':reconcile'
        OR (char_length(NEW.idempotency_key) > char_length('agent_revision:' || NEW.revision_id || ':maintenance:') AND left(NEW.idempotency_key, char_length('agent_revision:' || NEW.revision_id || ':maintenance:')) = 'agent_revision:' || NEW.revision_id || ':maintenance:')))))
    OR (NEW.work_kind = 'provisioning' AND NEW.agent_id IS NULL AND NEW.revision_id IS NULL
      AND NEW.namespace_target IS NULL AND NEW.agent_target IS NULL
      AND NEW.idempotency_key ~ '^agent_provisioning:prv_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}:attempt:[1-9][0-9]{0,8}$'), false) THEN
    RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'controller_work_shape',
      MESSAGE = 'controller_work_shape: the work item shape or idempotency key is invalid';
  END IF;
  RETURN NEW;
END $$;

CREATE TABLE occ.agent_provisioning (
  id text PRIMARY KEY CHECK (id ~ '^prv_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'),
  namespace_id text NOT NULL REFERENCES occ.namespaces (id) ON UPDATE RESTRICT ON DELETE RESTRICT,
  actor_id text NOT NULL CHECK (char_length(actor_id) BETWEEN 1 AND 200),
  request_id text NOT NULL CHECK (request_id ~ '^req_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'),
  fingerprint text NOT NULL CHECK (fingerprint ~ '^[0-9a-f]{64}$'),
  spec jsonb NOT NULL CHECK (jsonb_typeof(spec) = 'object'),
  status text NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed')),
  phase text NOT NULL CHECK (phase IN ('admitted', 'configuration', 'transport', 'handoff')),
  attempt_count bigint NOT NULL CHECK (attempt_count >= 0),
  run bigint NOT NULL CHECK (run >= 1),
  planned_configuration_id text NOT NULL CHECK (planned_configuration_id ~ '^cfg_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'),
  planned_agent_id text NOT NULL CHECK (planned_agent_id ~ '^agt_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'),
  configuration_id text CHECK (configuration_id IS NULL OR configuration_id = planned_configuration_id),
  agent_id text CHECK (agent_id IS NULL OR agent_id = planned_agent_id),
  revision_id text CHECK (revision_id IS NULL OR revision_id ~ '^rev_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'),
  error_code text CHECK (error_code ~ '^[A-Z0-9_]{1,64}$'),
  error_message text CHECK (char_length(error_message) BETWEEN 1 AND 256),
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  CONSTRAINT agent_provisioning_error_when_failed CHECK (
    (status = 'failed') = (error_code IS NOT NULL) AND (error_code IS NULL) = (error_message IS NULL)),
  CONSTRAINT agent_provisioning_succeeded_with_revision CHECK (
    status <> 'succeeded' OR (configuration_id IS NOT NULL AND agent_id IS NOT NULL AND revision_id IS NOT NULL)),
  UNIQUE (namespace_id, actor_id, request_id)
);
CREATE TRIGGER agent_provisioning_identity_is_immutable
  BEFORE UPDATE OF id, namespace_id, actor_id, request_id, fingerprint, spec, planned_configuration_id,
    planned_agent_id, created_at ON occ.agent_provisioning
  FOR EACH ROW EXECUTE FUNCTION occ.reject_row_mutation('agent_provisioning_identity_is_immutable');
