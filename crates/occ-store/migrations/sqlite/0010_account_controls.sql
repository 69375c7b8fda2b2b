-- Account controls: a version every administrative change advances (callers send the version
-- they read; a stale one is refused), and whether an administrator disabled the account. A
-- disabled account signs in no more, its sessions are gone and no stored session of it
-- authenticates, and its principal has no policy (work it queued is no longer authorized).
ALTER TABLE users ADD COLUMN version INTEGER NOT NULL DEFAULT 1 CHECK (version BETWEEN 1 AND 2147483647);
ALTER TABLE users ADD COLUMN disabled_at TEXT
  CHECK (disabled_at IS NULL OR disabled_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z');
