-- Control UI launch tickets already exchanged (the SHA-256 of each ticket's nonce, until the
-- ticket would have expired): a ticket opens an Agent origin once, whichever API process
-- redeems it.
CREATE TABLE occ.native_admin_ticket_redemptions (
  nonce_hash text PRIMARY KEY CHECK (nonce_hash ~ '^[0-9a-f]{64}$'),
  expires_at timestamptz NOT NULL
);
CREATE INDEX native_admin_ticket_redemptions_expiry ON occ.native_admin_ticket_redemptions (expires_at);
