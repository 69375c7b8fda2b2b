//! Namespaces: list (filtered per item), create (queues ensure work), get, delete (queues
//! teardown; refused while the Namespace holds resources; the name stays reserved).

use occ_core::audit::{AuditKind, AuditOutcome};
use occ_core::authz::{Action, ResourceRef};
use occ_core::preset::Preset;
use occ_core::resource::{Namespace, NamespaceStatus};
use occ_core::work::NewWork;
use occ_core::{Error, ErrorCode, Name, NamespaceId, Timestamp};
use occ_store::StoreError;

use crate::authorization::{audit_in_own_transaction, found, installation_required};
use crate::{Controller, Request};

impl Controller {
    /// Namespaces the caller may read.
    pub async fn namespace_list(&self, req: &Request) -> Result<Vec<Namespace>, Error> {
        let mut tx = self.store.begin_read().await?;
        installation_required(&mut tx).await?;
        let snapshot = tx.policy_snapshot(&req.caller.principal_id).await?;
        let all = tx.namespace_list().await?;
        Ok(all
            .into_iter()
            .filter(|ns| {
                Self::allowed(
                    &snapshot,
                    &req.caller,
                    Action::Read,
                    &ResourceRef::namespace(&ns.id),
                )
            })
            .collect())
    }

    /// Creates a Namespace (`provisioning`) and queues its ensure work.
    pub async fn namespace_create(
        &self,
        req: &Request,
        name: Name,
        existing: Option<String>,
    ) -> Result<Namespace, Error> {
        let (mut tx, installation) = self
            .write_authorized_on_installation(
                req,
                Action::Create,
                ResourceRef::namespace_collection,
                "openclaw.namespaces.create",
            )
            .await?;
        if existing.is_some() {
            tx = self
                .authorize_in(
                    tx,
                    req,
                    Action::Administer,
                    &ResourceRef::installation(&installation.id),
                    "openclaw.namespaces.create",
                )
                .await?;
            if !self.compute.adopts_existing_namespaces {
                return Err(Error::conflict(format!(
                    "existingNamespace (adopting an existing Kubernetes namespace) is not supported by the {} Compute Driver",
                    self.compute.identity.implementation
                )));
            }
        }
        if let Some(taken) = tx.namespace_get_by_name(name.as_str()).await? {
            return Err(Error::conflict(if taken.deleted_at.is_some() {
                "The name belongs to a deleted Namespace and stays reserved"
            } else {
                "A Namespace with this name already exists"
            }));
        }
        let ns = Namespace {
            id: NamespaceId::generate(),
            name,
            existing_namespace: existing,
            status: NamespaceStatus::Provisioning,
            created_at: Timestamp::now(),
            deleted_at: None,
        };
        tx.namespace_insert(&ns).await.map_err(|e| match e {
            StoreError::Conflict { .. } => {
                Error::conflict("A Namespace with this name already exists")
            }
            other => other.into(),
        })?;
        tx.namespace_seed_presets(&ns).await?;
        tx.work_enqueue(&NewWork::namespace_ready(&ns.id, &req.caller.principal_id))
            .await?;
        let target = ResourceRef::namespace(&ns.id);
        let event = self.mutation(req, "openclaw.namespaces.create", &target, tx.evidence());
        tx.audit_append(&event).await?;
        tx.commit().await?;
        Ok(ns)
    }

    /// One Namespace.
    pub async fn namespace_get(&self, req: &Request, id: &NamespaceId) -> Result<Namespace, Error> {
        let (mut tx, _) = self
            .read_authorized(
                req,
                Action::Read,
                &ResourceRef::namespace(id),
                "openclaw.namespaces.read",
            )
            .await?;
        live_namespace(&mut tx, id).await
    }

