//! ServiceAccounts: the resource a `chatgpt_service_account` harness auth names. With a
//! Backend's ServiceAccount Driver each account is a provider account too, and
//! `POST …/credentials` issues it a credential whose value goes straight to the Secret Driver;
//! without one an account is native and may only carry a reference (`PATCH …/credential`). No
//! credential value is ever stored in the database, returned or audited.
//!
//! Provider calls never run inside a database transaction: an operation authorizes and checks
//! in one, calls the provider, then authorizes again and writes in a second; when that second
//! step fails, what the provider made is removed again (compensation), so nothing live upstream
//! is left without an owner in occ.

use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::resource::{
    IssuedCredential, ServiceAccount, ServiceAccountBinding, ServiceAccountCredentialKind,
};
use occ_core::work::{WorkKey, WorkState};
use occ_core::{Error, Name, NamespaceId, SecretId, ServiceAccountId, Timestamp};
use occ_drivers::service_account::{AccountDriver, AccountDriverError};
use occ_store::StoreError;

use crate::authorization::found;
use crate::namespaces::{live_namespace, require_accepting};
use crate::{Controller, Request};

impl Controller {
    /// ServiceAccounts of a Namespace the caller may read.
    pub async fn service_account_list(
        &self,
        req: &Request,
        ns: &NamespaceId,
    ) -> Result<Vec<ServiceAccount>, Error> {
        let (mut tx, _) = self
            .read_authorized(
                req,
                Action::Read,
                &ResourceRef::namespace(ns),
                "openclaw.service_accounts.list",
            )
            .await?;
        live_namespace(&mut tx, ns).await?;
        let all = tx.service_account_list(ns).await?;
        Self::readable(&mut tx, req, ns, ResourceKind::ServiceAccount, all, |s| {
            &s.id
        })
        .await
    }

    /// Creates a ServiceAccount: with a ServiceAccount Driver, its provider account first.
    pub async fn service_account_create(
        &self,
        req: &Request,
        ns: &NamespaceId,
        name: Name,
    ) -> Result<ServiceAccount, Error> {
        let collection = ResourceRef::collection(ResourceKind::ServiceAccount, ns);
        let authorize = || async {
            let mut tx = self
                .write_authorized(req, Action::Create, &collection, CREATE_AUDIT)
                .await?;
            let namespace = live_namespace(&mut tx, ns).await?;
            require_accepting(&namespace)?;
            if tx
                .service_account_list(ns)
                .await?
                .iter()
                .any(|s| s.name == name)
            {
                return Err(name_taken());
            }
            Ok::<_, Error>(tx)
        };
        let binding = match &self.accounts {
            None => None,
            Some(driver) => {
                drop(authorize().await?);
                let upstream = driver
                    .create_account(name.as_str())
                    .await
                    .map_err(provider_unavailable)?;
                Some(ServiceAccountBinding::Managed {
                    backend_id: driver.backend_id().to_owned(),
                    workspace_id: driver.workspace_id().to_owned(),
                    upstream_account_id: upstream,
                    credential: None,
                })
            }
        };
        let sa = ServiceAccount {
            id: ServiceAccountId::generate(),
            namespace_id: ns.clone(),
            name: name.clone(),
            credential_kind: None,
            binding,
            created_at: Timestamp::now(),
        };
        let written = async {
            let mut tx = authorize().await?;
            tx.service_account_insert(&sa).await.map_err(|e| match e {
                StoreError::Conflict { .. } => name_taken(),
                other => other.into(),
            })?;
            let target = ResourceRef::exact(ResourceKind::ServiceAccount, ns, &sa.id);
            let mut event = self.mutation(req, CREATE_AUDIT, &target, tx.evidence());
            if let Some(ServiceAccountBinding::Managed { backend_id, .. }) = &sa.binding {
                event = event.detail("backendId", backend_id.as_str());
            }
            tx.audit_append(&event).await?;
            Ok::<_, Error>(tx.commit().await?)
        }
        .await;
        if let Err(e) = written {
            if let Some(ServiceAccountBinding::Managed {
                upstream_account_id,
                ..
            }) = &sa.binding
                && let Some(driver) = &self.accounts
                && let Err(undo) = driver.delete_account(upstream_account_id).await
            {
                tracing::error!(error = %undo, "a provider account occ made could not be removed");
            }
            return Err(e);
        }
        Ok(sa)
    }

