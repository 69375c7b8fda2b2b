-- Account controls: a version every administrative change advances (callers send the version
-- they read; a stale one is refused), and whether an administrator disabled the account. A
-- disabled account signs in no more, its sessions are gone and no stored session of it
-- authenticates, and its principal has no policy (work it queued is no longer authorized).
ALTER TABLE occ.users ADD COLUMN version bigint NOT NULL DEFAULT 1 CHECK (version BETWEEN 1 AND 2147483647);
ALTER TABLE occ.users ADD COLUMN disabled_at timestamptz;
