-- A ServiceAccount's private binding (JSON, never returned): the upstream account a Backend's
-- ServiceAccount Driver made for it and the credential issued to it (the provider's ids and the
-- Secret Driver locator of the token, never the token), or a native credential reference.
ALTER TABLE service_accounts ADD COLUMN binding TEXT
  CHECK (binding IS NULL OR (json_valid(binding) AND json_type(binding) = 'object'
    AND json_extract(binding, '$.kind') IN ('managed', 'native')));

-- A revision of a `chatgpt_service_account` Agent freezes which issued credential it runs with
-- (`account_credential`: the account, the Backend, the workspace and the provider's credential
-- id; never a locator or a value), for the account its harnessAuth names. The admitted-spec
-- CHECK of `agent_revisions` is edited in place as in 0005 (rebuilding the table would cascade
-- to its dependants); every row the old constraint accepted, the new one accepts.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET sql = replace(replace(sql,
    '''$.secret_driver_id'', ''$.secret_bindings'') = ''{}''',
    '''$.secret_driver_id'', ''$.secret_bindings'', ''$.account_credential'') = ''{}'''),
    'json_type(admitted_spec, ''$.secret_bindings'') = ''object'')), 0))',
    'json_type(admitted_spec, ''$.secret_bindings'') = ''object'') AND (json_type(admitted_spec, ''$.account_credential'') IS NULL OR (json_type(admitted_spec, ''$.account_credential'') = ''object'' AND json_extract(admitted_spec, ''$.harness_auth.method'') = ''chatgpt_service_account'' AND json_extract(admitted_spec, ''$.account_credential.serviceAccountId'') = json_extract(admitted_spec, ''$.harness_auth.serviceAccountId'')))), 0))')
  WHERE type = 'table' AND name = 'agent_revisions';
PRAGMA writable_schema = RESET;
CREATE TABLE schema_cookie_bump (x INTEGER) STRICT;
DROP TABLE schema_cookie_bump;
