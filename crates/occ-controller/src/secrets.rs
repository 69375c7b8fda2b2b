//! Secrets: metadata in the store, values only in the Secret Driver. A value is written before
//! its metadata commits; a failed commit deletes it again.

use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::resource::SecretMeta;
use occ_core::{Error, Name, NamespaceId, SecretId, Timestamp};
use occ_store::StoreError;

use crate::authorization::found;
use crate::namespaces::{live_namespace, require_ready};
use crate::{Controller, Request};

impl Controller {
    /// Secrets of a Namespace the caller may read.
    pub async fn secret_list(
        &self,
        req: &Request,
        ns: &NamespaceId,
    ) -> Result<Vec<SecretMeta>, Error> {
        let (mut tx, _) = self
            .read_authorized(
                req,
                Action::Read,
                &ResourceRef::namespace(ns),
                "openclaw.secrets.list",
            )
            .await?;
        live_namespace(&mut tx, ns).await?;
        let all = tx.secret_list(ns).await?;
        Self::readable(&mut tx, req, ns, ResourceKind::Secret, all, |s| &s.id).await
    }

    /// Creates a Secret (the Namespace must be ready).
    pub async fn secret_create(
        &self,
        req: &Request,
        ns: &NamespaceId,
        name: Name,
        value: String,
    ) -> Result<SecretMeta, Error> {
        let collection = ResourceRef::collection(ResourceKind::Secret, ns);
        let mut tx = self
            .write_authorized(req, Action::Create, &collection, "openclaw.secrets.create")
            .await?;
        let namespace = live_namespace(&mut tx, ns).await?;
        require_ready(&namespace)?;
        if tx.secret_list(ns).await?.iter().any(|s| s.name == name) {
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
            let event = self.mutation(req, "openclaw.secrets.create", &target, tx.evidence());
            tx.audit_append(&event).await?;
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
                other => other.into(),
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
        let (mut tx, _) = self
            .read_authorized(req, Action::Read, &target, "openclaw.secrets.read")
            .await?;
        found(tx.secret_get(ns, id).await?)
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
        let mut tx = self
            .write_authorized(req, Action::Update, &target, "openclaw.secrets.update")
            .await?;
        let namespace = live_namespace(&mut tx, ns).await?;
        let secret = found(tx.secret_get(ns, id).await?)?;
        require_ready(&namespace)?;
        let event = self.mutation(req, "openclaw.secrets.update", &target, tx.evidence());
        tx.audit_append(&event).await?;
        let locator = self
            .secrets
            .replace(ns, id, &secret.locator, &value)
            .await
            .map_err(Error::from)?;
        if locator != secret.locator {
            tx.secret_set_locator(ns, id, &locator).await?;
        }
        tx.commit().await?;
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
        let mut tx = self
            .write_authorized(req, Action::Delete, &target, "openclaw.secrets.delete")
            .await?;
        let secret = found(tx.secret_get(ns, id).await?)?;
        let configs = tx.secret_referencing_configurations(ns, id).await?;
        if !configs.is_empty() {
            return Err(Error::conflict(format!(
                "The Secret is bound by Configuration(s) {}",
                configs.join(", ")
            )));
        }
        let sources = tx.secret_referencing_credential_sources(ns, id).await?;
        if !sources.is_empty() {
            return Err(Error::conflict(format!(
                "The Secret holds a credential of credential source(s) {}",
                sources.join(", ")
            )));
        }
        let removed = tx
            .binding_delete_targeting(ResourceKind::Secret, id.as_str())
            .await?;
        tx.secret_delete(ns, id).await.map_err(|e| match e {
            StoreError::Reference { .. } => {
                Error::conflict("The Secret is referenced by an Agent's harnessAuth")
            }
            other => other.into(),
        })?;
        let event = self
            .mutation(req, "openclaw.secrets.delete", &target, tx.evidence())
            .detail("removedAccessBindings", removed);
        tx.audit_append(&event).await?;
        tx.commit().await?;
        if let Err(e) = self.secrets.delete(ns, id, &secret.locator).await {
            tracing::warn!(secret_id = %id, error = %e, "the value of a deleted Secret was not removed from its Driver");
        }
        Ok(())
    }
}
