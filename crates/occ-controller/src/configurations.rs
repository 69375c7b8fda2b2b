//! Configurations: native documents in the Configuration Driver, metadata in the store, written
//! behind one compensating boundary:
//!
//! - create: metadata + audit in a transaction, the Driver writes generation 1, then commit; a
//!   Driver failure commits nothing, a failed commit discards the Driver's generation 1;
//! - update: the metadata row is locked, the Driver writes generation n+1, the generation
//!   advances by compare-and-swap, commit, then superseded generations are pruned; a failed
//!   commit discards generation n+1, leaving generation n intact;
//! - an unknown commit outcome compensates nothing (the write may have committed).

use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::resource::{ConfigurationMeta, Generation, SecretBindings};
use occ_core::{ConfigurationId, Error, NamespaceId, Timestamp};
use occ_drivers::configuration::{DocumentKey, WriteReceipt};
use occ_store::{Authorized, StoreError};
use serde_json::{Map, Value};

use crate::authorization::found;
use crate::namespaces::{live_namespace, require_accepting, require_ready};
use crate::{Controller, Request};

/// A Configuration with its document.
#[derive(Debug, Clone, PartialEq)]
pub struct Configuration {
    /// Metadata.
    pub meta: ConfigurationMeta,
    /// The native document of the current generation.
    pub values: Map<String, Value>,
}

/// The validated body of a create or update.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigurationInput {
    /// The whole native document.
    pub values: Map<String, Value>,
    /// New bindings; `None` keeps the current ones on update (and means none on create).
    pub secret_bindings: Option<SecretBindings>,
}

impl Controller {
    /// Requires every bound Secret to exist in the Namespace (404) and `principal` to hold
    /// `secret:operate` on it (403, audited).
    pub(crate) async fn authorize_bindings(
        &self,
        mut tx: Authorized,
        req: &Request,
        ns: &NamespaceId,
        bindings: &SecretBindings,
        audit_action: &str,
    ) -> Result<Authorized, Error> {
        for binding in bindings.values() {
            let target = ResourceRef::exact(ResourceKind::Secret, ns, &binding.source.id);
            tx = self
                .authorize_in(tx, req, Action::Operate, &target, audit_action)
                .await?;
            found(tx.secret_get(ns, &binding.source.id).await?)?;
        }
        Ok(tx)
    }

    async fn run_configuration_hook(&self) -> Result<(), Error> {
        match &self.hooks.before_configuration_commit {
            Some(hook) => hook(),
            None => Ok(()),
        }
    }

    /// Creates a Configuration at generation 1.
    pub async fn configuration_create(
        &self,
        req: &Request,
        ns: &NamespaceId,
        input: ConfigurationInput,
    ) -> Result<Configuration, Error> {
        self.configuration_create_as(req, ns, ConfigurationId::generate(), input, false)
            .await
    }

    /// Creates a Configuration under a given id. `replace_stale` lets the Driver overwrite a
    /// generation-1 document left at that id by an earlier attempt that never committed (a
    /// provisioning job's planned id: nothing else can have written there).
    pub(crate) async fn configuration_create_as(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: ConfigurationId,
        input: ConfigurationInput,
        replace_stale: bool,
    ) -> Result<Configuration, Error> {
        let collection = ResourceRef::collection(ResourceKind::Configuration, ns);
        let mut tx = self
            .write_authorized(
                req,
                Action::Create,
                &collection,
                "openclaw.configurations.create",
            )
            .await?;
        let namespace = live_namespace(&mut tx, ns).await?;
        require_accepting(&namespace)?;
        if namespace.existing_namespace.is_some() {
            require_ready(&namespace)?;
        }
        self.configurations
            .validate(&input.values)
            .map_err(Error::from)?;
        let bindings = input.secret_bindings.unwrap_or_default();
        let mut tx = self
            .authorize_bindings(tx, req, ns, &bindings, "openclaw.configurations.create")
            .await?;
        let meta = ConfigurationMeta {
            id,
            namespace_id: ns.clone(),
            generation: Generation::FIRST,
            secret_bindings: bindings,
            created_at: Timestamp::now(),
        };
        tx.configuration_insert(&meta).await?;
        let target = ResourceRef::exact(ResourceKind::Configuration, ns, &meta.id);
        let event = self
            .mutation(
                req,
                "openclaw.configurations.create",
                &target,
                tx.evidence(),
            )
            .detail("generation", meta.generation.get());
        tx.audit_append(&event).await?;
        let key = DocumentKey {
            namespace_id: ns,
            configuration_id: &meta.id,
            generation: meta.generation,
            created_at: meta.created_at,
        };
        let receipt = self
            .configurations
            .write(key, &input.values, replace_stale)
            .await
            .map_err(Error::from)?;
        let committed = match self.run_configuration_hook().await {
            Ok(()) => tx.commit().await,
            Err(injected) => {
                drop(tx);
                self.undo_document(key, &receipt).await;
                return Err(injected);
            }
        };
        if let Err(e) = committed {
            if !matches!(e, StoreError::CommitOutcomeUnknown(_)) {
                self.undo_document(key, &receipt).await;
            }
            return Err(e.into());
        }
        Ok(Configuration {
            meta,
            values: input.values,
        })
    }