    /// Issues a credential to a ServiceAccount through its Backend (once: a second issuance is
    /// 409). The access token goes to the Secret Driver; the account records only where.
    pub async fn service_account_issue_credential(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &ServiceAccountId,
    ) -> Result<ServiceAccount, Error> {
        let target = ResourceRef::exact(ResourceKind::ServiceAccount, ns, id);
        let authorize = || async {
            let mut tx = self
                .write_authorized(req, Action::Update, &target, ISSUE_AUDIT)
                .await?;
            let sa = found(tx.service_account_get(ns, id).await?)?;
            Ok::<_, Error>((tx, sa))
        };
        let (tx, sa) = authorize().await?;
        drop(tx);
        let Some(driver) = &self.accounts else {
            return Err(Error::new(
                occ_core::ErrorCode::DependencyUnavailable,
                "No ServiceAccount Driver is configured: this installation cannot issue \
                 credentials (configure a chatgpt Backend with workspaceId and adminKeyFile)",
            ));
        };
        let upstream = match &sa.binding {
            Some(ServiceAccountBinding::Managed {
                backend_id,
                upstream_account_id,
                credential: None,
                ..
            }) if backend_id == driver.backend_id() => upstream_account_id.clone(),
            Some(ServiceAccountBinding::Managed {
                credential: Some(_),
                ..
            }) => {
                return Err(Error::conflict(
                    "The ServiceAccount already has a credential; rotation is not supported",
                ));
            }
            _ => {
                return Err(Error::conflict(
                    "The ServiceAccount is not an account of this installation's ServiceAccount \
                     Driver; it can only carry a native reference (PATCH …/credential)",
                ));
            }
        };
        let issued = driver
            .issue_credential(&upstream, &format!("occ-{id}"))
            .await
            .map_err(provider_unavailable)?;
        let value_id = SecretId::generate();
        let locator = match self
            .secrets
            .put(ns, &value_id, issued.access_token.expose())
            .await
        {
            Ok(locator) => locator,
            Err(e) => {
                revoke(driver.as_ref(), &upstream, &issued.id).await;
                return Err(Error::unavailable(format!("credential value: {e}")));
            }
        };
        let credential = IssuedCredential {
            upstream_credential_id: issued.id.clone(),
            value_id: value_id.clone(),
            driver_id: self.secrets.identity().id,
            locator: locator.clone(),
        };
        let written = async {
            let (mut tx, mut current) = authorize().await?;
            match &mut current.binding {
                // Unchanged since the first step: still this account, still no credential.
                Some(ServiceAccountBinding::Managed {
                    upstream_account_id,
                    credential: slot @ None,
                    ..
                }) if *upstream_account_id == upstream => *slot = Some(credential),
                _ => {
                    return Err(Error::conflict(
                        "The ServiceAccount changed concurrently; retry",
                    ));
                }
            }
            current.credential_kind = Some(ServiceAccountCredentialKind::AccessToken);
            tx.service_account_set_credential(&current).await?;
            let event = self
                .mutation(req, ISSUE_AUDIT, &target, tx.evidence())
                .detail("kind", "access_token")
                .detail("backendId", driver.backend_id());
            tx.audit_append(&event).await?;
            tx.commit().await?;
            Ok::<_, Error>(current)
        }
        .await;
        if written.is_err() {
            if let Err(e) = self.secrets.delete(ns, &value_id, &locator).await {
                tracing::error!(error = %e, "an issued credential's value could not be removed");
            }
            revoke(driver.as_ref(), &upstream, &issued.id).await;
        }
        written
    }

    /// Sets or replaces a native ServiceAccount's credential reference (a Secret name and key
    /// the operator keeps). Accounts of a Backend get theirs from `POST …/credentials`.
    pub async fn service_account_set_reference(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &ServiceAccountId,
        kind: ServiceAccountCredentialKind,
        secret_name: String,
        secret_key: String,
    ) -> Result<ServiceAccount, Error> {
        let target = ResourceRef::exact(ResourceKind::ServiceAccount, ns, id);
        let mut tx = self
            .write_authorized(req, Action::Update, &target, REFERENCE_AUDIT)
            .await?;
        let mut sa = found(tx.service_account_get(ns, id).await?)?;
        if matches!(sa.binding, Some(ServiceAccountBinding::Managed { .. })) {
            return Err(Error::conflict(
                "The ServiceAccount belongs to a Backend; its credential is issued with \
                 POST …/credentials, not set by reference",
            ));
        }
        sa.credential_kind = Some(kind);
        sa.binding = Some(ServiceAccountBinding::Native {
            secret_name,
            secret_key,
        });
        tx.service_account_set_credential(&sa).await?;
        let kind_name = match kind {
            ServiceAccountCredentialKind::ApiKey => "api_key",
            ServiceAccountCredentialKind::AccessToken => "access_token",
            ServiceAccountCredentialKind::OauthAccessToken => "oauth_access_token",
        };
        let event = self
            .mutation(req, REFERENCE_AUDIT, &target, tx.evidence())
            .detail("kind", kind_name);
        tx.audit_append(&event).await?;
        tx.commit().await?;
        Ok(sa)
    }

