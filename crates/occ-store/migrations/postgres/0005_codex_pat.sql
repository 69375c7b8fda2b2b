-- harnessAuth method `codex_pat`: a Codex access token held in a Secret of the Agent's own
-- Namespace, referenced through harness_auth_secret_id exactly like `api_key`.
CREATE OR REPLACE FUNCTION occ.check_agent_harness_auth() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, occ AS $$
BEGIN
  IF NOT (NEW.harness_auth IS NULL OR COALESCE(jsonb_typeof(NEW.harness_auth) = 'object'
    AND NEW.harness_auth->>'method' IN ('runtime', 'api_key', 'codex_pat', 'chatgpt_service_account'), false)) THEN
    RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'agents_harness_auth_check',
      MESSAGE = 'agents_harness_auth_check: unknown harness auth method';
  END IF;
  IF NOT COALESCE(
    NEW.harness_auth_secret_id IS NOT DISTINCT FROM (CASE WHEN NEW.harness_auth->>'method' IN ('api_key', 'codex_pat')
      AND NEW.harness_auth->'source'->>'namespaceId' = NEW.namespace_id THEN NEW.harness_auth->'source'->>'id' END)
    AND NEW.harness_auth_service_account_id IS NOT DISTINCT FROM (CASE WHEN NEW.harness_auth->>'method' =
      'chatgpt_service_account' THEN NEW.harness_auth->>'serviceAccountId' END)
    AND (NEW.harness_auth->>'method' IS NULL OR NEW.harness_auth->>'method' NOT IN ('api_key', 'codex_pat')
      OR NEW.harness_auth_secret_id IS NOT NULL), false) THEN
    RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'agents_harness_auth_references',
      MESSAGE = 'agents_harness_auth_references: reference columns disagree with harness_auth';
  END IF;
  RETURN NEW;
END $$;
