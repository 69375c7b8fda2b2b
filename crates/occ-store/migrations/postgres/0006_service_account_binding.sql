-- A ServiceAccount's private binding (JSON, never returned): the upstream account a Backend's
-- ServiceAccount Driver made for it and the credential issued to it (the provider's ids and the
-- Secret Driver locator of the token, never the token), or a native credential reference.
ALTER TABLE occ.service_accounts ADD COLUMN binding jsonb
  CHECK (binding IS NULL OR (jsonb_typeof(binding) = 'object' AND binding->>'kind' IN ('managed', 'native')));

-- A revision of a `chatgpt_service_account` Agent freezes which issued credential it runs with
-- (`account_credential`: the account, the Backend, the workspace and the provider's credential
-- id; never a locator or a value), for the account its harnessAuth names.
CREATE OR REPLACE FUNCTION occ.check_admitted_spec() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, occ AS $$
BEGIN
  IF NOT COALESCE(jsonb_typeof(NEW.admitted_spec) = 'object'
     AND NEW.admitted_spec ?& ARRAY['configuration_id', 'configuration_kind', 'configuration_generation',
                       'configuration', 'harness', 'compute', 'service_principal_id', 'harness_auth']
     AND (NEW.admitted_spec - ARRAY['configuration_id', 'configuration_kind', 'configuration_generation',
                       'configuration', 'harness', 'compute', 'service_principal_id', 'harness_auth',
                       'secret_driver_id', 'secret_bindings', 'account_credential']) = '{}'::jsonb
     AND jsonb_typeof(NEW.admitted_spec->'configuration_id') = 'string'
     AND NEW.admitted_spec->>'configuration_id' ~ '^cfg_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'
     AND NEW.admitted_spec->>'configuration_kind' = 'agent'
     AND jsonb_typeof(NEW.admitted_spec->'configuration_generation') = 'number'
     AND (NEW.admitted_spec->>'configuration_generation')::numeric BETWEEN 1 AND 9007199254740991
     AND jsonb_typeof(NEW.admitted_spec->'configuration') = 'object'
     AND jsonb_typeof(NEW.admitted_spec->'harness') = 'object'
     AND jsonb_typeof(NEW.admitted_spec->'harness'->'id') = 'string'
     AND jsonb_typeof(NEW.admitted_spec->'harness'->'version') = 'string'
     AND NEW.admitted_spec->'harness'->>'mode' IN ('embedded', 'dedicated')
     AND jsonb_typeof(NEW.admitted_spec->'compute') = 'object'
     AND jsonb_typeof(NEW.admitted_spec->'compute'->'id') = 'string'
     AND jsonb_typeof(NEW.admitted_spec->'compute'->'implementation') = 'string'
     AND jsonb_typeof(NEW.admitted_spec->'service_principal_id') = 'string'
     AND jsonb_typeof(NEW.admitted_spec->'harness_auth') IN ('object', 'null')
     AND (NOT NEW.admitted_spec ? 'secret_driver_id' OR jsonb_typeof(NEW.admitted_spec->'secret_driver_id') = 'string')
     AND (NOT NEW.admitted_spec ? 'secret_bindings' OR jsonb_typeof(NEW.admitted_spec->'secret_bindings') = 'object')
     AND (NOT NEW.admitted_spec ? 'account_credential' OR (jsonb_typeof(NEW.admitted_spec->'account_credential') = 'object'
          AND NEW.admitted_spec->'harness_auth'->>'method' = 'chatgpt_service_account'
          AND NEW.admitted_spec->'account_credential'->>'serviceAccountId' = NEW.admitted_spec->'harness_auth'->>'serviceAccountId')), false) THEN
    RAISE EXCEPTION USING ERRCODE = 'check_violation', CONSTRAINT = 'agent_revisions_admitted_spec_shape',
      MESSAGE = 'agent_revisions_admitted_spec_shape: the admitted snapshot has the wrong shape';
  END IF;
  RETURN NEW;
END $$;
