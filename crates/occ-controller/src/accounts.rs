//! Account administration (`/api/auth/accounts/{userId}`, the reference's account controls):
//! read an account, disable it, enable it, end all its sessions. People only (a human session
//! with the console's Origin; service keys are refused as for account creation), holding
//! `installation:administer` and every grant of the target account's principal (the coverage
//! rule). Each change names the version the caller read and advances it, so two administrators
//! acting on what they each saw cannot both win. Ending sessions takes effect at once in every
//! API process: sessions are looked up in the store on every request, and a disabled account's
//! stored sessions (and its principal's policy) stop counting even before they are deleted.

use occ_core::authz::{AuthMethod, ResourceRef};
use occ_core::iam::UserAccount;
use occ_core::{Error, IamId, Timestamp};
use occ_store::Tx;

use crate::auth::{GrantHolder, unauthenticated};
use crate::authorization::found;
use crate::{Controller, Request};

/// An administrative change of an account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccountChange {
    /// Sign-in refused, every session ended (the reference's `disableAuthAccount`).
    Disable,
    /// Sign-in allowed again (`enableAuthAccount`); nobody is signed in by it.
    Enable,
    /// Every session ended; signing in again works (`revokeAuthAccountSessions`).
    RevokeSessions,
}

impl AccountChange {
    fn audit_action(self) -> &'static str {
        match self {
            AccountChange::Disable => "openclaw.auth.accounts.disable",
            AccountChange::Enable => "openclaw.auth.accounts.enable",
            AccountChange::RevokeSessions => "openclaw.auth.accounts.revoke",
        }
    }
}

fn people_only(req: &Request) -> Result<(), Error> {
    match req.caller.method {
        AuthMethod::Session => Ok(()),
        AuthMethod::ApiKey | AuthMethod::Work => Err(unauthenticated()),
    }
}

impl Controller {
    /// Whether this request may reach account administration at all: only a person's session
    /// (a service key gets 401 before its body is read).
    pub fn account_administration_caller(&self, req: &Request) -> Result<(), Error> {
        people_only(req)
    }

    /// Every account (an occ extension, for the console's Accounts page).
    pub async fn account_list(&self, req: &Request) -> Result<Vec<UserAccount>, Error> {
        let mut tx = self
            .account_read(req, "openclaw.auth.accounts.list")
            .await?;
        Ok(tx.user_list().await?)
    }

    /// One account: its principal, version and whether it is disabled.
    pub async fn account_get(&self, req: &Request, id: &IamId) -> Result<UserAccount, Error> {
        let mut tx = self
            .account_read(req, "openclaw.auth.accounts.read")
            .await?;
        found(tx.user_get(id).await?)
    }

    /// A read of accounts: a person administering the Installation.
    async fn account_read(&self, req: &Request, audit_action: &str) -> Result<Tx, Error> {
        people_only(req)?;
        let (tx, _) = self.read_administering(req, audit_action).await?;
        Ok(tx)
    }

    /// Applies `change` to the account if it is still at `expected_version`; returns it as
    /// changed. A stale version, a change that does not apply (disabling a disabled account,
    /// enabling an enabled one, ending a disabled account's sessions) and disabling oneself
    /// are 409.
    pub async fn account_change(
        &self,
        req: &Request,
        id: &IamId,
        expected_version: i64,
        change: AccountChange,
    ) -> Result<UserAccount, Error> {
        people_only(req)?;
        let operation = change.audit_action();
        let (mut tx, installation) = self.write_administering(req, operation).await?;
        let user = found(tx.user_get(id).await?)?;
        if user.version != expected_version {
            return Err(Error::conflict(format!(
                "The account changed since it was read (it is at version {}); read it again",
                user.version
            )));
        }
        let disabled = user.disabled_at.is_some();
        let refusal = match change {
            AccountChange::Disable if disabled => Some("The account is already disabled"),
            AccountChange::Disable if user.principal_id == req.caller.principal_id => {
                Some("An administrator cannot disable their own account")
            }
            AccountChange::Enable if !disabled => Some("The account is not disabled"),
            AccountChange::RevokeSessions if disabled => {
                Some("The account is disabled; it has no sessions")
            }
            _ => None,
        };
        if let Some(why) = refusal {
            return Err(Error::conflict(why));
        }
        let target = ResourceRef::installation(&installation.id);
        let mut tx = self
            .require_grants_covered(tx, req, GrantHolder::Account(&user), &target, operation)
            .await?;
        let (disabled_at, end_sessions) = match change {
            AccountChange::Disable => (Some(Timestamp::now()), true),
            AccountChange::Enable => (None, false),
            AccountChange::RevokeSessions => (None, true),
        };
        let changed = tx
            .account_change(id, expected_version, disabled_at, end_sessions)
            .await?
            .ok_or_else(|| Error::conflict("The account changed meanwhile; read it again"))?;
        let event = self
            .mutation(req, operation, &target, tx.evidence())
            .detail("userId", id.as_str())
            .detail("principalId", changed.principal_id.as_str())
            .detail("version", changed.version);
        tx.audit_append(&event).await?;
        tx.commit().await?;
        Ok(changed)
    }
}
