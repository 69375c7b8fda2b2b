//! Authentication (service keys, sign-in sessions), password sign-in with rate limiting,
//! accounts, and service-key issuance with the coverage rule.
//!
//! Credentials are never stored: service keys and session tokens as SHA-256 hex, passwords as
//! argon2id PHC strings. Keys are compared in constant time.

use std::sync::Arc;
use std::time::Duration;

use argon2::Argon2;
use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use occ_core::audit::AuditKind;
use occ_core::authz::{AuthMethod, Caller, GrantScope, ResourceRef, StandIns, covers};
use occ_core::iam::{AccessBinding, Identity, IdentityKind, ServiceKey, Session, UserAccount};
use occ_core::{AdmissionDecisionId, Error, ErrorCode, IamId, NamespaceId, RequestId, Timestamp};
use occ_store::iam::PolicySnapshot;
use occ_store::{Authorized, Tx};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::authorization::{audit_in_own_transaction, found};
use crate::{Controller, Request};

/// Prefix of every service key.
pub const SERVICE_KEY_PREFIX: &str = "occ_";
/// Default service key lifetime (30 days).
pub const DEFAULT_KEY_TTL: Duration = Duration::from_secs(30 * 24 * 3600);
/// Bounds of `expiresIn`, in seconds.
pub const KEY_TTL_RANGE: (i64, i64) = (86_400, 31_536_000);
/// Password length bounds, in characters.
pub const PASSWORD_CHARS: (usize, usize) = (12, 128);

/// SHA-256 hex of a credential.
pub fn credential_hash(credential: &str) -> String {
    hex::encode(Sha256::digest(credential.as_bytes()))
}

/// A fresh random token: 32 bytes, base64url without padding.
pub fn random_token() -> String {
    let bytes: [u8; 32] = rand::random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A fresh service key (`occ_` + 64 hex characters).
pub fn new_service_key() -> String {
    let bytes: [u8; 32] = rand::random();
    format!("{SERVICE_KEY_PREFIX}{}", hex::encode(bytes))
}

/// Hashes a password with argon2id (blocking; call from a blocking thread).
pub fn hash_password(password: &str) -> Result<String, Error> {
    Argon2::default()
        .hash_password(password.as_bytes())
        .map(|h| h.to_string())
        .map_err(|e| Error::internal(format!("password hashing: {e}")))
}

fn verify_password(password: &str, phc: &str) -> bool {
    PasswordHash::new(phc).is_ok_and(|h| {
        Argon2::default()
            .verify_password(password.as_bytes(), &h)
            .is_ok()
    })
}

/// A hash of a password nobody has, so unknown accounts cost the same as known ones.
fn decoy_hash() -> &'static str {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DECOY.get_or_init(|| hash_password("decoy password that matches nothing").unwrap_or_default())
}

/// A caller, authenticated, with the session (for session callers).
#[derive(Debug, Clone)]
pub struct Authenticated {
    /// The caller (private: only authentication makes one).
    caller: Caller,
    /// The caller's policy as read while authenticating (key callers), reused by read-only
    /// operations of this request instead of a second read.
    policy: Option<Arc<PolicySnapshot>>,
    /// The human account, for session callers.
    pub user: Option<UserAccount>,
    /// The session, for session callers.
    pub session: Option<Session>,
}

impl Authenticated {
    /// The caller.
    pub fn caller(&self) -> &Caller {
        &self.caller
    }

    /// The controller request for this caller, under the HTTP request's id.
    pub fn request(&self, id: RequestId) -> Request {
        Request {
            id,
            caller: self.caller.clone(),
            policy: self.policy.clone(),
        }
    }
}

/// A newly issued service key: the plaintext exists only here.
#[derive(Clone)]
pub struct IssuedKey {
    /// Public metadata.
    pub key: ServiceKey,
    /// The plaintext, shown once.
    pub plaintext: String,
}

impl std::fmt::Debug for IssuedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedKey")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

/// The result of a successful sign-in.
#[derive(Clone)]
pub struct SignedIn {
    /// The cookie value (shown once; stored only hashed).
    pub token: String,
    /// The session.
    pub session: Session,
    /// The account.
    pub user: UserAccount,
}

/// A request to create a human account.
#[derive(Debug, Clone)]
pub struct AccountInput {
    /// Email (normalized to lowercase).
    pub email: String,
    /// Password (12..128 characters).
    pub password: String,
    /// Display name.
    pub name: Option<String>,
    /// An Installation-scoped Role to bind.
    pub role_id: Option<IamId>,
}

