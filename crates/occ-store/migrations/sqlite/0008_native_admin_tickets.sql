-- Control UI launch tickets already exchanged (the SHA-256 of each ticket's nonce, until the
-- ticket would have expired): a ticket opens an Agent origin once, whichever API process
-- redeems it.
CREATE TABLE native_admin_ticket_redemptions (
  nonce_hash TEXT PRIMARY KEY NOT NULL CHECK (length(nonce_hash) = 64 AND nonce_hash NOT GLOB '*[^0-9a-f]*'),
  expires_at TEXT NOT NULL CHECK (expires_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9]Z')
) STRICT;
CREATE INDEX native_admin_ticket_redemptions_expiry ON native_admin_ticket_redemptions (expires_at);