    /// One ServiceAccount.
    pub async fn service_account_get(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &ServiceAccountId,
    ) -> Result<ServiceAccount, Error> {
        let target = ResourceRef::exact(ResourceKind::ServiceAccount, ns, id);
        let (mut tx, _) = self
            .read_authorized(req, Action::Read, &target, "openclaw.service_accounts.read")
            .await?;
        found(tx.service_account_get(ns, id).await?)
    }

    /// Deletes a ServiceAccount no Agent uses.
    pub async fn service_account_delete(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &ServiceAccountId,
    ) -> Result<(), Error> {
        let target = ResourceRef::exact(ResourceKind::ServiceAccount, ns, id);
        let mut tx = self
            .write_authorized(
                req,
                Action::Delete,
                &target,
                "openclaw.service_accounts.delete",
            )
            .await?;
        let sa = found(tx.service_account_get(ns, id).await?)?;
        if let Some(holder) = live_revision_using(&mut tx, ns, id).await? {
            return Err(Error::conflict(format!(
                "The ServiceAccount's credential is used by {holder}; stop or redeploy it first"
            )));
        }
        let removed = tx
            .binding_delete_targeting(ResourceKind::ServiceAccount, id.as_str())
            .await?;
        tx.service_account_delete(ns, id)
            .await
            .map_err(|e| match e {
                StoreError::Reference { .. } => {
                    Error::conflict("The ServiceAccount is used by an Agent's harnessAuth")
                }
                other => other.into(),
            })?;
        let event = self
            .mutation(
                req,
                "openclaw.service_accounts.delete",
                &target,
                tx.evidence(),
            )
            .detail("removedAccessBindings", removed);
        tx.audit_append(&event).await?;
        // Unreferenced (the delete above held): remove what the Backend made before the row
        // goes. A failure keeps the row, so a retry finds and removes the rest.
        if let Some(ServiceAccountBinding::Managed {
            upstream_account_id,
            credential,
            ..
        }) = &sa.binding
        {
            let driver = self.accounts.as_ref().ok_or_else(|| {
                Error::new(
                    occ_core::ErrorCode::DependencyUnavailable,
                    "The ServiceAccount belongs to a Backend this installation no longer \
                     configures; its provider account cannot be removed",
                )
            })?;
            if let Some(c) = credential {
                driver
                    .delete_credential(upstream_account_id, &c.upstream_credential_id)
                    .await
                    .map_err(provider_unavailable)?;
                self.secrets
                    .delete(ns, &c.value_id, &c.locator)
                    .await
                    .map_err(|e| Error::unavailable(format!("credential value: {e}")))?;
            }
            driver
                .delete_account(upstream_account_id)
                .await
                .map_err(provider_unavailable)?;
        }
        Ok(tx.commit().await?)
    }
}

/// What still runs with (or is about to run with) the account's credential though no draft
/// names the account any more: an active revision, or one whose deployment is queued or
/// claimed. Inactive and finished revisions do not hold it.
async fn live_revision_using(
    tx: &mut occ_store::Authorized,
    ns: &NamespaceId,
    id: &ServiceAccountId,
) -> Result<Option<&'static str>, Error> {
    for agent in tx.agent_list(ns).await? {
        for rev in tx.revision_list(ns, &agent.id).await? {
            let uses = rev
                .spec
                .account_credential
                .as_ref()
                .is_some_and(|c| &c.service_account_id == id);
            if !uses {
                continue;
            }
            if agent.active_revision_id.as_ref() == Some(&rev.id) {
                return Ok(Some("an Agent's active revision"));
            }
            let pending = tx
                .work_get(&WorkKey::revision_reconcile(&rev.id))
                .await?
                .is_some_and(|w| matches!(w.state, WorkState::Queued | WorkState::Claimed));
            if pending {
                return Ok(Some("a pending deployment"));
            }
        }
    }
    Ok(None)
}

const CREATE_AUDIT: &str = "openclaw.service_accounts.create";
const ISSUE_AUDIT: &str = "openclaw.service_accounts.credentials.create";
const REFERENCE_AUDIT: &str = "openclaw.service_accounts.update";

fn name_taken() -> Error {
    Error::conflict("A ServiceAccount with this name already exists")
}

/// A provider failure: 503 with the Driver's (credential-free) reason.
fn provider_unavailable(e: AccountDriverError) -> Error {
    Error::new(
        occ_core::ErrorCode::DependencyUnavailable,
        format!("The ServiceAccount provider is unavailable: {e}"),
    )
}

/// Compensation: revokes a credential occ could not record.
async fn revoke(driver: &dyn AccountDriver, account: &str, credential: &str) {
    if let Err(e) = driver.delete_credential(account, credential).await {
        tracing::error!(error = %e, "an issued credential occ could not record was not revoked");
    }
}