/// A request to issue a service key.
#[derive(Debug, Clone)]
pub struct ServiceKeyInput {
    /// The service principal.
    pub service_principal_id: IamId,
    /// Restrict the key to one Namespace.
    pub namespace_id: Option<NamespaceId>,
    /// 1..32 characters.
    pub name: String,
    /// Lifetime in seconds.
    pub expires_in: Option<i64>,
}

/// Whose grants the coverage rule compares with the caller's.
#[derive(Debug, Clone, Copy)]
pub(crate) enum GrantHolder<'a> {
    /// A service principal's.
    ServicePrincipal(&'a IamId),
    /// A person's account's principal.
    Account(&'a UserAccount),
}

impl GrantHolder<'_> {
    fn principal(&self) -> &IamId {
        match self {
            GrantHolder::ServicePrincipal(id) => id,
            GrantHolder::Account(user) => &user.principal_id,
        }
    }
}

pub(crate) fn unauthenticated() -> Error {
    Error::unauthenticated()
}

impl Controller {
    /// Authenticates an `x-api-key` value. Any failure is 401 and never falls back to a cookie.
    pub async fn authenticate_key(&self, presented: &str) -> Result<Authenticated, Error> {
        if !presented.starts_with(SERVICE_KEY_PREFIX) || presented.len() > 200 {
            return Err(unauthenticated());
        }
        let hash = credential_hash(presented);
        let mut tx = self.store.begin_read().await?;
        let Some((key, stored, policy)) = tx.service_key_with_policy(&hash).await? else {
            return Err(unauthenticated());
        };
        drop(tx);
        if !bool::from(stored.as_bytes().ct_eq(hash.as_bytes()))
            || key.expires_at <= Timestamp::now()
        {
            return Err(unauthenticated());
        }
        let usable = policy.identity.as_ref().is_some_and(|i| {
            i.kind == IdentityKind::ServicePrincipal
                && i.agent_id.is_none()
                && (i.namespace_id.is_none() || i.namespace_id == key.namespace_id)
        });
        if !usable {
            return Err(unauthenticated());
        }
        Ok(Authenticated {
            caller: Caller {
                principal_id: key.service_principal_id.clone(),
                method: AuthMethod::ApiKey,
                key_namespace: key.namespace_id.clone(),
                session_id: None,
                key_id: Some(key.id.clone()),
                admission_id: AdmissionDecisionId::generate(),
            },
            policy: Some(Arc::new(policy)),
            user: None,
            session: None,
        })
    }

    /// Authenticates a session cookie token; `None` when it names no live session.
    pub async fn authenticate_session(&self, token: &str) -> Result<Option<Authenticated>, Error> {
        if token.is_empty() || token.len() > 200 {
            return Ok(None);
        }
        let mut tx = self.store.begin_read().await?;
        let session = tx
            .session_by_token_hash(&credential_hash(token), Timestamp::now())
            .await?;
        Ok(session.map(|(session, user)| Authenticated {
            caller: Caller {
                principal_id: user.principal_id.clone(),
                method: AuthMethod::Session,
                key_namespace: None,
                session_id: Some(session.id.clone()),
                key_id: None,
                admission_id: AdmissionDecisionId::generate(),
            },
            policy: None,
            user: Some(user),
            session: Some(session),
        }))
    }

    /// Authenticates a live session by its id (a credential derived from a session, such as
    /// the Control UI's Agent-origin pass, names it); `None` when it ended or expired.
    pub(crate) async fn authenticate_session_id(
        &self,
        session_id: &str,
    ) -> Result<Option<Authenticated>, Error> {
        let mut tx = self.store.begin_read().await?;
        let session = tx.session_by_id(session_id, Timestamp::now()).await?;
        Ok(session.map(|(session, user)| Authenticated {
            caller: Caller {
                principal_id: user.principal_id.clone(),
                method: AuthMethod::Session,
                key_namespace: None,
                session_id: Some(session.id.clone()),
                key_id: None,
                admission_id: AdmissionDecisionId::generate(),
            },
            policy: None,
            user: Some(user),
            session: Some(session),
        }))
    }