    async fn undo_document(&self, key: DocumentKey<'_>, receipt: &WriteReceipt) {
        if let Err(e) = self.configurations.undo(key, receipt).await {
            tracing::error!(configuration_id = %key.configuration_id, generation = %key.generation, error = %e,
                "could not undo an uncommitted configuration document write");
        }
    }

    /// A Configuration and its current document.
    pub async fn configuration_get(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &ConfigurationId,
    ) -> Result<Configuration, Error> {
        let target = ResourceRef::exact(ResourceKind::Configuration, ns, id);
        let (mut tx, _) = self
            .read_authorized(req, Action::Read, &target, "openclaw.configurations.read")
            .await?;
        let meta = found(tx.configuration_get(ns, id).await?)?;
        drop(tx);
        let values = self
            .configurations
            .read(DocumentKey {
                namespace_id: ns,
                configuration_id: id,
                generation: meta.generation,
                created_at: meta.created_at,
            })
            .await
            .map_err(|e| match e {
                occ_drivers::DriverError::NotFound => {
                    Error::unavailable("the configuration document is missing from its Driver")
                }
                other => Error::from(other),
            })?;
        Ok(Configuration { meta, values })
    }

    /// Replaces the whole document; the generation advances by exactly one.
    pub async fn configuration_update(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &ConfigurationId,
        input: ConfigurationInput,
    ) -> Result<Configuration, Error> {
        let target = ResourceRef::exact(ResourceKind::Configuration, ns, id);
        let mut tx = self
            .write_authorized(
                req,
                Action::Update,
                &target,
                "openclaw.configurations.update",
            )
            .await?;
        let current = found(tx.configuration_lock(ns, id).await?)?;
        self.configurations
            .validate(&input.values)
            .map_err(Error::from)?;
        let bindings = input
            .secret_bindings
            .unwrap_or_else(|| current.secret_bindings.clone());
        let mut tx = self
            .authorize_bindings(tx, req, ns, &bindings, "openclaw.configurations.update")
            .await?;
        let next = current
            .generation
            .next()
            .ok_or_else(|| Error::conflict("The Configuration generation is exhausted"))?;
        let key = DocumentKey {
            namespace_id: ns,
            configuration_id: id,
            generation: next,
            created_at: current.created_at,
        };
        // A document already stored for `next` is a leftover of a write that never committed.
        let receipt = self
            .configurations
            .write(key, &input.values, true)
            .await
            .map_err(Error::from)?;
        let advanced = tx
            .configuration_advance(ns, id, current.generation, &bindings)
            .await;
        let advanced = match advanced {
            Ok(g) => g,
            Err(e) => {
                drop(tx);
                self.undo_document(key, &receipt).await;
                return Err(match e {
                    StoreError::Stale => Error::conflict(
                        "The Configuration generation changed concurrently; read it again and retry",
                    ),
                    other => other.into(),
                });
            }
        };
        let event = self
            .mutation(
                req,
                "openclaw.configurations.update",
                &target,
                tx.evidence(),
            )
            .detail("generation", advanced.get())
            .detail("previousGeneration", current.generation.get());
        tx.audit_append(&event).await?;
        let committed = match self.run_configuration_hook().await {
            Ok(()) => tx.commit().await,
            Err(injected) => {
                drop(tx);
                self.undo_document(key, &receipt).await;
                return Err(injected);
            }
        };
        if let Err(e) = committed {
            if !matches!(e, StoreError::CommitOutcomeUnknown(_)) {
                self.undo_document(key, &receipt).await;
            }
            return Err(e.into());
        }
        if let Err(e) = self
            .configurations
            .prune(ns, id, current.created_at, Some(advanced))
            .await
        {
            tracing::warn!(configuration_id = %id, error = %e, "superseded configuration generations were not pruned");
        }
        let meta = ConfigurationMeta {
            generation: advanced,
            secret_bindings: bindings,
            ..current
        };
        Ok(Configuration {
            meta,
            values: input.values,
        })
    }

    /// Deletes a Configuration no Agent references (409 naming them otherwise). Bindings that
    /// target it are removed with it.
    pub async fn configuration_delete(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &ConfigurationId,
    ) -> Result<(), Error> {
        let target = ResourceRef::exact(ResourceKind::Configuration, ns, id);
        let mut tx = self
            .write_authorized(
                req,
                Action::Delete,
                &target,
                "openclaw.configurations.delete",
            )
            .await?;
        let current = found(tx.configuration_lock(ns, id).await?)?;
        let referencing = tx.configuration_referencing_agents(ns, id).await?;
        if !referencing.is_empty() {
            return Err(Error::conflict(format!(
                "The Configuration is referenced by Agent(s) {}",
                referencing.join(", ")
            )));
        }
        let removed = tx
            .binding_delete_targeting(ResourceKind::Configuration, id.as_str())
            .await?;
        tx.configuration_delete(ns, id).await.map_err(|e| match e {
            StoreError::Reference { .. } => {
                Error::conflict("The Configuration is referenced by an Agent")
            }
            other => other.into(),
        })?;
        let event = self
            .mutation(
                req,
                "openclaw.configurations.delete",
                &target,
                tx.evidence(),
            )
            .detail("removedAccessBindings", removed);
        tx.audit_append(&event).await?;
        tx.commit().await?;
        if let Err(e) = self
            .configurations
            .prune(ns, id, current.created_at, None)
            .await
        {
            tracing::warn!(configuration_id = %id, error = %e, "documents of a deleted configuration were not removed");
        }
        Ok(())
    }
}
