//! Credential sources: a Namespace's saved provider connections
//! ([`occ_core::credential_source`]), registered with occ's built-in Credential Gateway. The
//! gateway keeps no copy of a value (the Secret Driver holds it, and occ reads it where a
//! source is delivered), so registering, replacing and removing a source is one transaction
//! here, with its audit event; a stored source is always `ready`.
//!
//! Checks follow the reference's order: the operation's own grant, a ready Namespace, the
//! type in the catalog (409), the fields the type takes (404), then `secret:operate` on each
//! Secret the source names and that Secret in this Namespace (403, 404).

use std::collections::BTreeMap;

use occ_core::authz::{Action, ResourceKind, ResourceRef};
use occ_core::credential_source::{CredentialSource, check_fields};
use occ_core::resource::SecretRef;
use occ_core::{CredentialSourceId, Error, Name, NamespaceId, Timestamp};
use occ_store::{Authorized, StoreError};

use crate::authorization::found;
use crate::namespaces::{live_namespace, require_ready};
use crate::{Controller, Request};

const NAME_TAKEN: &str =
    "A credential source with this name already exists in this Namespace. Choose a different name.";

/// What `createCredentialSource` asks for (already well-formed).
#[derive(Debug, Clone)]
pub struct CredentialSourceInput {
    /// Unique in the Namespace.
    pub name: Name,
    /// A catalog type.
    pub source_type: String,
    /// Non-secret settings.
    pub config: BTreeMap<String, String>,
    /// Secrets of this Namespace, by field.
    pub secrets: BTreeMap<String, SecretRef>,
}

fn name_conflict(e: StoreError) -> Error {
    match e {
        StoreError::Conflict { .. } => Error::conflict(NAME_TAKEN),
        other => other.into(),
    }
}

impl Controller {
    /// The credential sources of a Namespace the caller may read.
    pub async fn credential_source_list(
        &self,
        req: &Request,
        ns: &NamespaceId,
    ) -> Result<Vec<CredentialSource>, Error> {
        let (mut tx, _) = self
            .read_authorized(
                req,
                Action::Read,
                &ResourceRef::namespace(ns),
                "openclaw.credential_sources.list",
            )
            .await?;
        live_namespace(&mut tx, ns).await?;
        let all = tx.credential_source_list(ns).await?;
        Self::readable(&mut tx, req, ns, ResourceKind::CredentialSource, all, |s| {
            &s.id
        })
        .await
    }

    /// One credential source.
    pub async fn credential_source_get(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &CredentialSourceId,
    ) -> Result<CredentialSource, Error> {
        let target = ResourceRef::exact(ResourceKind::CredentialSource, ns, id);
        let (mut tx, _) = self
            .read_authorized(
                req,
                Action::Read,
                &target,
                "openclaw.credential_sources.read",
            )
            .await?;
        found(tx.credential_source_get(ns, id).await?)
    }

    /// Registers a credential source (the Namespace must be ready; the name free in it).
    pub async fn credential_source_create(
        &self,
        req: &Request,
        ns: &NamespaceId,
        input: CredentialSourceInput,
    ) -> Result<CredentialSource, Error> {
        const AUDIT: &str = "openclaw.credential_sources.create";
        let collection = ResourceRef::collection(ResourceKind::CredentialSource, ns);
        let mut tx = self
            .write_authorized(req, Action::Create, &collection, AUDIT)
            .await?;
        let namespace = live_namespace(&mut tx, ns).await?;
        require_ready(&namespace)?;
        check_fields(&input.source_type, &input.config, &input.secrets)?;
        let mut tx = self
            .authorize_source_secrets(tx, req, ns, &input.secrets, AUDIT)
            .await?;
        let now = Timestamp::now();
        let source = CredentialSource {
            id: CredentialSourceId::generate(),
            namespace_id: ns.clone(),
            name: input.name,
            source_type: input.source_type,
            config: input.config,
            secrets: input.secrets,
            created_at: now,
            updated_at: now,
        };
        tx.credential_source_insert(&source)
            .await
            .map_err(name_conflict)?;
        let target = ResourceRef::exact(ResourceKind::CredentialSource, ns, &source.id);
        let event = self
            .mutation(req, AUDIT, &target, tx.evidence())
            .detail("type", source.source_type.as_str())
            .detail("fields", source.secrets.keys().cloned().collect::<Vec<_>>());
        tx.audit_append(&event).await?;
        tx.commit().await?;
        Ok(source)
    }

    /// Replaces the Secrets of a credential source (`updateCredentialSource` takes `secrets`
    /// only): the new set is checked against the type like a new source's. What runs keeps the
    /// key it was given; the next delivery reads the new Secrets.
    pub async fn credential_source_update(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &CredentialSourceId,
        secrets: BTreeMap<String, SecretRef>,
    ) -> Result<CredentialSource, Error> {
        const AUDIT: &str = "openclaw.credential_sources.update";
        let target = ResourceRef::exact(ResourceKind::CredentialSource, ns, id);
        let mut tx = self
            .write_authorized(req, Action::Update, &target, AUDIT)
            .await?;
        let namespace = live_namespace(&mut tx, ns).await?;
        let current = found(tx.credential_source_get(ns, id).await?)?;
        require_ready(&namespace)?;
        check_fields(&current.source_type, &current.config, &secrets)?;
        let mut tx = self
            .authorize_source_secrets(tx, req, ns, &secrets, AUDIT)
            .await?;
        let now = Timestamp::now();
        let source = CredentialSource {
            secrets,
            updated_at: now,
            ..current
        };
        tx.credential_source_replace_secrets(&source, now).await?;
        let event = self
            .mutation(req, AUDIT, &target, tx.evidence())
            .detail("fields", source.secrets.keys().cloned().collect::<Vec<_>>());
        tx.audit_append(&event).await?;
        tx.commit().await?;
        Ok(source)
    }

    /// Removes a credential source and the access bindings that name it (its Secrets stay).
    pub async fn credential_source_delete(
        &self,
        req: &Request,
        ns: &NamespaceId,
        id: &CredentialSourceId,
    ) -> Result<(), Error> {
        const AUDIT: &str = "openclaw.credential_sources.delete";
        let target = ResourceRef::exact(ResourceKind::CredentialSource, ns, id);
        let mut tx = self
            .write_authorized(req, Action::Delete, &target, AUDIT)
            .await?;
        found(tx.credential_source_get(ns, id).await?)?;
        let removed = tx
            .binding_delete_targeting(ResourceKind::CredentialSource, id.as_str())
            .await?;
        tx.credential_source_delete(ns, id).await?;
        let event = self
            .mutation(req, AUDIT, &target, tx.evidence())
            .detail("removedAccessBindings", removed);
        tx.audit_append(&event).await?;
        tx.commit().await?;
        Ok(())
    }

    /// `secret:operate` on each Secret a source names (an audited 403 otherwise), and each
    /// Secret held by this Namespace (404).
    async fn authorize_source_secrets(
        &self,
        mut tx: Authorized,
        req: &Request,
        ns: &NamespaceId,
        secrets: &BTreeMap<String, SecretRef>,
        audit_action: &str,
    ) -> Result<Authorized, Error> {
        for secret in secrets.values() {
            let target = ResourceRef::exact(ResourceKind::Secret, ns, &secret.id);
            tx = self
                .authorize_in(tx, req, Action::Operate, &target, audit_action)
                .await?;
            found(tx.secret_get(ns, &secret.id).await?)?;
        }
        Ok(tx)
    }
}
