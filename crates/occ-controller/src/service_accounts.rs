//! ServiceAccounts: the minimal resource a `chatgpt_service_account` harness auth names. No
//! credential value is ever stored or returned.

use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::resource::ServiceAccount;
use occ_core::{Error, Name, NamespaceId, ServiceAccountId, Timestamp};
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
        let snapshot = tx.policy_snapshot(&req.caller.principal_id).await?;
        let all = tx.service_account_list(ns).await?;
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
        let collection = ResourceRef::collection(ResourceKind::ServiceAccount, ns);
        let mut tx = self
            .write_authorized(
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
            other => other.into(),
        })?;
        let target = ResourceRef::exact(ResourceKind::ServiceAccount, ns, &sa.id);
        let event = self.mutation(
            req,
            "openclaw.service_accounts.create",
            &target,
            tx.evidence(),
        );
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
        found(tx.service_account_get(ns, id).await?)?;
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
        Ok(tx.commit().await?)
    }
}
