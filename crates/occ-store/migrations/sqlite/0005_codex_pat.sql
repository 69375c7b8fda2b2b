-- harnessAuth method `codex_pat`: a Codex access token held in a Secret of the Agent's own
-- Namespace, referenced through harness_auth_secret_id exactly like `api_key`.
--
-- The method list and the reference rule are CHECK constraints of `agents`. Rebuilding the table
-- would run the ON DELETE CASCADE of every revision when the old one is dropped (foreign keys
-- cannot be switched off inside the migration's transaction), so the constraint text is edited
-- in place, the documented way for changes that leave stored rows valid: every row the old
-- constraints accepted, the new ones accept. RESET reloads the schema on this connection; the
-- table created and dropped after it bumps the schema cookie so every other connection reloads.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET sql = replace(replace(replace(sql,
    'IN (''runtime'', ''api_key'', ''chatgpt_service_account'')',
    'IN (''runtime'', ''api_key'', ''codex_pat'', ''chatgpt_service_account'')'),
    'json_extract(harness_auth, ''$.method'') = ''api_key''
      AND json_extract(harness_auth, ''$.source.namespaceId'') = namespace_id',
    'json_extract(harness_auth, ''$.method'') IN (''api_key'', ''codex_pat'')
      AND json_extract(harness_auth, ''$.source.namespaceId'') = namespace_id'),
    'json_extract(harness_auth, ''$.method'') IS NOT ''api_key'' OR harness_auth_secret_id IS NOT NULL',
    'ifnull(json_extract(harness_auth, ''$.method''), '''') NOT IN (''api_key'', ''codex_pat'') OR harness_auth_secret_id IS NOT NULL')
  WHERE type = 'table' AND name = 'agents';
PRAGMA writable_schema = RESET;
CREATE TABLE schema_cookie_bump (x INTEGER) STRICT;
DROP TABLE schema_cookie_bump;