    /// A stable, non-credential key of a session (HMAC of its id).
    pub fn session_key(&self, session: &Session) -> String {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.settings.auth_secret)
            .expect("HMAC takes any key length");
        mac.update(session.id.as_bytes());
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
    }

    /// Password sign-in. Wrong email and wrong password are indistinguishable (401); the bounds
    /// of [`crate::sign_in_limit`] answer 429 with `Retry-After` (an attempt takes its place
    /// before its password is verified).
    pub async fn sign_in(&self, email: &str, password: &str) -> Result<SignedIn, Error> {
        let email = email.trim().to_lowercase();
        let attempt = self.sign_in_limiter.reserve(&email)?;
        let mut tx = self.store.begin_read().await?;
        let account = tx.user_by_email(&email).await?;
        drop(tx);
        let (phc, user) = match &account {
            Some((user, phc)) => (phc.clone(), Some(user.clone())),
            None => (decoy_hash().to_owned(), None),
        };
        let password = password.to_owned();
        let ok = tokio::task::spawn_blocking(move || verify_password(&password, &phc))
            .await
            .map_err(|e| Error::internal(format!("password check: {e}")))?;
        // A disabled account is refused like a wrong password (its hash was still checked).
        let Some(user) = user.filter(|u| ok && u.disabled_at.is_none()) else {
            attempt.failed();
            return Err(Error::new(
                ErrorCode::Unauthenticated,
                "The email or password is incorrect",
            ));
        };
        attempt.succeeded();
        let now = Timestamp::now();
        let session = Session {
            id: format!("ses_{}", uuid::Uuid::new_v4()),
            user_id: user.id.clone(),
            expires_at: now.plus(self.settings.session_ttl),
            created_at: now,
        };
        let token = random_token();
        let mut tx = self.begin_session_change().await?;
        tx.session_insert(&session, &credential_hash(&token))
            .await?;
        let _ = tx.session_delete_expired(now).await;
        tx.commit().await?;
        Ok(SignedIn {
            token,
            session,
            user,
        })
    }

    /// Ends a session.
    pub async fn sign_out(&self, session_id: &str) -> Result<(), Error> {
        let mut tx = self.begin_session_change().await?;
        tx.session_delete(session_id).await?;
        tx.commit().await?;
        self.session_ends.ended(session_id);
        self.recent_admissions.forget_session(session_id);
        Ok(())
    }

    /// A transaction for sign-in sessions: the credential itself (a verified password, the
    /// session being ended) is the authority, there is no caller to authorize, and sessions are
    /// not resources (the bare [`Tx`] has no admission mutators).
    #[expect(
        clippy::disallowed_methods,
        reason = "sign-in and sign-out write sessions, which a credential authorizes, not a decision"
    )]
    async fn begin_session_change(&self) -> Result<Tx, Error> {
        Ok(self.store.begin().await?)
    }

    /// Records the exchange of a Control UI launch ticket by its nonce (its SHA-256), until
    /// `expires_at`; false when it was exchanged before, on any API process. Like sign-in, the
    /// signed ticket is the authority: no caller to authorize.
    pub(crate) async fn ticket_redeemed_once(
        &self,
        nonce: &str,
        expires_at: Timestamp,
    ) -> Result<bool, Error> {
        let nonce_hash = hex::encode(Sha256::digest(nonce.as_bytes()));
        let mut tx = self.begin_session_change().await?;
        let first = tx
            .ticket_redeem(&nonce_hash, expires_at, Timestamp::now())
            .await?;
        tx.commit().await?;
        Ok(first)
    }

    /// Creates a human account (session callers holding `installation:administer` only).
    pub async fn account_create(
        &self,
        req: &Request,
        input: AccountInput,
    ) -> Result<UserAccount, Error> {
        if req.caller.method != AuthMethod::Session {
            return Err(unauthenticated());
        }
        let (mut tx, installation) = self
            .write_administering(req, "openclaw.auth.accounts.create")
            .await?;
        let target = ResourceRef::installation(&installation.id);
        let email = input.email.trim().to_lowercase();
        let role = match &input.role_id {
            None => None,
            Some(id) => match tx.role_get(id).await? {
                Some(r) if r.namespace_id.is_none() => Some(r),
                _ => {
                    return Err(Error::invalid_field(
                        "/roleId",
                        occ_core::DetailCode::InvalidValue,
                        "The request is invalid: /roleId must name an Installation-scoped Role",
                    ));
                }
            },
        };
        if tx.user_by_email(&email).await?.is_some() {
            return Err(Error::conflict("An account with this email already exists"));
        }
        let now = Timestamp::now();
        let user_id = IamId::generate_user();
        let principal = Identity {
            id: IamId::generate_principal(),
            kind: IdentityKind::Principal,
            namespace_id: None,
            agent_id: None,
            issuer: Some(format!("occ:installation:{}:password", installation.id)),
            subject: Some(user_id.to_string()),
            created_at: now,
        };
        let user = UserAccount {
            id: user_id,
            email,
            name: input.name.clone().unwrap_or_else(|| input.email.clone()),
            principal_id: principal.id.clone(),
            version: 1,
            disabled_at: None,
            created_at: now,
        };
        let password = input.password.clone();
        let phc = tokio::task::spawn_blocking(move || hash_password(&password))
            .await
            .map_err(|e| Error::internal(format!("password hashing: {e}")))??;
        tx.identity_insert(&principal).await?;
        tx.user_insert(&user, &phc).await.map_err(|e| match e {
            occ_store::StoreError::Conflict { .. } => {
                Error::conflict("An account with this email already exists")
            }
            other => other.into(),
        })?;
        if let Some(role) = &role {
            tx.binding_insert(&AccessBinding {
                id: IamId::generate_binding(""),
                namespace_id: None,
                subject_id: principal.id.clone(),
                role_id: role.id.clone(),
                resource: None,
                runtime_role: None,
                created_at: now,
            })
            .await?;
        }
        let event = self
            .mutation(req, "openclaw.auth.accounts.create", &target, tx.evidence())
            .detail("accountId", user.id.as_str())
            .detail("principalId", principal.id.as_str())
            .detail("roleId", role.as_ref().map(|r| r.id.to_string()));
        tx.audit_append(&event).await?;
        tx.commit().await?;
        Ok(user)
    }

    /// Issues a service key for a non-Agent service principal. The caller must administer the
    /// Installation and hold every grant of the target principal ("coverage").
    pub async fn service_key_issue(
        &self,
        req: &Request,
        input: ServiceKeyInput,
    ) -> Result<IssuedKey, Error> {
        let (mut tx, installation) = self
            .write_administering(req, "openclaw.auth.service-keys.create")
            .await?;
        let target = ResourceRef::installation(&installation.id);
        let sp = tx.identity_get(&input.service_principal_id).await?;
        let bad_sp = |why: &str| {
            Error::invalid_field(
                "/servicePrincipalId",
                occ_core::DetailCode::InvalidValue,
                format!("The request is invalid: /servicePrincipalId {why}"),
            )
        };
        let sp = match sp {
            None => return Err(bad_sp("does not name a service principal")),
            Some(i) if i.kind != IdentityKind::ServicePrincipal => {
                return Err(bad_sp("does not name a service principal"));
            }
            Some(i) if i.agent_id.is_some() => {
                return Err(bad_sp("names an Agent-owned service principal"));
            }
            Some(i) => i,
        };
        if tx
            .service_principal_get(&sp.id)
            .await?
            .is_some_and(|p| p.disabled_at.is_some())
        {
            return Err(Error::conflict(
                "The service principal is disabled; enable it before issuing it a key",
            ));
        }
        if let Some(scope) = &sp.namespace_id
            && input.namespace_id.as_ref() != Some(scope)
        {
            return Err(Error::invalid_field(
                "/namespaceId",
                occ_core::DetailCode::InvalidValue,
                "The request is invalid: /namespaceId must be the service principal's Namespace",
            ));
        }
        if let Some(ns) = &input.namespace_id {
            match tx.namespace_get(ns).await? {
                Some(n) if n.deleted_at.is_none() => {}
                _ => return Err(Error::not_found()),
            }
        }
        let mut tx = self
            .require_coverage(
                tx,
                req,
                &sp.id,
                &target,
                "openclaw.auth.service-keys.create",
            )
            .await?;
        let ttl = input
            .expires_in
            .map(|s| Duration::from_secs(s.unsigned_abs()))
            .unwrap_or(DEFAULT_KEY_TTL);
        let now = Timestamp::now();
        let issued = IssuedKey {
            key: ServiceKey {
                id: IamId::generate_service_key(),
                service_principal_id: sp.id.clone(),
                namespace_id: input.namespace_id.clone(),
                name: input.name.clone(),
                expires_at: now.plus(ttl),
                created_at: now,
            },
            plaintext: new_service_key(),
        };
        tx.service_key_insert(&issued.key, &credential_hash(&issued.plaintext))
            .await?;
        let event = self
            .mutation(
                req,
                "openclaw.auth.service-keys.create",
                &target,
                tx.evidence(),
            )
            .detail("serviceKeyId", issued.key.id.as_str())
            .detail("servicePrincipalId", sp.id.as_str());
        tx.audit_append(&event).await?;
        tx.commit().await?;
        Ok(issued)
    }

    /// Revokes a service key (same authority as issuing one).
    pub async fn service_key_revoke(&self, req: &Request, key_id: &IamId) -> Result<(), Error> {
        let (mut tx, installation) = self
            .write_administering(req, "openclaw.auth.service-keys.revoke")
            .await?;
        let target = ResourceRef::installation(&installation.id);
        let key = found(tx.service_key_get(key_id).await?)?;
        let mut tx = self
            .require_coverage(
                tx,
                req,
                &key.service_principal_id,
                &target,
                "openclaw.auth.service-keys.revoke",
            )
            .await?;
        tx.service_key_delete(key_id).await?;
        let event = self
            .mutation(
                req,
                "openclaw.auth.service-keys.revoke",
                &target,
                tx.evidence(),
            )
            .detail("serviceKeyId", key_id.as_str());
        tx.audit_append(&event).await?;
        Ok(tx.commit().await?)
    }

    /// Every grant of the service principal `target` must be matched by a grant the caller
    /// holds at the same or a broader scope (`agent:administer` stands in for
    /// `agent:read_logs`).
    pub(crate) async fn require_coverage(
        &self,
        tx: Authorized,
        req: &Request,
        target: &IamId,
        installation: &ResourceRef,
        operation: &str,
    ) -> Result<Authorized, Error> {
        self.require_grants_covered(
            tx,
            req,
            GrantHolder::ServicePrincipal(target),
            installation,
            operation,
        )
        .await
    }

    /// Every grant `holder` has (disabled or not) must be matched by one the caller holds at
    /// the same or a broader scope; else a coverage denial naming the holder.
    pub(crate) async fn require_grants_covered(
        &self,
        mut tx: Authorized,
        req: &Request,
        holder: GrantHolder<'_>,
        resource: &ResourceRef,
        operation: &str,
    ) -> Result<Authorized, Error> {
        let theirs = tx.grants_held(holder.principal()).await?;
        let mine = tx.policy_snapshot(&req.caller.principal_id).await?;
        let covered = theirs.iter().all(|grant| {
            grant.role.permissions.iter().all(|p| {
                covers(
                    mine.grants.iter().map(|g| (&g.binding, &g.role)),
                    *p,
                    GrantScope::of(&grant.binding),
                    StandIns::LogReads,
                )
            })
        });
        if covered {
            return Ok(tx);
        }
        drop(tx);
        let (detail, message) = match holder {
            GrantHolder::ServicePrincipal(id) => (
                ("servicePrincipalId", id.as_str()),
                "The caller does not hold every grant of the target service principal",
            ),
            GrantHolder::Account(user) => (
                ("userId", user.id.as_str()),
                "The caller does not hold every grant of the target account's principal",
            ),
        };
        Err(self
            .coverage_denial(req, operation, resource, detail, message)
            .await)
    }

    /// The refusal of a grant the caller's own grants do not cover: a durable denial record
    /// (written in its own transaction: the operation's has been rolled back, and SQLite has a
    /// single writer), then 403.
    pub(crate) async fn coverage_denial(
        &self,
        req: &Request,
        operation: &str,
        resource: &ResourceRef,
        (detail, value): (&str, &str),
        message: &str,
    ) -> Error {
        let event = self
            .event(
                req,
                AuditKind::AuthorizationDenial,
                operation,
                resource,
                occ_core::audit::AuditOutcome::Denied,
            )
            .reason_code("AUTHORIZATION_DENIED")
            .metadata("decisionReason", "coverage")
            .detail(detail, value);
        if let Err(e) = audit_in_own_transaction(&self.store, &event).await {
            return Error::unavailable(e.to_string());
        }
        Error::new(ErrorCode::Forbidden, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_tokens_and_hashes() {
        let k = new_service_key();
        assert!(k.starts_with("occ_") && k.len() == 68);
        assert_ne!(new_service_key(), k);
        assert_eq!(credential_hash("x").len(), 64);
        assert_eq!(random_token().len(), 43);
        let phc = hash_password("correct horse battery").unwrap();
        assert!(verify_password("correct horse battery", &phc));
        assert!(!verify_password("wrong", &phc));
        assert!(!verify_password("x", "garbage"));
    }
}
