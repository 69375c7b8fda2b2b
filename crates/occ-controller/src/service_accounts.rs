//! ServiceAccounts: the minimal resource a `chatgpt_service_account` harness auth names. No
//! credential value is ever stored or returned.

use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::resource::ServiceAccount;
use occ_core::{Error, Name, NamespaceId, ServiceAccountId, Timestamp};
use occ_store::StoreError;

use crate::namespaces::{live_namespace, require_accepting};
use crate::{Controller, Request, db};

impl Controller {
    /// ServiceAccounts of a Namespace the caller may read.
    pub async fn service_account_list(
        &self,
        req: &Request,
        ns: &NamespaceId,
    ) -> Result<Vec<ServiceAccount>, Error> {
        let tx = self.store.begin_read().await.map_err(db)?;
        let (mut tx, _) = self
            .authorize(
                tx,
                req,
                Action::Read,
                &ResourceRef::namespace(ns),
                "openclaw.service_accounts.list",
            )
            .await?;
        live_namespace(&mut tx, ns).await?;
        let snapshot = tx
            .policy_snapshot(&req.caller.principal_id)
            .await
            .map_err(db)?;
        let all = tx.service_account_list(ns).await.map_err(db)?;
        Ok(all
            .into_iter()
            .filter(|s| {
                Self::allowed(
                    &snapshot,
                    &req.caller,
                    Action::Read,
                    &ResourceRef::exact(ResourceKind::ServiceAccount, ns, &s.id),
                )
            })
            .collect())
    }

    /// Creates a ServiceAccount.
    pub async fn service_account_create(
        &self,
        req: &Request,
        ns: &NamespaceId,
        name: Name,
    ) -> Result<ServiceAccount, Error> {
        let tx = self.store.begin().await.map_err(db)?;
        let collection = ResourceRef::collection(ResourceKind::ServiceAccount, ns);
        let (mut tx, evidence) = self
            .authorize(
                tx,
                req,
                Action::Create,
                &collection,
                "openclaw.service_accounts.create",
            )
            .await?;
        let namespace = live_namespace(&mut tx, ns).await?;
        require_accepting(&namespace)?;
        let sa = ServiceAccount {
            id: ServiceAccountId::generate(),
            namespace_id: ns.clone(),
            name,
            credential_kind: None,
            created_at: Timestamp::now(),
        };
        tx.service_account_insert(&sa).await.map_err(|e| match e {
            StoreError::Conflict { .. } => {
                Error::conflict("A ServiceAccount with this name already exists")
            }
            other => db(other),
        })?;
        let target = ResourceRef::exact(ResourceKind::ServiceAccount, ns, &sa.id);
        tx.audit_append(&self.mutation(
            req,
            "openclaw.service_accounts.create",
            &target,
            &evidence,
        ))
        .await
        .map_err(db)?;
        Self::commit(tx).await?;
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
        let tx = self.store.begin_read().await.map_err(db)?;
        let (mut tx, _) = self
            .authorize(
                tx,
                req,
                Action::Read,
                &target,
                "openclaw.service_accounts.read",
            )
            .await?;
        tx.service_account_get(ns, id)
            .await
            .map_err(db)?
            .ok_or_else(Error::not_found)
    }

    /// Deletes a ServiceAccount no Agent uses.
    pub async fn service_account_delete(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &ServiceAccountId,
    ) -> Result<(), Error> {
        let target = ResourceRef::exact(ResourceKind::ServiceAccount, ns, id);
        let tx = self.store.begin().await.map_err(db)?;
        let (mut tx, evidence) = self
            .authorize(
                tx,
                req,
                Action::Delete,
                &target,
                "openclaw.service_accounts.delete",
            )
            .await?;
        tx.service_account_get(ns, id)
            .await
            .map_err(db)?
            .ok_or_else(Error::not_found)?;
        let removed = tx
            .binding_delete_targeting(ResourceKind::ServiceAccount, id.as_str())
            .await
            .map_err(db)?;
        tx.service_account_delete(ns, id)
            .await
            .map_err(|e| match e {
                StoreError::Reference { .. } => {
                    Error::conflict("The ServiceAccount is used by an Agent's harnessAuth")
                }
                other => db(other),
            })?;
        let event = self
            .mutation(req, "openclaw.service_accounts.delete", &target, &evidence)
            .detail("removedAccessBindings", removed);
        tx.audit_append(&event).await.map_err(db)?;
        Self::commit(tx).await
    }
}