    /// Starts deleting an empty Namespace: `deleting` and teardown work queued. Repeating it while
    /// teardown is pending changes nothing.
    pub async fn namespace_delete(
        &self,
        req: &Request,
        id: &NamespaceId,
    ) -> Result<Namespace, Error> {
        let target = ResourceRef::namespace(id);
        let mut tx = self
            .write_authorized(req, Action::Delete, &target, "openclaw.namespaces.delete")
            .await?;
        let ns = found(
            tx.namespace_lock(id)
                .await?
                .filter(|n| n.deleted_at.is_none()),
        )?;
        let contents = tx.namespace_contents(id).await?;
        // Built-in Presets nobody changed go with their Namespace; any other Preset keeps it.
        let (seeds, kept): (Vec<Preset>, Vec<Preset>) = tx
            .preset_list(id)
            .await?
            .into_iter()
            .partition(Preset::is_unchanged_seed);
        let kept: Vec<String> = kept.iter().map(|p| p.id.to_string()).collect();
        // A provisioning job still to run would create resources in it.
        let provisioning = tx.provisioning_unfinished(id).await?;
        if !contents.is_empty() || !kept.is_empty() || provisioning {
            let mut parts = Vec::new();
            if provisioning {
                parts.push("Agent provisioning jobs that have not finished".to_owned());
            }
            for (kind, ids) in [
                ("agents", &contents.agents),
                ("configurations", &contents.configurations),
                ("secrets", &contents.secrets),
                ("service accounts", &contents.service_accounts),
                ("credential sources", &contents.credential_sources),
                ("presets", &kept),
            ] {
                if !ids.is_empty() {
                    parts.push(format!("{kind}: {}", ids.join(", ")));
                }
            }
            return Err(Error::new(
                ErrorCode::NamespaceNotEmpty,
                format!("The Namespace still holds {}", parts.join("; ")),
            ));
        }
        if ns.status == NamespaceStatus::Deleting {
            // teardown is already queued: repeating the request changes nothing
            return Ok(ns);
        }
        if !tx
            .namespace_set_status(id, ns.status, NamespaceStatus::Deleting)
            .await?
        {
            return Err(Error::conflict("The Namespace changed concurrently; retry"));
        }
        // (Bindings naming them go with the Namespace's own bindings at teardown.)
        for seed in &seeds {
            tx.preset_delete_with_namespace(id, &seed.id).await?;
        }
        tx.work_enqueue(&NewWork::namespace_deleted(id, &req.caller.principal_id))
            .await?;
        let event = self
            .mutation(req, "openclaw.namespaces.delete", &target, tx.evidence())
            .detail("removedBuiltInPresets", seeds.len());
        tx.audit_append(&event).await?;
        tx.commit().await?;
        Ok(Namespace {
            status: NamespaceStatus::Deleting,
            ..ns
        })
    }

    /// A refused mutation audited as a failure (e.g. deploy into a Namespace that is not ready).
    pub(crate) async fn audit_failure(
        &self,
        req: &Request,
        action: &str,
        resource: &ResourceRef,
        reason: &str,
    ) -> Result<(), Error> {
        let event = self
            .event(
                req,
                AuditKind::Mutation,
                action,
                resource,
                AuditOutcome::Failure,
            )
            .reason_code(reason);
        Ok(audit_in_own_transaction(&self.store, &event).await?)
    }
}

/// The live (not tombstoned) Namespace, or 404.
pub(crate) async fn live_namespace(
    tx: &mut occ_store::Tx,
    id: &NamespaceId,
) -> Result<Namespace, Error> {
    found(
        tx.namespace_get(id)
            .await?
            .filter(|n| n.deleted_at.is_none()),
    )
}

/// 409 unless the Namespace accepts new resources (`provisioning` or `ready`).
pub(crate) fn require_accepting(ns: &Namespace) -> Result<(), Error> {
    match ns.status {
        NamespaceStatus::Provisioning | NamespaceStatus::Ready => Ok(()),
        NamespaceStatus::Failed | NamespaceStatus::Deleting => Err(Error::conflict(format!(
            "The Namespace is {} and accepts no new resources",
            ns.status.as_str()
        ))),
    }
}

/// 409 `NAMESPACE_NOT_READY` unless the Namespace is `ready`.
pub(crate) fn require_ready(ns: &Namespace) -> Result<(), Error> {
    if ns.status == NamespaceStatus::Ready {
        Ok(())
    } else {
        Err(Error::new(
            ErrorCode::NamespaceNotReady,
            "The Namespace is not ready",
        ))
    }
}
