//! Human accounts, sign-in sessions and service keys. Passwords are stored as argon2 PHC
//! strings, session tokens and service keys only as SHA-256 hashes; the store never sees a
//! plaintext credential.

use occ_core::authz::Action;
use occ_core::iam::{ServiceKey, Session, UserAccount};
use occ_core::{IamId, Timestamp};

use crate::db::{Row, sql};
use crate::{Authorized, StoreError, Tx};

fn user_from_row(r: &Row) -> Result<UserAccount, StoreError> {
    Ok(UserAccount {
        id: r.parse("id")?,
        email: r.text("email")?,
        name: r.text("name")?,
        principal_id: r.parse("principal_id")?,
        version: r.int("version")?,
        disabled_at: r.opt_time("disabled_at")?,
        created_at: r.time("created_at")?,
    })
}

fn key_from_row(r: &Row) -> Result<ServiceKey, StoreError> {
    Ok(ServiceKey {
        id: r.parse("id")?,
        service_principal_id: r.parse("service_principal_id")?,
        namespace_id: r.opt_parse("namespace_id")?,
        name: r.text("name")?,
        expires_at: r.time("expires_at")?,
        created_at: r.time("created_at")?,
    })
}

impl Tx {
    /// An account and its password hash, by (lowercased) email.
    pub async fn user_by_email(
        &mut self,
        email: &str,
    ) -> Result<Option<(UserAccount, String)>, StoreError> {
        let row = self
            .q(sql!("SELECT id, email, name, password_hash, principal_id, version, disabled_at, created_at FROM users WHERE email = $1"))
            .bind(email)
            .fetch_optional()
            .await?;
        row.map(|r| Ok((user_from_row(&r)?, r.text("password_hash")?)))
            .transpose()
    }

    /// An account by id.
    pub async fn user_get(&mut self, id: &IamId) -> Result<Option<UserAccount>, StoreError> {
        let row = self
            .q(sql!("SELECT id, email, name, principal_id, version, disabled_at, created_at FROM users WHERE id = $1"))
            .bind(id.as_str())
            .fetch_optional()
            .await?;
        row.as_ref().map(user_from_row).transpose()
    }

    /// Every account, oldest first.
    pub async fn user_list(&mut self) -> Result<Vec<UserAccount>, StoreError> {
        let rows = self
            .q(sql!("SELECT id, email, name, principal_id, version, disabled_at, created_at FROM users ORDER BY created_at, id"))
            .fetch_all()
            .await?;
        rows.iter().map(user_from_row).collect()
    }

    /// Inserts a session with the SHA-256 hex of its cookie token.
    pub async fn session_insert(
        &mut self,
        session: &Session,
        token_hash: &str,
    ) -> Result<(), StoreError> {
        self.q(sql!(
            "INSERT INTO sessions (id, token_hash, user_id, expires_at, created_at) VALUES ($1, $2, $3, $4, $5)"
        ))
        .bind(session.id.as_str())
        .bind(token_hash)
        .bind(session.user_id.as_str())
        .bind(session.expires_at)
        .bind(session.created_at)
        .execute()
        .await?;
        Ok(())
    }

    /// The unexpired session (and its account) whose token hashes to `token_hash`.
    pub async fn session_by_token_hash(
        &mut self,
        token_hash: &str,
        now: Timestamp,
    ) -> Result<Option<(Session, UserAccount)>, StoreError> {
        let row = self
            .q(sql!(
                "SELECT s.id AS session_id, s.user_id, s.expires_at, s.created_at AS session_created_at, \
                 u.id, u.email, u.name, u.principal_id, u.version, u.disabled_at, u.created_at \
                 FROM sessions s JOIN users u ON u.id = s.user_id \
                 WHERE s.token_hash = $1 AND s.expires_at > $2 AND u.disabled_at IS NULL"
            ))
            .bind(token_hash)
            .bind(now)
            .fetch_optional()
            .await?;
        row.map(|r| {
            Ok((
                Session {
                    id: r.text("session_id")?,
                    user_id: r.parse("user_id")?,
                    expires_at: r.time("expires_at")?,
                    created_at: r.time("session_created_at")?,
                },
                user_from_row(&r)?,
            ))
        })
        .transpose()
    }

