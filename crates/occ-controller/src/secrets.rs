//! Secrets: metadata in the store, values only in the Secret Driver. A value is written before
//! its metadata commits; a failed commit deletes it again.

use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::resource::SecretMeta;
use occ_core::{Error, Name, NamespaceId, SecretId, Timestamp};
use occ_store::StoreError;

use crate::namespaces::{live_namespace, require_ready};
use crate::{Controller, Request, db};

impl Controller {
    /// Secrets of a Namespace the caller may read.
    pub async fn secret_list(
        &self,
        req: &Request,
        ns: &NamespaceId,
    ) -> Result<Vec<SecretMeta>, Error> {
        let tx = self.store.begin_read().await.map_err(db)?;
        let (mut tx, _) = self
            .authorize(
                tx,
                req,
                Action::Read,
                &ResourceRef::namespace(ns),
                "openclaw.secrets.list",
            )
            .await?;
        live_namespace(&mut tx, ns).await?;
        let snapshot = tx
            .policy_snapshot(&req.caller.principal_id)
            .await
            .map_err(db)?;
        let all = tx.secret_list(ns).await.map_err(db)?;
        Ok(all
            .into_iter()
            .filter(|s| {
                Self::allowed(
                    &snapshot,
                    &req.caller,
                    Action::Read,
                    &ResourceRef::exact(ResourceKind::Secret, ns, &s.id),
                )
            })
            .collect())
    }

    /// Creates a Secret (the Namespace must be ready).
    pub async fn secret_create(
        &self,
        req: &Request,
        ns: &NamespaceId,
        name: Name,
        value: String,
    ) -> Result<SecretMeta, Error> {
        let tx = self.store.begin().await.map_err(db)?;
        let collection = ResourceRef::collection(ResourceKind::Secret, ns);
        let (mut tx, evidence) = self
            .authorize(
                tx,
                req,
                Action::Create,
                &collection,
                "openclaw.secrets.create",
            )
            .await?;
        let namespace = live_namespace(&mut tx, ns).await?;
        require_ready(&namespace)?;
        if tx
            .secret_list(ns)
            .await
            .map_err(db)?
            .iter()
            .any(|s| s.name == name)
        {
            return Err(Error::conflict("A Secret with this name already exists"));
        }
        let id = SecretId::generate();
        let locator = self
            .secrets
            .put(ns, &id, &value)
            .await
            .map_err(Error::from)?;
        let secret = SecretMeta {
            id,
            namespace_id: ns.clone(),
            name,
            driver_id: self.secrets.identity().id,
            locator,
            created_at: Timestamp::now(),
        };
        let target = ResourceRef::exact(ResourceKind::Secret, ns, &secret.id);
        let written = async {
            tx.secret_insert(&secret).await?;
            tx.audit_append(&self.mutation(req, "openclaw.secrets.create", &target, &evidence))
                .await?;
            tx.commit().await
        }
        .await;
        if let Err(e) = written {
            if !matches!(e, StoreError::CommitOutcomeUnknown(_)) {
                let _ = self.secrets.delete(ns, &secret.id, &secret.locator).await;
            }
            return Err(match e {
                StoreError::Conflict { .. } => {
                    Error::conflict("A Secret with this name already exists")
                }
                other => db(other),
            });
        }
        Ok(secret)
    }

    /// One Secret's metadata.
    pub async fn secret_get(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &SecretId,
    ) -> Result<SecretMeta, Error> {
        let target = ResourceRef::exact(ResourceKind::Secret, ns, id);
        let tx = self.store.begin_read().await.map_err(db)?;
        let (mut tx, _) = self
            .authorize(tx, req, Action::Read, &target, "openclaw.secrets.read")
            .await?;
        tx.secret_get(ns, id)
            .await
            .map_err(db)?
            .ok_or_else(Error::not_found)
    }

    /// Replaces a Secret's value (the Namespace must be ready).
    pub async fn secret_update(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &SecretId,
        value: String,
    ) -> Result<SecretMeta, Error> {
        let target = ResourceRef::exact(ResourceKind::Secret, ns, id);
        let tx = self.store.begin().await.map_err(db)?;
        let (mut tx, evidence) = self
            .authorize(tx, req, Action::Update, &target, "openclaw.secrets.update")
            .await?;
        let namespace = live_namespace(&mut tx, ns).await?;
        let secret = tx
            .secret_get(ns, id)
            .await
            .map_err(db)?
            .ok_or_else(Error::not_found)?;
        require_ready(&namespace)?;
        tx.audit_append(&self.mutation(req, "openclaw.secrets.update", &target, &evidence))
            .await
            .map_err(db)?;
        let locator = self
            .secrets
            .replace(ns, id, &secret.locator, &value)
            .await
            .map_err(Error::from)?;
        if locator != secret.locator {
            tx.secret_set_locator(ns, id, &locator).await.map_err(db)?;
        }
        Self::commit(tx).await?;
        Ok(SecretMeta { locator, ..secret })
    }

    /// Deletes a Secret nothing references.
    pub async fn secret_delete(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &SecretId,
    ) -> Result<(), Error> {
        let target = ResourceRef::exact(ResourceKind::Secret, ns, id);
        let tx = self.store.begin().await.map_err(db)?;
        let (mut tx, evidence) = self
            .authorize(tx, req, Action::Delete, &target, "openclaw.secrets.delete")
            .await?;
        let secret = tx
            .secret_get(ns, id)
            .await
            .map_err(db)?
            .ok_or_else(Error::not_found)?;
        let configs = tx
            .secret_referencing_configurations(ns, id)
            .await
            .map_err(db)?;
        if !configs.is_empty() {
            return Err(Error::conflict(format!(
                "The Secret is bound by Configuration(s) {}",
                configs.join(", ")
            )));
        }
        let removed = tx
            .binding_delete_targeting(ResourceKind::Secret, id.as_str())
            .await
            .map_err(db)?;
        tx.secret_delete(ns, id).await.map_err(|e| match e {
            StoreError::Reference { .. } => {
                Error::conflict("The Secret is referenced by an Agent's harnessAuth")
            }
            other => db(other),
        })?;
        let event = self
            .mutation(req, "openclaw.secrets.delete", &target, &evidence)
            .detail("removedAccessBindings", removed);
        tx.audit_append(&event).await.map_err(db)?;
        Self::commit(tx).await?;
        if let Err(e) = self.secrets.delete(ns, id, &secret.locator).await {
            tracing::warn!(secret_id = %id, error = %e, "the value of a deleted Secret was not removed from its Driver");
        }
        Ok(())
    }
}