    /// The unexpired session `id` (and its account): how a credential derived from a session
    /// (the Control UI's Agent-origin cookie) is checked against sign-out and expiry.
    pub async fn session_by_id(
        &mut self,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<(Session, UserAccount)>, StoreError> {
        let row = self
            .q(sql!(
                "SELECT s.id AS session_id, s.user_id, s.expires_at, s.created_at AS session_created_at, \
                 u.id, u.email, u.name, u.principal_id, u.version, u.disabled_at, u.created_at \
                 FROM sessions s JOIN users u ON u.id = s.user_id \
                 WHERE s.id = $1 AND s.expires_at > $2 AND u.disabled_at IS NULL"
            ))
            .bind(id)
            .bind(now)
            .fetch_optional()
            .await?;
        row.map(|r| {
            Ok((
                Session {
                    id: r.text("session_id")?,
                    user_id: r.parse("user_id")?,
                    expires_at: r.time("expires_at")?,
                    created_at: r.time("session_created_at")?,
                },
                user_from_row(&r)?,
            ))
        })
        .transpose()
    }

    /// Deletes a session (sign-out). Returns whether it existed.
    pub async fn session_delete(&mut self, id: &str) -> Result<bool, StoreError> {
        Ok(self
            .q(sql!("DELETE FROM sessions WHERE id = $1"))
            .bind(id)
            .execute()
            .await?
            == 1)
    }

    /// Deletes expired sessions; returns how many.
    pub async fn session_delete_expired(&mut self, now: Timestamp) -> Result<u64, StoreError> {
        self.q(sql!("DELETE FROM sessions WHERE expires_at <= $1"))
            .bind(now)
            .execute()
            .await
    }

    /// Records that the launch ticket whose nonce hashes to `nonce_hash` was exchanged, and
    /// forgets redemptions whose tickets expired by `now`. False when it was already exchanged.
    pub async fn ticket_redeem(
        &mut self,
        nonce_hash: &str,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.q(sql!(
            "DELETE FROM native_admin_ticket_redemptions WHERE expires_at <= $1"
        ))
        .bind(now)
        .execute()
        .await?;
        Ok(self
            .q(sql!(
                "INSERT INTO native_admin_ticket_redemptions (nonce_hash, expires_at) VALUES ($1, $2) \
                 ON CONFLICT (nonce_hash) DO NOTHING"
            ))
            .bind(nonce_hash)
            .bind(expires_at)
            .execute()
            .await?
            == 1)
    }

    /// A service key by id.
    pub async fn service_key_get(&mut self, id: &IamId) -> Result<Option<ServiceKey>, StoreError> {
        let row = self
            .q(sql!(
                "SELECT id, service_principal_id, namespace_id, name, expires_at, created_at FROM service_keys WHERE id = $1"
            ))
            .bind(id.as_str())
            .fetch_optional()
            .await?;
        row.as_ref().map(key_from_row).transpose()
    }
}

/// Admission mutators: reached from client operations, so they need the evidence of the
/// decision that allowed the operation (see [`Authorized`]).
impl Authorized {
    /// Inserts a human account with its password hash.
    pub async fn user_insert(
        &mut self,
        user: &UserAccount,
        password_hash: &str,
    ) -> Result<(), StoreError> {
        self.require_installation(Action::Administer)?;
        self.q(sql!(
            "INSERT INTO users (id, email, name, password_hash, principal_id, version, disabled_at, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
        ))
        .bind(user.id.as_str())
        .bind(user.email.as_str())
        .bind(user.name.as_str())
        .bind(password_hash)
        .bind(user.principal_id.as_str())
        .bind(user.version)
        .bind(user.disabled_at)
        .bind(user.created_at)
        .execute()
        .await?;
        Ok(())
    }

    /// An administrative change of an account, if it is still at `expected_version`: sets
    /// `disabled_at` (`Some` disables, `None` enables), advances the version, and (when
    /// `end_sessions`) deletes every session of the account. Returns the account as changed, or
    /// `None` when the version moved (or the account is gone) meanwhile.
    pub async fn account_change(
        &mut self,
        id: &IamId,
        expected_version: i64,
        disabled_at: Option<Timestamp>,
        end_sessions: bool,
    ) -> Result<Option<UserAccount>, StoreError> {
        self.require_installation(Action::Administer)?;
        let row = self
            .q(sql!(
                "UPDATE users SET version = version + 1, disabled_at = $3 WHERE id = $1 AND version = $2 \
                 RETURNING id, email, name, principal_id, version, disabled_at, created_at"
            ))
            .bind(id.as_str())
            .bind(expected_version)
            .bind(disabled_at)
            .fetch_optional()
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        if end_sessions {
            self.q(sql!("DELETE FROM sessions WHERE user_id = $1"))
                .bind(id.as_str())
                .execute()
                .await?;
        }
        Ok(Some(user_from_row(&row)?))
    }

    /// Inserts a service key with the SHA-256 hex of its plaintext.
    pub async fn service_key_insert(
        &mut self,
        key: &ServiceKey,
        key_hash: &str,
    ) -> Result<(), StoreError> {
        self.require_installation(Action::Administer)?;
        self.q(sql!(
            "INSERT INTO service_keys (id, service_principal_id, namespace_id, name, key_hash, expires_at, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)"
        ))
        .bind(key.id.as_str())
        .bind(key.service_principal_id.as_str())
        .bind(key.namespace_id.as_ref().map(|n| n.to_string()))
        .bind(key.name.as_str())
        .bind(key_hash)
        .bind(key.expires_at)
        .bind(key.created_at)
        .execute()
        .await?;
        Ok(())
    }

    /// Revokes (deletes) a service key. Returns whether it existed.
    pub async fn service_key_delete(&mut self, id: &IamId) -> Result<bool, StoreError> {
        self.require_installation(Action::Administer)?;
        Ok(self
            .q(sql!("DELETE FROM service_keys WHERE id = $1"))
            .bind(id.as_str())
            .execute()
            .await?
            == 1)
    }
}
